"""A program traced once into plain data: the boundary where jax objects become numbers.

`trace_program` runs `jax.make_jaxpr` over abstract inputs (ShapeDtypeStructs, no devices)
under an abstract mesh of the request's axis names and sizes, so that a workload's bare
`with_sharding_constraint(x, PartitionSpec(...))` resolves, and turns the jaxpr into a
`Program` of `JaxprOp`s over numbered `Var`s: shapes, dtype names, and each primitive's params as
plain Python values (tuples, ints, strings). Nothing in it refers to jax, so the estimate stage
(explorer/_src/estimate/propagate.py) can carry thousands of layouts through it without jax, and it
pickles.

Sub-programs:
- inlined where they run once, in place: jit/pjit (`jaxpr`), custom_jvp_call and
  custom_vjp_call (`call_jaxpr`, or the older `fun_jaxpr`), checkpoint/remat (`jaxpr`),
  closed_call/core_call (`call_jaxpr`): their ops join the caller's, their inputs and outputs
  are the caller's vars, as XLA inlines them before partitioning;
- kept as a `JaxprOp` with a `body`: scan (`runs` = its length), while (its body once: the trip
  count is not known from the jaxpr), cond (the branch with the most work), shard_map (its body
  already per device).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from math import prod
from typing import Any

from explorer._src.errors import CompileError, ExplorerError
from explorer._src.spec.mesh import MeshSpec
from explorer._src.spec.tensor import DTYPE_BYTES, Entry, TensorSpec

# Bytes per element of the dtypes jax may give an intermediate beyond the inputs' own (64-bit
# with x64 on, complex, 4-bit, float0: a symbolic zero cotangent, which holds nothing).
_MORE_BYTES = {"float64": 8, "int64": 8, "uint64": 8, "complex64": 8, "complex128": 16,
               "int4": 1, "uint4": 1, "float0": 0}


@dataclass(frozen=True)
class Var:
    """One array value of the program: its global shape and dtype name."""

    shape: tuple[int, ...]
    dtype: str

    @property
    def itemsize(self) -> int:
        """Bytes per element; 4 for a dtype the tables do not know (a guess, said nowhere)."""
        return DTYPE_BYTES.get(self.dtype, _MORE_BYTES.get(self.dtype, 4))

    @property
    def nbytes(self) -> int:
        return prod(self.shape) * self.itemsize


@dataclass(frozen=True)
class JaxprOp:
    """One primitive application.

    Attributes:
        primitive: jax's primitive name (``dot_general``, ``scan``, ``sharding_constraint``).
        inputs: the var ids it reads, in order; None for a literal (a scalar constant).
        outputs: the var ids it defines.
        params: its params as plain values: dimension numbers as tuples, axes, permutations,
            shapes; a gather's or scatter's dimension numbers as a dict of their fields; a
            shard_map's ``in_specs``/``out_specs`` as spec-entry tuples.
        body: the sub-program of a scan, while, cond or shard_map. Its inputs line up with
            ``inputs`` (a scan: consts, carry, then the per-iteration slices of xs; a while:
            its body's consts then the carry; a cond: the operands after the branch index;
            a shard_map: one per input) and its outputs with ``outputs`` (a scan's ys as
            per-iteration slices).
        runs: times the body runs per run of the op (a scan's length; 1 otherwise).
        point: a sharding_constraint's innermost jax.named_scope (a workload's constraint
            point); empty where it has none.
        own_spec: a sharding_constraint's own PartitionSpec as spec entries (None, an axis, or
            a tuple of axes); None for every other op.
        note: what the trace could not capture about the op (a while's unknown trip count, the
            branch a cond was counted by).
    """

    primitive: str
    inputs: tuple[int | None, ...]
    outputs: tuple[int, ...]
    params: Mapping[str, Any] = field(default_factory=dict)
    body: Program | None = None
    runs: int = 1
    point: str = ""
    own_spec: tuple[Entry, ...] | None = None
    note: str = ""


@dataclass(frozen=True)
class Program:
    """A traced program: its inputs and outputs (var ids), every var it defines, and its ops
    in program order. `names`: the top-level program's input names, in order (a body's is
    empty). Var ids are unique over the whole trace, bodies included."""

    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    vars: Mapping[int, Var]
    ops: tuple[JaxprOp, ...]
    names: tuple[str, ...] = ()


def trace_program(fn: Callable, inputs: Sequence[TensorSpec], mesh: MeshSpec) -> Program:
    """`fn` traced on abstract arrays of `inputs`' shapes and dtypes, into plain data.

    Args:
        fn: takes one positional array per input, in order.
        inputs: the input tensors (their specs are not used: a layout is applied later).
        mesh: the mesh whose axis names and sizes the abstract mesh has (axes of type Auto, as
            the compile's, so that a bare PartitionSpec in the program resolves).

    Raises:
        CompileError: jax could not trace `fn` (its message is jax's, or the function's own).
    """
    import jax
    from jax.sharding import AbstractMesh, AxisType

    structs = [jax.ShapeDtypeStruct(t.shape, t.dtype) for t in inputs]
    abstract = AbstractMesh(tuple(mesh.sizes), tuple(mesh.names),
                            axis_types=(AxisType.Auto,) * len(mesh.names))
    try:
        with jax.sharding.use_abstract_mesh(abstract):
            closed = jax.make_jaxpr(fn)(*structs)
    except ExplorerError:
        raise
    except Exception as e:    # whatever the user's function or jax raised: its message says
        name = getattr(fn, "__qualname__", None) or type(fn).__name__
        raise CompileError(f"could not trace {name!r} on abstract inputs over mesh "
                           f"{mesh.text()!r} to estimate it: {type(e).__name__}: {e}") from e
    finally:
        from explorer._src.compile.lowering import bound_jax_caches

        bound_jax_caches()   # as after the compile's trace: jax's caches of it serve nothing
    return _Builder().program(closed.jaxpr, tuple(t.name for t in inputs))


# ---------------------------------------------------------------------------------------------
# jaxpr -> Program.

# Params that hold sub-programs or functions: read by the builder, never copied into `params`.
_CALLS = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr", "core_call":
          "call_jaxpr", "remat": "jaxpr", "remat2": "jaxpr", "checkpoint": "jaxpr",
          "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr",
          "custom_vjp_call_jaxpr": "fun_jaxpr"}
_BODIES = ("scan", "while", "cond", "shard_map")


class _Builder:
    """Numbers vars across the whole trace and collects each program's ops and vars."""

    def __init__(self):
        self.next_id = 0

    def _new(self, aval, vars_: dict[int, Var]) -> int:
        vid = self.next_id
        self.next_id += 1
        vars_[vid] = _var(aval)
        return vid

    def program(self, jaxpr, names: tuple[str, ...] = (), scope: str = "") -> Program:
        """A Program of `jaxpr` with fresh ids; its constvars (a closed jaxpr's consts, whose
        values do not matter here) become constant ops. `scope`: the named scope around it,
        for a constraint inside with none of its own."""
        vars_: dict[int, Var] = {}
        ops: list[JaxprOp] = []
        env: dict[Any, int] = {}
        for v in jaxpr.invars:
            env[v] = self._new(v.aval, vars_)
        self._constants(jaxpr.constvars, env, ops, vars_)
        self._eqns(jaxpr.eqns, env, ops, vars_, scope)
        outs = tuple(self._read_or_constant(v, env, ops, vars_) for v in jaxpr.outvars)
        return Program(tuple(env[v] for v in jaxpr.invars), outs, vars_, tuple(ops), names)

    def _constants(self, constvars, env, ops, vars_) -> None:
        # A closed-over array: a value no op computes, replicated like any constant.
        for v in constvars:
            env[v] = self._new(v.aval, vars_)
            ops.append(JaxprOp("constant", (), (env[v],)))

    def _read(self, v, env) -> int | None:
        return None if _is_literal(v) else env[v]

    def _read_or_constant(self, v, env, ops, vars_) -> int:
        """The id of `v`; a literal (a sub-program returning a constant) becomes a constant
        op, since an output needs an id."""
        if not _is_literal(v):
            return env[v]
        vid = self._new(v.aval, vars_)
        ops.append(JaxprOp("constant", (), (vid,)))
        return vid

    def _eqns(self, eqns, env, ops: list[JaxprOp], vars_, scope: str) -> None:
        for eqn in eqns:
            name = eqn.primitive.name
            inner = _innermost_scope(eqn) or scope
            if name in _CALLS and _call_jaxpr(eqn) is not None:
                self._inline(eqn, env, ops, vars_, inner)
                continue
            ins = tuple(self._read(v, env) for v in eqn.invars)
            outs = tuple(self._new(v.aval, vars_) for v in eqn.outvars)
            for v, vid in zip(eqn.outvars, outs, strict=True):
                env[v] = vid
            if name in _BODIES:
                ops.append(self._body_op(eqn, ins, outs, inner))
            elif name == "sharding_constraint":
                ops.append(JaxprOp(name, ins, outs, _params(eqn.params), point=inner,
                                   own_spec=_spec_entries(getattr(eqn.params["sharding"], "spec",
                                                                  None))))
            else:
                ops.append(JaxprOp(name, ins, outs, _params(eqn.params)))

    def _inline(self, eqn, env, ops, vars_, scope: str) -> None:
        """A call's body in place: its invars are the caller's inputs, the caller's outvars
        its results, so no op marks the call."""
        sub = _call_jaxpr(eqn)
        jaxpr = sub.jaxpr if hasattr(sub, "consts") else sub     # closed, or open (remat)
        inner: dict[Any, int] = {}
        self._constants(jaxpr.constvars, inner, ops, vars_)
        # custom_jvp_call/custom_vjp_call pass their consts first, as the body's first invars.
        for v, outer in zip(jaxpr.invars, eqn.invars, strict=True):
            inner[v] = self._read_or_constant(outer, env, ops, vars_)
        self._eqns(jaxpr.eqns, inner, ops, vars_, scope)
        for outer, v in zip(eqn.outvars, jaxpr.outvars, strict=True):
            env[outer] = self._read_or_constant(v, inner, ops, vars_)

    def _body_op(self, eqn, ins, outs, scope: str) -> JaxprOp:
        name, p = eqn.primitive.name, eqn.params
        if name == "scan":
            body = self.program(p["jaxpr"].jaxpr, scope=scope)
            return JaxprOp(name, ins, outs, _params(p), body, runs=int(p["length"]))
        if name == "while":
            # The cond's consts are dropped: only the body's work and collectives count.
            nc = p["cond_nconsts"]
            body = self.program(p["body_jaxpr"].jaxpr, scope=scope)
            params = {"num_consts": p["body_nconsts"],
                      "num_carry": len(eqn.invars) - nc - p["body_nconsts"], "length": 1}
            return JaxprOp(name, ins[nc:], outs, params, body,
                           note="a while loop's trip count is not known from the program; its "
                           "body is counted once")
        if name == "cond":
            branches = [self.program(b.jaxpr, scope=scope) for b in p["branches"]]
            pick = max(range(len(branches)), key=lambda i: _work(branches[i]))
            note = ("" if len(branches) == 1 else
                    f"a cond is counted by its branch with the most work (branch {pick} of "
                    f"{len(branches)})")
            return JaxprOp(name, ins[1:], outs, {"branch": pick}, branches[pick], note=note)
        # shard_map: its body is per device already (manual over its axes).
        body = self.program(p["jaxpr"], scope=scope)
        manual = p.get("manual_axes", p.get("newly_manual_axes", p.get("axis_names", ())))
        params = {"in_specs": tuple(_spec_entries(s) for s in p["in_specs"]),
                  "out_specs": tuple(_spec_entries(s) for s in p["out_specs"]),
                  "manual_axes": tuple(sorted(str(a) for a in manual))}
        return JaxprOp(name, ins, outs, params, body)


def _call_jaxpr(eqn):
    key = _CALLS.get(eqn.primitive.name)
    if key is None:
        return None
    return eqn.params.get(key) or eqn.params.get("fun_jaxpr")


def _is_literal(v) -> bool:
    # jax.core.Literal has a `val`; a Var does not.
    return hasattr(v, "val")


def _var(aval) -> Var:
    shape = tuple(int(d) for d in getattr(aval, "shape", ()))
    dtype = getattr(aval, "dtype", None)
    return Var(shape, str(dtype) if dtype is not None else str(aval))


def _innermost_scope(eqn) -> str:
    """The name of the innermost jax.named_scope around the eqn (transforms such as jvp and
    transpose are not scopes); empty where there is none."""
    stack = getattr(getattr(eqn.source_info, "name_stack", None), "stack", ())
    for item in reversed(stack):
        if type(item).__name__ == "Scope":
            return str(item.name)
    return ""


def _spec_entries(spec) -> tuple[Entry, ...] | None:
    """A PartitionSpec as spec entries; an unconstrained entry is None (left free)."""
    if spec is None:
        return None
    out: list[Entry] = []
    for entry in tuple(spec):
        if isinstance(entry, str):
            out.append(entry)
        elif isinstance(entry, tuple | list):
            axes = tuple(a for a in entry if isinstance(a, str))
            out.append(None if not axes else axes[0] if len(axes) == 1 else axes)
        else:
            out.append(None)            # None, or P.UNCONSTRAINED
    return tuple(out)


_SKIP = object()


def _params(params: Mapping) -> dict[str, Any]:
    out = {}
    for key, value in params.items():
        plain = _plain(value)
        if plain is not _SKIP:
            out[key] = plain
    return out


def _plain(v):
    """A param as plain Python data; _SKIP for what has none worth keeping (sub-programs,
    functions, meshes and shardings: the builder reads those itself)."""
    if v is None or isinstance(v, bool | int | float | str):
        return v
    if isinstance(v, enum.Enum):
        return v.name
    if hasattr(v, "_fields"):                    # GatherDimensionNumbers and the like
        return {f: _plain(getattr(v, f)) for f in v._fields}
    if isinstance(v, tuple | list):
        items = tuple(_plain(x) for x in v)
        return _SKIP if any(x is _SKIP for x in items) else items
    if isinstance(v, frozenset | set):
        return tuple(sorted(str(x) for x in v))
    if type(v).__module__.startswith("numpy"):
        if hasattr(v, "itemsize") and hasattr(v, "kind"):   # a numpy dtype
            return str(v)
        if hasattr(v, "item"):
            return v.item()
    if hasattr(v, "eqns") or hasattr(v, "jaxpr") or callable(v):
        return _SKIP
    if type(v).__name__ in ("Mesh", "AbstractMesh", "NamedSharding", "PartitionSpec"):
        return _SKIP
    if type(v).__name__.endswith("DType"):
        return str(v)
    return str(v)


def _work(program: Program) -> float:
    """A branch's work at global shapes: its dots' FLOPs, and one per element of every other
    op's outputs, with bodies counted by their trip counts. Only to choose a cond's branch."""
    total = 0.0
    for op in program.ops:
        if op.body is not None:
            total += op.runs * _work(op.body)
        elif op.primitive == "dot_general":
            if None in op.inputs[:2]:
                continue
            lhs, rhs = (program.vars[i] for i in op.inputs[:2])
            (_, rc), (_, rb) = op.params["dimension_numbers"]
            free = prod(d for i, d in enumerate(rhs.shape) if i not in rc and i not in rb)
            total += 2.0 * prod(lhs.shape) * free
        else:
            total += sum(prod(program.vars[o].shape) for o in op.outputs)
    return total
