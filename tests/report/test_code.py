"""Runnable code out: `Report.to_code()` run by plain jax, in a fresh process on fake CPU
devices, compiles to the Report's input and output shardings and collectives.

The probe appended to the emitted code reads the compiled program itself: the HloSharding of
each input and output as jax gives it, and the collectives counted by opcode in
`compiled.as_text()`, independently of the explorer's readers."""

import ast
import collections
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

import explorer

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import collections as _collections
import json as _json
import re as _re

_text = compiled.as_text()
_ops = _re.findall(r"\\s(all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute)"
                   r"(?:-start)?\\(", _text)
_ins = zip(jax.tree.leaves(compiled.input_shardings[0]), jax.tree.leaves(args), strict=True)
with jax.set_mesh(mesh):
    _out_shapes = jax.eval_shape(f, *args)
_outs = zip(jax.tree.leaves(compiled.output_shardings), jax.tree.leaves(_out_shapes), strict=True)
print(_json.dumps({
    "inputs": [str(s._to_xla_hlo_sharding(len(a.shape))) for s, a in _ins],
    "outputs": [str(s._to_xla_hlo_sharding(len(a.shape))) for s, a in _outs],
    "collectives": dict(_collections.Counter(_ops)),
    "aliased": compiled.memory_analysis().alias_size_in_bytes,
    "rules": [list(p) for p in globals().get("logical_axis_rules", ())],
    "rules_by_kind": {k: [list(p) for p in v]
                      for k, v in globals().get("logical_axis_rules_by_kind", {}).items()},
}))
"""


def run_emitted(code: str, devices: int) -> dict:
    """Run `code` and the probe with plain python and jax on `devices` fake CPU devices."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"}
    done = subprocess.run([sys.executable, "-c", code + PROBE], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def expected(report) -> dict:
    return {
        "inputs": [t.sharding for t in report.tensors if t.kind == "input"],
        "outputs": [t.sharding for t in report.tensors if t.kind == "output"],
        "collectives": dict(collections.Counter(str(c.kind) for c in report.collectives)),
    }


@pytest.mark.slow
def test_a_workloads_code_with_a_pinned_activation_compiles_to_the_reports_program():
    # Megatron's MLP with its hidden activation pinned to (data, None): the pin gathers the
    # model-split hidden features (an all-gather over model) before the second matmul, whose
    # contraction over model-split rows of w2 is then a partial sum (an all-reduce).
    report = explorer.analyze_workload("mlp", "data=2,model=4", preset="megatron",
                                       activations={"hidden": "data,None"}, compile_for="cpu")
    assert collections.Counter(str(c.kind) for c in report.collectives) == {
        "all-gather": 1, "all-reduce": 1}
    code = report.to_code()
    assert "_src" not in code                  # users' code names only explorer's public faces
    assert "jax.lax.with_sharding_constraint" in code
    assert "'hidden': NamedSharding(mesh, P('data', None))" in code
    ran = run_emitted(code, 8)
    assert {k: ran[k] for k in ("inputs", "outputs", "collectives")} == expected(report)
    # The preset's rule table, in its order, as Flax takes it.
    assert ran["rules"] == [["batch", "data"], ["heads", "model"], ["kv_heads", "model"],
                            ["mlp", "model"], ["vocab", "model"]]
    assert ran["rules_by_kind"] == {}


@pytest.mark.slow
def test_a_train_steps_code_keeps_its_state_layout_and_gives_each_kind_its_rule_table():
    flax = pytest.importorskip("flax.linen")
    # FSDP with tensor parallelism on a 2-layer Adam train step: heads, mlp and vocab over
    # model for every tensor, and embed over data for the params, grads and Adam's state only
    # (rules scoped to those kinds); the state comes out in the layout it went in.
    report = explorer.analyze_workload(
        "transformer_train", "data=4,model=2", preset="fsdp_tp", compile_for="cpu",
        params={"batch": 8, "seq": 16, "vocab": 64, "d_model": 32, "heads": 2, "d_head": 16,
                "d_ff": 64, "layers": 2})
    code = report.to_code()
    assert "_src" not in code
    ran = run_emitted(code, 8)
    assert {k: ran[k] for k in ("inputs", "outputs", "collectives")} == expected(report)
    # The state (every input but the tokens and targets) is donated, as the analysis donated
    # it: plain jax's compile of the code lets the outputs take the same bytes of inputs.
    state = [t.name for t in report.tensors if t.kind == "input"][2:]
    assert list(report.donated) == state
    assert f"donate_argnums=tuple(range(2, {2 + len(state)}))" in code
    assert ran["aliased"] == report.memory.aliased > 0
    assert ran["rules"] == [["batch", "data"], ["heads", "model"], ["kv_heads", "model"],
                            ["mlp", "model"], ["vocab", "model"]]
    assert set(ran["rules_by_kind"]) == {"param", "grad", "opt"}
    # Flax's own resolution of the emitted rules gives every input the spec it compiled with.
    workload = explorer.WORKLOADS["transformer_train"]
    params = dict(report.workload.params)
    kinds = workload.kinds(params)
    for name, dims in workload.logical(params).items():
        kind = kinds.get(name, "param")
        table = [(n, tuple(e) if isinstance(e, list) else e)
                 for n, e in ran["rules_by_kind"].get(kind, ran["rules"])]
        assert tuple(flax.logical_to_mesh_axes(dims, table)) == report.tensor(name).spec, name


# A user's function, defined by source so that the emitted code's run defines the same one.
USER_FUNCTION = """
import jax
import jax.numpy as jnp


def f(params, x):
    h = jax.nn.relu(x @ params["up"])
    return {"y": h @ params["down"], "norm": jnp.sum(h * h)}


args = ({"up": jax.ShapeDtypeStruct((64, 256), jnp.float32),
         "down": jax.ShapeDtypeStruct((256, 64), jnp.float32)},
        jax.ShapeDtypeStruct((32, 64), jnp.float32))
"""


@pytest.mark.slow
def test_a_user_functions_code_jits_it_on_its_pytree_with_the_reports_layout():
    namespace = {"__name__": "user_code"}      # not importable, as a notebook's code
    exec(USER_FUNCTION, namespace)
    report = explorer.analyze(namespace["f"], *namespace["args"], mesh="data=2,model=4",
                              specs={"up": "None,model", "down": "model,None", "^x$": "data,None"})
    assert [t.name for t in report.tensors if t.kind == "input"] == ["down", "up", "x"]
    code = report.to_code()
    assert "logical_axis_rules" not in code          # plain tensors carry no logical names
    run = code + USER_FUNCTION + (
        "with jax.set_mesh(mesh):\n"
        "    compiled = jit_with_layout(f, *args).lower(*args).compile()\n")
    assert {k: v for k, v in run_emitted(run, 8).items()
            if k in ("inputs", "outputs", "collectives")} == expected(report)


@pytest.mark.slow
def test_names_that_hold_code_are_written_as_literals():
    def ident(tree):
        return tree

    hostile = "w'] = 1\nimport os  # \x00"
    report = explorer.analyze(ident, {hostile: explorer.TensorSpec(hostile, (8,))},
                              mesh="data=2")
    code = report.to_code()
    tree = ast.parse(code)                 # one module, the name inside string literals only
    assigned = {n.targets[0].id: n.value for n in tree.body if isinstance(n, ast.Assign)
                and isinstance(n.targets[0], ast.Name)}
    assert [ast.literal_eval(k) for k in assigned["input_shardings"].keys] == [hostile]
    assert not any(isinstance(n, ast.Import) and n.names[0].name == "os" for n in tree.body)
    assert "jax.config.update('jax_use_shardy_partitioner', False)" in \
        replace(report, partitioner="gspmd").to_code()


def test_pairs_are_written_as_given_with_the_mesh_axes_the_mesh_lacks_named():
    # No compile: the rules section from a planned request's WorkloadInfo.
    from types import SimpleNamespace

    from explorer._src.report.code import _rules
    pairs = [("embed", ("fsdp", "model")), ("embed", "data"), ("mlp", "model")]
    r = explorer.Request(workload="transformer_train", mesh="data=2,model=4", rules=pairs)
    info = r.planned.workload_info("transformer_train", None)
    inputs = [SimpleNamespace(name=t.name, spec=tuple(t.spec) or (None,) * len(t.shape))
              for t in r.planned.leaves]
    lines = _rules(info, explorer.WORKLOADS["transformer_train"], inputs, r.planned.mesh)
    text = "\n".join(lines)
    assert "\n    ('embed', ('fsdp', 'model')),\n    ('embed', 'data'),\n    ('mlp', 'model'),\n)" \
        in text
    assert "Mesh axes this mesh lacks, read as axes of size 1 (MaxText's meshes hold them): " \
        "'fsdp'." in text
    assert "given per tensor" not in text          # every spec is the rules'
    namespace: dict = {}
    exec("\n".join(lines), namespace)                # plain literals, as the snippet holds them
    assert list(namespace["logical_axis_rules"]) == pairs


def test_a_workloads_code_imports_only_jax_and_explorers_public_names():
    # No compile: the snippet of a planned request's layout, read as Python. Every import is of
    # jax, functools or explorer itself, and every explorer.<name> it uses is in explorer.__all__.
    from types import SimpleNamespace

    from explorer._src.report.code import to_code
    r = explorer.Request(workload="mlp", mesh="data=2,model=4", preset="megatron")
    layout = SimpleNamespace(
        mesh=r.planned.mesh, partitioner="shardy", donated=(),
        workload=r.planned.workload_info("mlp", None),
        tensors=[SimpleNamespace(name=t.name, kind="input", shape=t.shape, dtype=t.dtype,
                                 spec=tuple(t.spec)) for t in r.planned.leaves])
    code = to_code(layout)
    assert "_src" not in code
    tree = ast.parse(code)
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported == {"jax", "jax.sharding", "functools", "explorer"}
    used = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name) and n.value.id == "explorer"}
    assert used == {"WORKLOADS"} and used <= set(explorer.__all__)
