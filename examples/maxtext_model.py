"""MaxText's own model, handed to the explorer exactly as MaxText holds it, and held against plain
jax's compile of the same program.

MaxText (PyPI `maxtext`, 0.2.5) needs Python >= 3.12; run this in the environment that
docs/from-maxtext.md's install step makes (MaxText's own requirements resolved with the
explorer's):

    python examples/maxtext_model.py            # prints the comparison as JSON

The model is MaxText's Mixtral-style MoE decoder (`decoder_block=mixtral`), tiny: 2 layers,
d_model 256, 4 experts top-2, vocab 1024, sequence 128, batch 8, on its own 12-axis mesh
(fsdp=2 x expert=4) over 8 fake CPU devices, with its own `logical_axis_rules` and its AdamW
train step as `train_compile.py` builds it. The MoE layer uses dense matmuls
(`sparse_matmul=False`, `megablox=False`): the CPU cannot compile MaxText's ragged all-to-all;
`capacity_factor=1.0` gives it GShard's capacity-limited dispatch, as docs/from-maxtext.md does.

The two lines that take a MaxText config to the explorer are the last `with` block: MaxText's
mesh and logical-axis-rules contexts around `explorer.analyze`, as MaxText traces its step.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("DECOUPLE_GCLOUD", "TRUE")          # MaxText without Google Cloud
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import maxtext.configs  # noqa: E402
from flax.linen.partitioning import axis_rules  # noqa: E402
from maxtext.configs import pyconfig  # noqa: E402
from maxtext.trainers.pre_train import train, train_compile  # noqa: E402
from maxtext.utils import maxtext_utils, sharding  # noqa: E402
from plain_jax_compare import (  # noqa: E402
    explorer_name,
    kept_inputs,
    padded,
    plain_collectives,
    report_collectives,
    trimmed,
)

import explorer  # noqa: E402

SETTINGS = ["decoder_block=mixtral", "base_num_decoder_layers=2", "base_emb_dim=256",
            "base_num_query_heads=4", "base_num_kv_heads=4", "head_dim=64", "base_mlp_dim=512",
            "base_moe_mlp_dim=512", "num_experts=4", "num_experts_per_tok=2",
            "vocab_size=1024", "max_target_length=128", "per_device_batch_size=1",
            "ici_fsdp_parallelism=2", "ici_expert_parallelism=4", "dataset_type=synthetic",
            "sparse_matmul=False", "megablox=False", "capacity_factor=1.0",
            "enable_checkpointing=False", "run_name=explore"]

def train_step(settings=SETTINGS):
    """MaxText's config, mesh and train step with its abstract inputs, as train_compile.py
    builds them: (config, mesh, step, args, kwargs, in_shardings, out_shardings, donate)."""
    base = os.path.join(os.path.dirname(maxtext.configs.__file__), "base.yml")
    config = pyconfig.initialize([None, base, *settings])
    mesh = maxtext_utils.get_mesh_from_config(config)
    args, kwargs, state_shardings, _, model = train_compile.get_shaped_inputs(mesh, config)
    params_shardings, state_shardings = sharding.maybe_update_params_sharding_with_opt(
        config, state_shardings)
    state_in = sharding.build_zero1_input_state_mesh_shardings(config, state_shardings,
                                                               params_shardings)
    data_sharding = sharding.get_input_data_sharding(config, mesh)
    signature = maxtext_utils.get_functional_train_with_signature(
        train.train_step, data_sharding, state_in, model, config, params_shardings)
    step, in_shardings, out_shardings, _, donate = signature
    return config, mesh, step, args, kwargs, in_shardings, out_shardings, donate


def main() -> dict:
    config, mesh, step, args, kwargs, in_shardings, out_shardings, donate = train_step()

    # Plain jax, as MaxText's train_compile.py compiles its step.
    with jax.set_mesh(mesh), axis_rules(config.logical_axis_rules):
        compiled = jax.jit(step, in_shardings=in_shardings, out_shardings=out_shardings,
                           donate_argnums=donate).lower(*args, **kwargs).compile()
    memory = compiled.memory_analysis()
    # Every input's layout as plain jax placed it, by the explorer's name for it (its key path,
    # dotted, the batch's after the state's).
    placed = jax.tree_util.tree_flatten_with_path(compiled.input_shardings[0])[0]
    layouts = {explorer_name(path): padded(s.spec, len(leaf.shape))
               for (path, s), leaf in zip(placed, kept_inputs(args, compiled), strict=True)}

    # The explorer: the same step and state, under MaxText's own contexts.
    mesh_text = ",".join(f"{name}={size}" for name, size in mesh.shape.items())
    with jax.set_mesh(mesh), axis_rules(config.logical_axis_rules):
        report = explorer.analyze(step, *args, mesh=mesh_text,
                                  donate=[r"^model\.", r"^optimizer\."],
                                  out_specs=out_shardings)

    # Compared without trailing whole dimensions: a key's data has the key's own dimension,
    # which jax lays out whole.
    inputs = {t.name: trimmed(t.spec) for t in report.tensors if t.kind == "input"}
    differ = sorted(n for n, spec in layouts.items() if inputs.get(n) != trimmed(spec))
    return {
        "plain": {"collectives": plain_collectives(compiled.as_text()),
                  "memory": [memory.argument_size_in_bytes, memory.output_size_in_bytes,
                             memory.temp_size_in_bytes, memory.alias_size_in_bytes],
                  "inputs": len(layouts)},
        "layouts_differ": differ,
        "explorer": {"collectives": report_collectives(report),
                     "memory": [report.memory.arguments, report.memory.outputs,
                                report.memory.temporaries, report.memory.aliased],
                     "inputs": len(inputs)},
        "notes": list(report.notes),
        "backend": report.backend,
    }


if __name__ == "__main__":
    json.dump(main(), sys.stdout, indent=1)
    print()
