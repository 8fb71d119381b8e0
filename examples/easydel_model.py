"""EasyDeL's own model, handed to the explorer exactly as EasyDeL holds it, and held against plain
jax's compile of the same program.

EasyDeL (PyPI `easydel`, 0.3.0) needs Python >= 3.12; run this in the environment that
docs/from-easydel.md's install step makes (EasyDeL's own requirements resolved with the
explorer's, jax at the explorer's floor):

    python examples/easydel_model.py            # prints the comparison as JSON

The model is EasyDeL's Llama (`ed.LlamaConfig` through `ed.AutoEasyDeLModelForCausalLM`), tiny:
2 layers, hidden 256, 4 heads, MLP 512, vocab 1024, sequence 128, batch 8, on EasyDeL's own
5-axis mesh (dp, fsdp, ep, tp, sp) = (1, 2, 1, 4, 1) over 8 fake CPU devices, its state sharded
by its own partition rules and its optimizer state (AdamW) made as its Trainer makes them, and
its Trainer's own `training_step` jitted as `Trainer.configure_functions` jits it.

The lines that take an EasyDeL model to the explorer are the two `explorer.analyze` calls:
EasyDeL's own mesh given as `mesh=`, held in force while the step is traced, as the Trainer
calls its step under it.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from functools import partial

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# EASYDEL_AUTO (on by default) appends GPU-only flags to XLA_FLAGS at import, which the CPU
# backend refuses; off, EasyDeL leaves the environment alone.
os.environ["EASYDEL_AUTO"] = "0"

# EasyDeL 0.3.0 patches six of transformers' torch models at import, reading attributes of
# transformers' placeholders, which raise ImportError without torch; the placeholders hidden,
# each patch finds nothing to patch (none of them is this model).
for _name in ("dbrx", "glm4v_moe", "llama4", "phimoe", "qwen3_5_moe", "qwen3_next"):
    setattr(importlib.import_module(f"transformers.models.{_name}"), f"modeling_{_name}", None)

import easydel as ed  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402
from easydel.trainers.trainer._fn import training_step  # noqa: E402
from flax import nnx  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec  # noqa: E402
from plain_jax_compare import (  # noqa: E402
    explorer_name,
    kept_inputs,
    padded,
    plain_collectives,
    report_collectives,
    trimmed,
)

import explorer  # noqa: E402

BATCH, SEQUENCE = 8, 128

def train_step(dtype=jnp.float32):
    """EasyDeL's Llama, its sharded AdamW state, a batch and its Trainer's step, computing in
    `dtype`: (mesh, state, step, args)."""
    config = ed.LlamaConfig(
        vocab_size=1024, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=SEQUENCE,
        sharding_axis_dims=(1, 2, 1, 4, 1), attn_mechanism=ed.AttentionMechanisms.VANILLA)
    model = ed.AutoEasyDeLModelForCausalLM.from_config(
        config, dtype=dtype, param_dtype=jnp.float32, rngs=nnx.Rngs(0))
    mesh = model.mesh
    # The state as EasyDeL's Trainer configures it (`_configure_state`): the optimizer state
    # made, then the whole state sharded by the model's partition rules.
    with mesh:
        state = model.to_state().init_tx(optax.adamw(1e-3))
        state = state.shard_state(partition_rules=model._get_partition_rules(None), mesh=mesh)
    batch = {"input_ids": jnp.zeros((BATCH, SEQUENCE), jnp.int32),
             "attention_mask": jnp.ones((BATCH, SEQUENCE), jnp.int32)}
    # The step as `Trainer.configure_functions` jits it: its static arguments (loss config,
    # schedule, the batch's spec TrainingArguments defaults to, accumulation steps) bound.
    step = partial(training_step, loss_config=None, learning_rate_fn=None,
                   partition_spec=PartitionSpec(("dp", "fsdp"), "sp"),
                   gradient_accumulation_steps=1)
    return mesh, state, step, (state, batch)


def main() -> dict:
    mesh, state, step, args = train_step()

    # Plain jax, as the Trainer compiles and calls its step.
    replicated = NamedSharding(mesh, PartitionSpec())
    with mesh:
        compiled = jax.jit(step, in_shardings=(state.shardings, replicated),
                           out_shardings=(state.shardings, replicated),
                           donate_argnums=(0,)).lower(*args).compile()
    memory = compiled.memory_analysis()
    # The same, its outputs' layout left to the compiler: the program the explorer compiles
    # without out_specs.
    with mesh:
        free = jax.jit(step, in_shardings=(state.shardings, replicated),
                       donate_argnums=(0,)).lower(*args).compile()
    free_memory = free.memory_analysis()
    placed = jax.tree_util.tree_flatten_with_path(compiled.input_shardings[0])[0]
    layouts = {explorer_name(path): padded(s.spec, len(leaf.shape))
               for (path, s), leaf in zip(placed, kept_inputs(args, compiled), strict=True)}

    # The explorer: the same step and state, on EasyDeL's mesh, which the explorer holds in
    # force while it traces (jax.set_mesh and the legacy `with mesh:` EasyDeL's helpers read).
    report = explorer.analyze(step, *args, mesh=mesh, donate=DONATE)
    # And as the Trainer pins it: its out_shardings given as out_specs.
    pinned = explorer.analyze(step, *args, mesh=mesh, donate=DONATE,
                              out_specs=(state.shardings, replicated))

    inputs = {t.name: trimmed(t.spec) for t in report.tensors if t.kind == "input"}
    differ = sorted(n for n, spec in layouts.items() if inputs.get(n) != trimmed(spec))
    return {
        "plain": {"collectives": plain_collectives(compiled.as_text()),
                  "memory": [memory.argument_size_in_bytes, memory.output_size_in_bytes,
                             memory.temp_size_in_bytes, memory.alias_size_in_bytes],
                  "inputs": len(layouts)},
        "plain_outputs_free": {
            "collectives": plain_collectives(free.as_text()),
            "memory": [free_memory.argument_size_in_bytes, free_memory.output_size_in_bytes,
                       free_memory.temp_size_in_bytes, free_memory.alias_size_in_bytes]},
        "layouts_differ": differ,
        "explorer": {"collectives": report_collectives(report),
                     "memory": [report.memory.arguments, report.memory.outputs,
                                report.memory.temporaries, report.memory.aliased],
                     "inputs": len(inputs)},
        "explorer_pinned": {"collectives": report_collectives(pinned),
                            "memory": [pinned.memory.arguments, pinned.memory.outputs,
                                       pinned.memory.temporaries, pinned.memory.aliased],
                            "notes": list(pinned.notes)},
        "notes": list(report.notes),
        "backend": report.backend,
    }


# The state is donated, as the Trainer's `donate_argnums=(0,)`: every input but the batch's.
DONATE = [r"^(?!input_ids$|attention_mask$)"]

if __name__ == "__main__":
    json.dump(main(), sys.stdout, indent=1)
    print()
