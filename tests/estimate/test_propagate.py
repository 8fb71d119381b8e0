"""explorer._src.estimate.propagate against hand-computed shards and against XLA itself.

Every case is checked two ways that do not depend on the code under test: the shard shapes and
bytes written out by hand, and the same program compiled by jax on the test process's 8 fake
CPU devices (tests/conftest.py), whose collectives are read from `compiled.as_text()` by the
small reader below and whose FLOPs are XLA's `cost_analysis()`. Everything is float32: the CPU
backend computes bf16 collectives in f32.

Where the two differ, the test says by how much and why:
- XLA's CPU pipeline has no reduce-scatter creator: a partial sum that a constraint then
  splits is an all-reduce and a slice there, a reduce-scatter here (as the GPU and TPU
  pipelines make it). V is the same buffer either way, so the two are compared as one
  "reduction" total per axis.
- XLA's cost analysis counts a loop body once; the estimate counts it per trip. FLOPs are
  compared on unrolled programs, and a scanned program's estimate against the unrolled one's.
"""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import functools
import re
import time
from collections import defaultdict

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from explorer._src.compile.jaxpr_graph import trace_program
from explorer._src.cost.estimate import estimate
from explorer._src.errors import RankError, UnknownAxisError
from explorer._src.estimate.propagate import ImpliedCost, implied_cost
from explorer._src.hlo.collectives import CollectiveKind
from explorer._src.spec.mesh import parse_mesh
from explorer._src.spec.tensor import TensorSpec
from explorer._src.strategy.plan import plan
from explorer._src.workloads.registry import get_workload

MESH = parse_mesh("data=2,model=4")
NAMES, SIZES = MESH.names, MESH.sizes
F32 = 4

AR, AG, RS, A2A = (CollectiveKind.ALL_REDUCE, CollectiveKind.ALL_GATHER,
                   CollectiveKind.REDUCE_SCATTER, CollectiveKind.ALL_TO_ALL)


@pytest.fixture(scope="module")
def jmesh():
    if len(jax.devices()) < 8:
        pytest.skip("needs the 8 fake CPU devices tests/conftest.py asks for")
    return jax.make_mesh(SIZES, NAMES, axis_types=(jax.sharding.AxisType.Auto,) * 2)


def _t(name, shape, dtype="float32"):
    return TensorSpec(name, shape, dtype)


def pin(x, point: str, spec: tuple):
    """A constraint point as the workloads make one: a constraint in a named scope."""
    with jax.named_scope(point):
        return jax.lax.with_sharding_constraint(x, P(*spec))


# ---------------------------------------------------------------------------------------------
# Ground truth: the collectives of XLA's compiled program, read from its text.

_BYTES = {"f32": 4, "bf16": 2, "f16": 2, "s32": 4, "u32": 4, "pred": 1, "s8": 1, "u8": 1}
_COLLECTIVE = re.compile(r"^\s*(?:ROOT )?%\S+ = (.+?) (all-reduce|all-gather|reduce-scatter|"
                         r"all-to-all|collective-permute)(?:-start)?\(")
_ARRAY = re.compile(r"(\w+)\[([\d,]*)\]")
_COMPUTATION = re.compile(r"^(?:ENTRY )?%(\S+) .*\{$")
_CALLEE = re.compile(r"(?:to_apply|calls|body|condition|branch_computations)=\{?%([\w.\-]+)")
_TRIPS = re.compile(r"body=%([\w.\-]+).*?known_trip_count\":\{\"n\":\"(\d+)\"")


def _shape_bytes(text: str) -> int:
    """Bytes of an HLO shape, a tuple's summed (XLA combines collectives into tuples)."""
    return sum(_BYTES[t] * int(np.prod([int(d) for d in dims.split(",") if d] or [1]))
               for t, dims in _ARRAY.findall(text))


def _group(line: str) -> list[int]:
    """The device ids of the first replica group, from any of the three textual forms."""
    if m := re.search(r"replica_groups=mesh\[([^\]]*)\]((?:, device_ids=\((?:[^()]|"
                      r"\([^()]*\))*\))?)\s*\{([^}]*)\}", line):
        header = [int(x) for x in re.findall(r"'axis_\d+'=(\d+)", m.group(1))]
        listed = {int(x) for x in re.findall(r"'axis_(\d+)'", m.group(3))}
        ids = np.arange(int(np.prod(header)))
        if order := re.search(r"\(\[([\d,]+)\](?:T\(([\d,]+)\))?\)", m.group(2)):
            ids = ids.reshape([int(x) for x in order.group(1).split(",")])
            if order.group(2):
                ids = ids.transpose([int(x) for x in order.group(2).split(",")])
        ids = ids.reshape(header)
        return list(ids[tuple(slice(None) if k in listed else 0
                              for k in range(len(header)))].reshape(-1))
    if m := re.search(r"replica_groups=\{\{([\d,]+)\}", line):
        return [int(x) for x in m.group(1).split(",")]
    m = re.search(r"replica_groups=\[([\d,]+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", line)
    assert m, f"no replica groups read in {line}"
    ids = np.arange(8).reshape([int(x) for x in m.group(2).split(",")])
    if m.group(3):
        ids = ids.transpose([int(x) for x in m.group(3).split(",")])
    return list(ids.reshape([int(x) for x in m.group(1).split(",")])[0])


def _axes(group: list[int]) -> tuple[str, ...]:
    coords = np.array([np.unravel_index(d, SIZES) for d in group])
    return tuple(n for k, n in enumerate(NAMES) if len(set(coords[:, k])) > 1)


def xla_collectives(text: str) -> list[tuple[str, tuple[str, ...], int, int]]:
    """(kind, axes, V per device, runs) of each collective: V as the cost model takes it
    (a reduce-scatter's full operand), runs from the trip counts of the loops around it."""
    bodies: dict[str, list[str]] = {}
    name = None
    for line in text.splitlines():
        if m := _COMPUTATION.match(line):
            name = m.group(1)
            bodies[name] = []
        elif name is not None:
            bodies[name].append(line)
    entry = next(line for line in text.splitlines() if line.startswith("ENTRY")).split()[1][1:]
    runs, todo = {entry: 1}, [entry]
    while todo:
        caller = todo.pop()
        for line in bodies.get(caller, []):
            trips = {b: int(n) for b, n in _TRIPS.findall(line)}
            for callee in _CALLEE.findall(line):
                if callee not in runs:
                    runs[callee] = runs[caller] * trips.get(callee, 1)
                    todo.append(callee)
    out = []
    for comp, lines in bodies.items():
        for line in lines:
            if m := _COLLECTIVE.match(line):
                kind = m.group(2)
                v = _shape_bytes(m.group(1))
                if kind == "collective-permute":
                    axes: tuple[str, ...] = ()
                else:
                    axes = _axes(_group(line))
                if kind == "reduce-scatter":
                    v *= int(np.prod([SIZES[NAMES.index(a)] for a in axes]))
                out.append((kind, axes, v, runs.get(comp, 1)))
    return out


def compile_xla(fn, tensors, specs, jmesh):
    structs = [jax.ShapeDtypeStruct(t.shape, t.dtype,
                                    sharding=NamedSharding(jmesh, P(*specs.get(t.name, ()))))
               for t in tensors]
    with jax.set_mesh(jmesh):
        compiled = jax.jit(fn).lower(*structs).compile()
    return xla_collectives(compiled.as_text()), compiled.cost_analysis()


def totals(rows) -> dict[tuple[str, tuple[str, ...]], int]:
    """V·runs per (kind, axes), all-reduce and reduce-scatter together as "reduction"."""
    out: dict = defaultdict(int)
    for kind, axes, v, runs in rows:
        kind = "reduction" if kind in ("all-reduce", "reduce-scatter") else kind
        out[(kind, tuple(axes))] += v * runs
    return dict(out)


def implied_totals(cost: ImpliedCost):
    return totals([(str(c.kind), c.axes, c.program_bytes, c.runs) for c in cost.collectives])


def implied(fn, tensors, specs, points=None, own=True) -> ImpliedCost:
    return implied_cost(trace_program(fn, tensors, MESH), MESH, specs, points or {},
                        own_constraints=own)


def rows(cost: ImpliedCost):
    return [(c.kind, c.axes, c.program_bytes, c.group_size, c.runs) for c in cost.collectives]


# ---------------------------------------------------------------------------------------------
# Small programs: hand-computed, then XLA.

MLP = [_t("x", (16, 64)), _t("w1", (64, 256)), _t("w2", (256, 64))]
MEGATRON = {"x": ("data", None), "w1": (None, "model"), "w2": ("model", None)}


def mlp(x, w1, w2):
    return jax.nn.gelu(x @ w1) @ w2


def test_megatron_mlp_is_one_all_reduce_over_model(jmesh):
    cost = implied(mlp, MLP, MEGATRON)
    # x@w1: [16/2, 256/4] per device, no collective; @w2 contracts the split 256: partial sums
    # of the [16/2, 64] result, all-reduced over model.
    assert rows(cost) == [(AR, ("model",), 8 * 64 * F32, 4, 1)]
    # Each dot: 2·16·64·256 over all 8 devices; gelu (tanh form): 8 elementwise FLOPs on each
    # of the 8·64 hidden elements a device holds (its tanh is a transcendental, not counted);
    # the all-reduce: one addition per element of its [8, 64] buffer.
    dots = 2 * (2 * 16 * 64 * 256) / 8
    assert cost.flops == dots + 8 * 8 * 64 + 8 * 64
    xla, analysis = compile_xla(mlp, MLP, MEGATRON, jmesh)
    assert xla == [("all-reduce", ("model",), 8 * 64 * F32, 1)]
    assert cost.flops == pytest.approx(analysis["flops"], rel=0.01)
    # Bytes: x, w1, w2 shards in, the hidden shard out and in again, the result and the
    # all-reduce's own operand and result; XLA counts the same within a tenth.
    assert cost.bytes_accessed == pytest.approx(analysis["bytes accessed"], rel=0.1)


def test_data_parallel_gradient_is_an_all_reduce_of_the_weight(jmesh):
    def step(x, y, w):
        g = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
        return w - 0.1 * g

    tensors = [_t("x", (32, 64)), _t("y", (32, 16)), _t("w", (64, 16))]
    specs = {"x": ("data", None), "y": ("data", None)}
    cost = implied(step, tensors, specs)
    # The gradient x^T·dy contracts the batch, split over data on both sides: partial sums of
    # the whole [64, 16] weight.
    assert rows(cost) == [(AR, ("data",), 64 * 16 * F32, 2, 1)]
    xla, analysis = compile_xla(step, tensors, specs, jmesh)
    assert xla == [("all-reduce", ("data",), 64 * 16 * F32, 1)]
    assert cost.flops == pytest.approx(analysis["flops"], rel=0.02)


def test_contracting_dim_split_on_both_sides(jmesh):
    tensors = [_t("x", (16, 64)), _t("w", (64, 32))]
    specs = {"x": (None, "model"), "w": ("model", None)}
    cost = implied(lambda x, w: x @ w, tensors, specs)
    assert rows(cost) == [(AR, ("model",), 16 * 32 * F32, 4, 1)]
    # The dot over the 4 model devices, and the all-reduce's 16·32 additions.
    assert cost.flops == 2 * 16 * 64 * 32 / 4 + 16 * 32
    xla, analysis = compile_xla(lambda x, w: x @ w, tensors, specs, jmesh)
    assert xla == [("all-reduce", ("model",), 16 * 32 * F32, 1)]
    assert cost.flops == analysis["flops"]


def test_a_constraint_that_drops_a_split_is_an_all_gather(jmesh):
    def fn(x):
        return pin(x * 2.0, "out", ())

    tensors = [_t("x", (16, 64))]
    specs = {"x": ("data", None)}
    cost = implied(fn, tensors, specs, {"out": ()})
    # V = the gathered result: the whole [16, 64].
    assert rows(cost) == [(AG, ("data",), 16 * 64 * F32, 2, 1)]
    assert cost.collectives[0].why == "constraint 'out'"
    xla, _ = compile_xla(fn, tensors, specs, jmesh)
    assert xla == [("all-gather", ("data",), 16 * 64 * F32, 1)]


@pytest.mark.parametrize("axis, size", [("data", 2), ("model", 4)])
def test_a_split_moved_to_another_dim_is_an_all_to_all(jmesh, axis, size):
    def fn(x):
        return pin(x * 2.0, "out", (None, axis))

    tensors = [_t("x", (16, 64))]
    specs = {"x": (axis, None)}
    cost = implied(fn, tensors, specs)          # own_constraints: the program's own spec
    # V = each device's buffer: a 1/size shard of [16, 64], before and after.
    assert rows(cost) == [(A2A, (axis,), 16 * 64 * F32 // size, size, 1)]
    xla, _ = compile_xla(fn, tensors, specs, jmesh)
    assert xla == [("all-to-all", (axis,), 16 * 64 * F32 // size, 1)]


def test_partial_sums_a_constraint_splits_are_a_reduce_scatter(jmesh):
    def fn(x, w):
        return pin(x @ w, "out", ("model", None))

    tensors = [_t("x", (16, 64)), _t("w", (64, 32))]
    specs = {"x": (None, "model"), "w": ("model", None)}
    cost = implied(fn, tensors, specs)
    # V of a reduce-scatter = the full operand: the [16, 32] partial sums.
    assert rows(cost) == [(RS, ("model",), 16 * 32 * F32, 4, 1)]
    xla, _ = compile_xla(fn, tensors, specs, jmesh)
    # XLA's CPU pipeline all-reduces the same buffer and slices it (no reduce-scatter
    # creator), so the bytes agree and the kind differs.
    assert xla == [("all-reduce", ("model",), 16 * 32 * F32, 1)]
    assert implied_totals(cost) == totals(xla)


def test_a_scan_body_collective_runs_length_times(jmesh):
    def scan(x, ws):
        return jax.lax.scan(lambda h, w: (jnp.tanh(h @ w), None), x, ws)[0]

    tensors = [_t("x", (16, 64)), _t("ws", (5, 64, 64))]
    # The carry split over data and model, each weight's rows over model: every iteration's
    # dot contracts a split dim, partial sums of the [16/2, 64] carry all-reduced.
    specs = {"x": ("data", "model"), "ws": (None, "model", None)}
    cost = implied(scan, tensors, specs)
    assert rows(cost) == [(AR, ("model",), 8 * 64 * F32, 4, 5)]
    # Five dots over 8 devices, each with its all-reduce's 8·64 additions.
    assert cost.flops == 5 * (2 * 16 * 64 * 64 / 8 + 8 * 64)
    xla, _ = compile_xla(scan, tensors, specs, jmesh)
    assert xla == [("all-reduce", ("model",), 8 * 64 * F32, 5)]


def test_a_scan_carry_takes_the_layout_its_body_gives_it(jmesh):
    def scan(x, ws):
        return jax.lax.scan(lambda h, w: (jnp.tanh(h @ w), None), x, ws)[0]

    tensors = [_t("x", (16, 64)), _t("ws", (3, 64, 64))]
    specs = {"x": ("data", None), "ws": (None, None, "model")}
    cost = implied(scan, tensors, specs)
    # h @ w comes out split over model on its columns, so the carry is kept that way (the
    # init sliced, free) and each iteration gathers it back over model for the next dot:
    # V = the gathered [16/2, 64].
    assert rows(cost) == [(AG, ("model",), 8 * 64 * F32, 4, 3)]
    xla, _ = compile_xla(scan, tensors, specs, jmesh)
    assert xla == [("all-gather", ("model",), 8 * 64 * F32, 3)]


def test_a_stacked_input_split_on_its_scanned_dim_is_gathered_each_iteration():
    def scan(x, ws):
        return jax.lax.scan(lambda h, w: (h @ w, None), x, ws)[0]

    tensors = [_t("x", (16, 64)), _t("ws", (4, 64, 64))]
    cost = implied(scan, tensors, {"ws": ("model", None, None)})
    assert rows(cost) == [(AG, ("model",), 64 * 64 * F32, 4, 4)]
    assert "gathered each iteration" in cost.collectives[0].why


def test_points_pin_a_constraint_and_the_others_are_free():
    def fn(x, w):
        h = pin(x @ w, "hidden", (None, None))
        return pin(h * 2.0, "final", ("data", None))

    tensors = [_t("x", (16, 64)), _t("w", (64, 32))]
    prog = trace_program(fn, tensors, MESH)
    specs = {"x": ("data", None), "w": (None, "model")}
    # No point pinned, own spec ignored (a workload's free points): nothing moves.
    assert implied_cost(prog, MESH, specs).collectives == ()
    # The program's own specs: the hidden [16, 32] gathered whole over data and model.
    own = implied_cost(prog, MESH, specs, own_constraints=True)
    assert rows(own) == [(AG, ("data",), 16 * 8 * F32, 2, 1),
                         (AG, ("model",), 16 * 32 * F32, 4, 1)]
    # A point's spec wins over the program's own: only the model split is dropped.
    pinned = implied_cost(prog, MESH, specs, {"hidden": ("data", None)}, own_constraints=True)
    assert rows(pinned) == [(AG, ("model",), 8 * 32 * F32, 4, 1)]


def test_independent_collectives_are_combined_as_xla_does(jmesh):
    # Two partial sums that do not depend on each other: XLA's all-reduce combiner makes them
    # one all-reduce of a tuple, 2 x [16,32] f32.
    def fn(x, w1, w2):
        return (x @ w1) + (x @ w2)

    tensors = [_t("x", (16, 64)), _t("w1", (64, 32)), _t("w2", (64, 32))]
    specs = {"x": (None, "model"), "w1": ("model", None), "w2": ("model", None)}
    cost = implied(fn, tensors, specs)
    assert rows(cost) == [(AR, ("model",), 2 * 16 * 32 * F32, 4, 1)]
    assert "combined into one" in cost.collectives[0].why
    xla, _ = compile_xla(fn, tensors, specs, jmesh)
    assert xla == [("all-reduce", ("model",), 2 * 16 * 32 * F32, 1)]


def test_a_collective_that_needs_another_is_not_combined_with_it(jmesh):
    # The second all-reduce sums what the first produced: it cannot be merged with it.
    def fn(x, w1, w2):
        return (x @ w1) @ w2

    tensors = [_t("x", (16, 64)), _t("w1", (64, 64)), _t("w2", (64, 32))]
    specs = {"x": (None, "model"), "w1": ("model", None), "w2": ("model", None)}
    cost = implied(fn, tensors, specs)
    assert [(c.kind, c.axes, c.runs) for c in cost.collectives].count((AR, ("model",), 1)) >= 1
    assert len(cost.collectives) == len(compile_xla(fn, tensors, specs, jmesh)[0])


def test_identical_collectives_in_a_loop_are_counted_together():
    def fn(xs, w):
        def body(c, x):
            return c + (x @ w), None
        return jax.lax.scan(body, jnp.zeros((16, 32)), xs)[0]

    tensors = [_t("xs", (3, 16, 64)), _t("w", (64, 32))]
    specs = {"xs": (None, None, "model"), "w": ("model", None)}
    cost = implied(fn, tensors, specs)
    assert rows(cost) == [(AR, ("model",), 16 * 32 * F32, 4, 3)]


def test_a_primitive_with_no_rule_is_gathered_with_a_note():
    def conv(img, k):
        return jax.lax.conv_general_dilated(img, k, (1, 1), "SAME")

    tensors = [_t("img", (2, 3, 8, 8)), _t("k", (4, 3, 3, 3))]
    cost = implied(conv, tensors, {"img": ("data",)})
    assert rows(cost) == [(AG, ("data",), 2 * 3 * 8 * 8 * F32, 2, 1)]
    assert cost.notes == ("no sharding rule for primitive 'conv_general_dilated': its operands "
                          "are gathered and its outputs taken as replicated; its FLOPs are not "
                          "counted",)


def test_bad_specs_name_what_is_wrong():
    prog = trace_program(lambda x: x * 2.0, [_t("x", (16, 64))], MESH)
    with pytest.raises(UnknownAxisError, match="axis 'expert' in the spec of 'x'"):
        implied_cost(prog, MESH, {"x": ("expert", None)})
    with pytest.raises(RankError, match="3 entries but its value has rank 2"):
        implied_cost(prog, MESH, {"x": ("data", None, None)})
    # Spec text reads as the spec parser reads it; a short spec pads with None.
    assert implied_cost(prog, MESH, {"x": "data"}) == implied_cost(prog, MESH,
                                                                   {"x": ("data", None)})


def test_the_cost_model_prices_it():
    cost = implied(mlp, MLP, MEGATRON)
    est = estimate(cost.collectives, cost.flops, cost.bytes_accessed, None, "float32", NAMES,
                   SIZES, "h100-8")
    assert len(est.collectives) == 1
    assert est.collectives[0].kind == AR and est.collectives[0].bytes == 8 * 64 * F32
    assert est.step_lower_seconds > 0


# ---------------------------------------------------------------------------------------------
# transformer_train: the built-in training step, against XLA, under several rule tables.

def _train(overrides: dict):
    w = get_workload("transformer_train")
    p = w.resolve(overrides)
    tensors = w.tensors(p)
    state = [t.name for t in tensors if t.name not in ("tokens", "targets")]
    every = {n: () for n in [*w.points(p), *state]}
    program = trace_program(functools.partial(w.build(p), constraints=every), tensors, MESH)
    return w, p, tensors, program


@pytest.fixture(scope="module")
def unrolled():
    return _train({"scan_layers": "false"})


@pytest.fixture(scope="module")
def scanned():
    return _train({})


# Layout -> (tolerance on each (kind, axes) total, on the FLOPs, why), relative; the totals
# are V·runs summed per kind and axes.
LAYOUTS = {
    "dp": (0.0, 0.02, "the gradients' all-reduce over data, exactly XLA's"),
    "megatron": (0.01, 0.02, "one reduce_sum's 512 bytes over model: XLA combines it into a "
                             "tuple all-reduce with a dot's"),
    "fsdp_tp": (0.01, 0.02, "XLA gathers one ln scale fewer"),
    # Every matmul contracts a dim split on both sides. XLA's FLOPs are 4% above the
    # estimate's, which splits more of the elementwise work around those all-reduces.
    "batch=data,embed=model": (0.0, 0.05, "partial sums after every matmul"),
    "batch=data,mlp=model,heads=model,kv_heads=model": (0.0, 0.02,
                                                        "Megatron without the vocab"),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.slow
def test_transformer_train_collectives_and_flops_match_xla(unrolled, jmesh, layout):
    w, p, tensors, program = unrolled
    lay = plan(w, p, MESH, rules=layout) if "=" in layout else plan(w, p, MESH, preset=layout)
    cost = implied_cost(program, MESH, lay.specs, dict(lay.constraints))
    xla, analysis = compile_xla(functools.partial(w.build(p), constraints=lay.constraints),
                                tensors, lay.specs, jmesh)
    tol, flops_tol, why = LAYOUTS[layout]
    mine, theirs = implied_totals(cost), totals(xla)
    assert set(mine) == set(theirs), why
    for key, v in theirs.items():
        assert mine[key] == pytest.approx(v, rel=tol), (key, why)
    # FLOPs: the dots' 2·prod(dims) over the axes that split them, one per element for the
    # rest and for each reduction's additions, as XLA counts them.
    assert cost.flops == pytest.approx(analysis["flops"], rel=flops_tol)
    # Bytes: what survives fusion, roughly; XLA fuses more (and less) than the estimate's
    # rule of thumb, within a quarter on these layouts.
    assert cost.bytes_accessed == pytest.approx(analysis["bytes accessed"], rel=0.25)
    assert cost.notes == ()


@pytest.mark.slow
def test_transformer_train_2d_within_a_quarter(unrolled, jmesh):
    """The GSPMD 2-D layout moves activations over model around every matmul, where XLA's
    choices differ from the estimate's in the backward pass: it gathers some activations
    again for each dot that reads them (the estimate gathers a value once per layout), and it
    moves two gradients with permutes where the estimate reshards them with all-to-alls. In
    all, the estimate's bytes are within a quarter of XLA's, the reductions within 5%."""
    w, p, tensors, program = unrolled
    lay = plan(w, p, MESH, preset="2d")
    cost = implied_cost(program, MESH, lay.specs, dict(lay.constraints))
    xla, analysis = compile_xla(functools.partial(w.build(p), constraints=lay.constraints),
                                tensors, lay.specs, jmesh)
    mine, theirs = implied_totals(cost), totals(xla)
    assert sum(mine.values()) == pytest.approx(sum(theirs.values()), rel=0.25)
    for axis in ("data", "model"):
        key = ("reduction", (axis,))
        assert mine[key] == pytest.approx(theirs[key], rel=0.05)
    assert mine[("all-gather", ("data",))] == pytest.approx(theirs[("all-gather", ("data",))],
                                                            rel=0.05)
    assert cost.flops == pytest.approx(analysis["flops"], rel=0.02)


@pytest.mark.slow
def test_transformer_train_scanned_layers(scanned, unrolled, jmesh):
    """With the layers in one lax.scan, each collective of the block runs once per layer:
    XLA's totals (times its loops' trip counts) match as unrolled. XLA's cost analysis counts
    a loop body once, so the FLOPs are checked against the unrolled program's estimate."""
    w, p, tensors, program = scanned
    lay = plan(w, p, MESH, preset="fsdp_tp")
    cost = implied_cost(program, MESH, lay.specs, dict(lay.constraints))
    xla, _ = compile_xla(functools.partial(w.build(p), constraints=lay.constraints), tensors,
                         lay.specs, jmesh)
    mine, theirs = implied_totals(cost), totals(xla)
    assert set(mine) == set(theirs)
    for key, v in theirs.items():
        assert mine[key] == pytest.approx(v, rel=0.01), key
    assert any(c.runs == p["layers"] for c in cost.collectives)
    uw, up, _, uprogram = unrolled
    ulay = plan(uw, up, MESH, preset="fsdp_tp")
    flat = implied_cost(uprogram, MESH, ulay.specs, dict(ulay.constraints))
    assert cost.flops == pytest.approx(flat.flops, rel=0.01)


def test_transformer_train_estimate_takes_milliseconds(scanned):
    w, p, _, program = scanned
    lay = plan(w, p, MESH, preset="fsdp_tp")
    specs, points = lay.specs, dict(lay.constraints)
    implied_cost(program, MESH, specs, points)           # prepares the program once
    times = []
    for _ in range(20):
        t0 = time.perf_counter()
        implied_cost(program, MESH, specs, points)
        times.append(time.perf_counter() - t0)
    # About 3 ms on a 2-core machine; the bound leaves room for a loaded one.
    assert sorted(times)[len(times) // 2] < 0.05
