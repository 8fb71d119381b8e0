"""JAX's own docs' sharding programs, called as the docs write them: no mesh= (the mesh is the one
the inputs' NamedShardings name, or the caller's jax.set_mesh), meshes from jax.make_mesh with the
docs' axis types, inputs as jax arrays or ShapeDtypeStructs (the "Distributed arrays and automatic
parallelization", "Explicit sharding" and "shard_map" tutorials, written here in the same calls).

Ground truth is plain jax: `jax.jit(f).lower(*args).compile()` of the same function on the same
inputs and the same 8 CPU devices, in this process (tests/conftest.py gives it 8). Each Report must
have plain jax's collectives (opcode and device groups, read from plain jax's optimized HLO), its
inputs' and outputs' shardings (as jax's compiled executable states them) and its memory figures.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import explorer

E, A = AxisType.Explicit, AxisType.Auto


def _mesh(shape, names, types):
    return jax.make_mesh(shape, names, axis_types=types)


# ---------------------------------------------------------------------------- plain jax's truth

_COLLECTIVE = re.compile(r"= \S.*? (all-reduce|all-gather|reduce-scatter|all-to-all|"
                         r"collective-permute)\(")
_GROUPS = re.compile(r"replica_groups=(\{[{}\d,]*\}|\[[\d,]+\]<=\[[\d,]+\](?:T\([\d,]+\))?|"
                     r"mesh\[[^\]]*\](?:, device_ids=\([^)]*\))? \{[^}]*\})")
_PAIRS = re.compile(r"source_target_pairs=\{([{}\d,]*)\}")
_IOTA = re.compile(r"\[([\d,]+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?")


def _ints(text: str) -> list[int]:
    return [int(d) for d in text.split(",") if d]


def _iota(shape: str, dims: str, perm: str | None) -> np.ndarray:
    """XLA's iota device list: arange over `dims`, transposed by `perm`, reshaped to `shape`."""
    ids = np.arange(np.prod(_ints(dims))).reshape(_ints(dims))
    if perm:
        ids = ids.transpose(_ints(perm))
    return ids.reshape(_ints(shape))


def _groups(text: str) -> tuple[tuple[int, ...], ...]:
    """Replica groups in each of XLA's forms (a list, an iota, mesh axes), as sorted tuples of
    device ids."""
    if text.startswith("{"):
        groups = [tuple(_ints(g)) for g in re.findall(r"\{([\d,]*)\}", text[1:-1])]
    elif text.startswith("mesh["):
        axes = re.findall(r"'(\w+)'=(\d+)", text[:text.index("]")])
        names, sizes = [a for a, _ in axes], [int(n) for _, n in axes]
        device_ids = re.search(r"device_ids=\((.*?)\) \{", text)
        ids = np.arange(np.prod(sizes))
        if device_ids:
            iota = _IOTA.fullmatch(device_ids.group(1)) or _IOTA.fullmatch(
                f"[{len(ids)}]<=[{device_ids.group(1)}]")
            ids = _iota(*iota.groups()).reshape(-1)
        ids = ids.reshape(sizes)
        over = [names.index(a) for a in re.findall(r"'(\w+)'", text[text.rindex("{"):])]
        rest = [d for d in range(len(sizes)) if d not in over]
        groups = [tuple(g) for g in ids.transpose(rest + over).reshape(
            -1, int(np.prod([sizes[d] for d in over]))).tolist()]
    else:
        groups = [tuple(g) for g in _iota(*_IOTA.fullmatch(text).groups()).tolist()]
    return tuple(sorted(tuple(sorted(g)) for g in groups))


def plain_collectives(hlo: str) -> Counter:
    """(opcode, device groups) of each collective in plain jax's optimized HLO; a permute by its
    source-target pairs' connected devices."""
    found = Counter()
    for line in hlo.splitlines():
        m = _COLLECTIVE.search(line)
        if not m:
            continue
        kind = m.group(1)
        if kind == "collective-permute":
            pairs = re.findall(r"\{(\d+),(\d+)\}", _PAIRS.search(line).group(1))
            found[kind, tuple(sorted({int(d) for p in pairs for d in p}))] += 1
        else:
            found[kind, _groups(_GROUPS.search(line).group(1))] += 1
    return found


def report_collectives(report) -> Counter:
    found = Counter()
    for c in report.collectives:
        if str(c.kind) == "collective-permute":
            found[str(c.kind), tuple(sorted({d for g in c.groups for d in g}))] += 1
        else:
            found[str(c.kind), tuple(sorted(tuple(sorted(g)) for g in c.groups))] += 1
    return found


def hlo_shardings(shardings, avals) -> list[str]:
    """jax's shardings of a compiled executable's inputs or outputs, as HLO sharding text."""
    return [str(s._to_xla_hlo_sharding(len(a.shape)))
            for s, a in zip(jax.tree.leaves(shardings), jax.tree.leaves(avals), strict=True)]


def assert_as_plain_jax(report, fn, args) -> None:
    """`report` (the explorer's, of fn(*args)) against plain jax's compile of the same."""
    compiled = jax.jit(fn).lower(*args).compile()
    plain = plain_collectives(compiled.as_text())
    assert report_collectives(report) == plain
    ins = [t for t in report.tensors if str(t.kind) == "input"]
    outs = [t for t in report.tensors if str(t.kind) == "output"]
    assert [t.sharding for t in ins] == hlo_shardings(compiled.input_shardings[0], args)
    assert [t.sharding for t in outs] == hlo_shardings(compiled.output_shardings,
                                                       compiled.out_info)
    memory = compiled.memory_analysis()
    assert (report.memory.arguments, report.memory.outputs, report.memory.aliased,
            report.memory.temporaries) == (memory.argument_size_in_bytes,
                                           memory.output_size_in_bytes,
                                           memory.alias_size_in_bytes,
                                           memory.temp_size_in_bytes)


# ------------------------------------------------------------------------- the docs' programs


@dataclass(frozen=True)
class DocProgram:
    """One program as a doc writes it: the mesh it makes, its inputs on that mesh, the
    function, and whether the doc calls it inside jax.set_mesh(mesh)."""

    name: str
    mesh: Callable[[], jax.sharding.Mesh]
    inputs: Callable[[jax.sharding.Mesh], tuple]
    fn: Callable[[jax.sharding.Mesh], Callable]
    set_mesh: bool = True
    collectives: bool = True       # the program moves data between devices


def _struct(shape, mesh, spec, dtype=jnp.float32):
    return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, spec))


def _array(shape, mesh, spec):
    """A jax array laid out on the mesh, as the docs' jax.device_put makes one."""
    data = jnp.arange(np.prod(shape), dtype=jnp.float32).reshape(shape)
    return jax.device_put(data, NamedSharding(mesh, spec))


# "Explicit sharding": types carry the sharding; a binary op's result takes both inputs' axes.
def _add(mesh):
    def add_arrays(x, y):
        return x + y
    return add_arrays


# "Explicit sharding": an einsum whose contracting dimension is sharded asks for out_sharding.
def _einsum(mesh):
    def contract(x, w):
        return jnp.einsum("bd,df->bf", x, w, out_sharding=P("X", None))
    return contract


# "Explicit sharding": reshard moves a value to another layout inside the program.
def _reshard(mesh):
    def move(x):
        y = jnp.sin(x)
        return jax.sharding.reshard(y, P(None, "Y"))
    return move


# "Explicit sharding": auto_axes drops into Auto over X for a part of the program.
def _auto_axes(mesh):
    @functools.partial(jax.sharding.auto_axes, axes="X", out_sharding=P("X", "Y"))
    def double(y):
        return y * 2

    def f(arr):
        x = jnp.sin(arr)
        return double(x) + 1
    return f


# "Explicit sharding": explicit_axes under an all-Auto mesh.
def _explicit_axes(mesh):
    @functools.partial(jax.sharding.explicit_axes, axes=("X", "Y"), in_sharding=P("X", "Y"))
    def double(y):
        return y * 2

    def f(arr):
        return double(jnp.sin(arr)) + 1
    return f


# "Explicit sharding": mixed axis types, Explicit over X and Auto over Y.
def _mixed(mesh):
    def layer(x, w):
        return jnp.tanh(x @ w)
    return layer


# "Distributed arrays": automatic sharding, a constraint placed on an intermediate.
def _constraint(mesh):
    def f(x):
        y = jnp.sin(x)
        y = jax.lax.with_sharding_constraint(y, NamedSharding(mesh, P("X", None)))
        return y.sum(axis=1)
    return f


# "Distributed arrays": the two-layer network's loss, batch over one axis, weights over another.
def _mlp_loss(mesh):
    def loss(w1, w2, x, y):
        h = jax.nn.relu(x @ w1)
        return jnp.mean((h @ w2 - y) ** 2)
    return loss


# "shard_map": a matmul of blocks, its partial sums added over y with psum.
def _shard_map_psum(mesh):
    def matmul_basic(a, b):
        def block(a_block, b_block):
            return jax.lax.psum(jnp.dot(a_block, b_block), "y")
        return jax.shard_map(block, mesh=mesh, in_specs=(P("x", "y"), P("y", None)),
                             out_specs=P("x", None))(a, b)
    return matmul_basic


# "shard_map": the same, reduce-scattered (psum_scatter), no mesh= (the context's).
def _shard_map_scatter(mesh):
    def matmul_scatter(a, b):
        def block(a_block, b_block):
            return jax.lax.psum_scatter(a_block @ b_block, "y", scatter_dimension=0,
                                        tiled=True)
        return jax.shard_map(block, in_specs=(P("x", "y"), P("y", None)),
                             out_specs=P(("x", "y"), None))(a, b)
    return matmul_scatter


# "shard_map": a ring step, each block sent to the next device along x with ppermute.
def _shard_map_ring(mesh):
    def ring(x):
        def block(b):
            n = jax.lax.axis_size("x")
            return jax.lax.ppermute(b, "x", [(i, (i + 1) % n) for i in range(n)])
        return jax.shard_map(block, mesh=mesh, in_specs=P("x", "y"), out_specs=P("x", "y"))(x)
    return ring


# "shard_map": all_gather, every block of x gathered along y (its result still varies over y
# by shard_map's reckoning, so its out_specs names y, as the doc's does).
def _shard_map_gather(mesh):
    def gather(x):
        def block(b):
            return jax.lax.all_gather(b, "y", axis=1, tiled=True)
        return jax.shard_map(block, mesh=mesh, in_specs=P("x", "y"), out_specs=P("x", "y"))(x)
    return gather


EXPLICIT_2x4 = functools.partial(_mesh, (2, 4), ("X", "Y"), (E, E))
AUTO_2x4 = functools.partial(_mesh, (2, 4), ("X", "Y"), (A, A))
MIXED_2x4 = functools.partial(_mesh, (2, 4), ("X", "Y"), (E, A))
DEFAULT_4x2 = functools.partial(jax.make_mesh, (4, 2), ("X", "Y"))     # jax's default types
SHARD_MAP_4x2 = functools.partial(_mesh, (4, 2), ("x", "y"), (E, E))

PROGRAMS = [
    DocProgram("explicit: add", EXPLICIT_2x4,
               lambda m: (_array((4, 1), m, P("X", None)), _array((1, 8), m, P(None, "Y"))),
               _add, collectives=False),
    DocProgram("explicit: einsum out_sharding", EXPLICIT_2x4,
               lambda m: (_struct((8, 16), m, P("X", "Y")), _struct((16, 32), m, P("Y", None))),
               _einsum),
    DocProgram("explicit: reshard", EXPLICIT_2x4,
               lambda m: (_struct((8, 16), m, P("X", "Y")),), _reshard),
    DocProgram("explicit: auto_axes", EXPLICIT_2x4,
               lambda m: (_array((4, 4), m, P("X", "Y")),), _auto_axes, collectives=False),
    DocProgram("auto: explicit_axes", AUTO_2x4,
               lambda m: (_array((4, 4), m, P("X", "Y")),), _explicit_axes, collectives=False),
    DocProgram("mixed: Explicit X, Auto Y", MIXED_2x4,
               lambda m: (_struct((8, 16), m, P("X", None)), _struct((16, 32), m, P(None, None))),
               _mixed, collectives=False),
    DocProgram("distributed: with_sharding_constraint", AUTO_2x4,
               lambda m: (_array((8, 16), m, P("X", "Y")),), _constraint, set_mesh=False),
    DocProgram("distributed: default types, inputs only", DEFAULT_4x2,
               lambda m: (_struct((8, 4), m, P("X", "Y")),), lambda m: jnp.sin,
               set_mesh=False, collectives=False),
    DocProgram("distributed: mlp loss", functools.partial(_mesh, (4, 2), ("batch", "model"),
                                                          (A, A)),
               lambda m: (_struct((16, 32), m, P(None, "model")),
                          _struct((32, 4), m, P("model", None)),
                          _struct((32, 16), m, P("batch", None)),
                          _struct((32, 4), m, P("batch", None))), _mlp_loss),
    DocProgram("shard_map: psum", SHARD_MAP_4x2,
               lambda m: (_array((8, 16), m, P("x", "y")), _array((16, 4), m, P("y", None))),
               _shard_map_psum, set_mesh=False),
    DocProgram("shard_map: psum_scatter, mesh from context", SHARD_MAP_4x2,
               lambda m: (_struct((16, 16), m, P("x", "y")), _struct((16, 4), m, P("y", None))),
               _shard_map_scatter),
    DocProgram("shard_map: ppermute", SHARD_MAP_4x2,
               lambda m: (_struct((8, 16), m, P("x", "y")),), _shard_map_ring),
    DocProgram("shard_map: all_gather", SHARD_MAP_4x2,
               lambda m: (_array((8, 16), m, P("x", "y")),), _shard_map_gather,
               set_mesh=False),
]
# A quick few on the default path; the rest with the slow tests.
QUICK = {"explicit: einsum out_sharding", "mixed: Explicit X, Auto Y", "shard_map: psum"}


@pytest.mark.parametrize("program", [
    pytest.param(p, id=p.name, marks=() if p.name in QUICK else pytest.mark.slow)
    for p in PROGRAMS])
def test_a_docs_program_compiles_as_plain_jax_compiles_it(program):
    mesh = program.mesh()
    args = program.inputs(mesh)
    fn = program.fn(mesh)
    if program.set_mesh:
        with jax.set_mesh(mesh):
            report = explorer.analyze(fn, *args)
            assert_as_plain_jax(report, fn, args)
    else:
        report = explorer.analyze(fn, *args)
        assert_as_plain_jax(report, fn, args)
    # The mesh is the user's, with the axis types it has.
    assert report.mesh.names == tuple(mesh.axis_names)
    assert report.mesh.sizes == tuple(mesh.axis_sizes)
    assert [str(t) for t in report.mesh.axis_types] == [t.name.lower() for t in mesh.axis_types]
    assert bool(report.collectives) == program.collectives
    # A shard_map over the explored mesh is not said to run over a mesh of its own.
    assert not [n for n in report.notes if "mesh of its own" in n]


def test_the_report_shows_the_sharding_in_each_value_s_type():
    """Under Explicit axes jax puts the sharding in the type (jax.typeof(x).sharding): the
    Report's inputs and outputs carry it, as plain jax's trace types them."""
    mesh = MIXED_2x4()
    args = (_struct((8, 16), mesh, P("X", None)), _struct((16, 32), mesh, P(None, None)))
    fn = _mixed(mesh)
    with jax.set_mesh(mesh):
        report = explorer.analyze(fn, *args)
        traced = jax.jit(fn).trace(*args)
    typed = {t.name: t.typed_spec for t in report.tensors if str(t.kind) != "intermediate"}
    plain = [tuple(a.sharding.spec) for a in (*traced.jaxpr.in_avals, *traced.jaxpr.out_avals)]
    assert list(typed.values()) == [tuple(e for e in s) + (None,) * (2 - len(s)) for s in plain]
    assert typed["x"] == ("X", None)


def test_a_shard_map_over_another_mesh_is_said_to_be_so():
    """The note that a shard_map runs over a mesh of its own is true only where it does."""
    mesh = _mesh((4, 2), ("x", "y"), (A, A))
    other = _mesh((8,), ("e",), (A,))

    def f(x):
        def block(b):
            return jax.lax.psum(b, "e")
        return jax.shard_map(block, mesh=other, in_specs=P("e"), out_specs=P())(x.reshape(-1))

    report = explorer.analyze(f, _struct((8, 16), mesh, P("x", "y")))
    [note] = [n for n in report.notes if "mesh of its own" in n]
    assert "e=8" in note
