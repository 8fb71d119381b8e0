"""The read-only context of the why reader: the optimized and propagated modules of one
compile, indexed once, and the queries the rules ask of them.

Nothing in a Context changes after `Context.of` builds it, so every rule reads the same
indexes and no rule can leave state behind for the next."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

from explorer._src.hlo.collectives import CollectiveKind
from explorer._src.hlo.groups import (
    axes_of_groups,
    axes_of_pairs,
    device_groups,
    source_target_pairs,
)
from explorer._src.hlo.module import HloModule, Instruction, ints
from explorer._src.report.why.layout import DimAxes, dim_axes, shard_dims
from explorer._src.report.why.ops import REDUCER, RENAMING, dim_sources
from explorer._src.report.why.steps import StepChain, find_chains
from explorer._src.spec.mesh import MeshSpec

if TYPE_CHECKING:       # at run time origins.py imports this package (its op_name words)
    from explorer._src.report.origins import Origins


def location(module: HloModule, instr: Instruction) -> tuple[str, int] | None:
    """The user's file and line that produced `instr`, if its metadata says."""
    src = module.source(instr)
    return (src[0], src[1]) if src else None


# A module has a few dozen distinct shardings over a thousand instructions: each is read once.
_layout = lru_cache(maxsize=4096)(dim_axes)


def renames(module: HloModule, i: Instruction) -> bool:
    """A fusion that only copies, reshapes or converts its one operand (XLA's
    `wrapped_copy` of a weight it relays out before a collective)."""
    if i.opcode != "fusion":
        return False
    body = module.called(i)
    return bool(body) and all(x.opcode in RENAMING or x.opcode == "parameter" for x in body)


@dataclass(frozen=True)
class Context:
    """The two modules of one compile and their indexes. `inputs` are the program's input
    names in HLO parameter order, to name parameters; `propagated` is None when the compiler
    ran no partitioning pass (then the prop_* indexes are empty)."""

    optimized: HloModule
    propagated: HloModule | None
    mesh: MeshSpec
    inputs: tuple[str, ...]
    opt_names: Mapping[str, Instruction]
    prop_names: Mapping[str, Instruction]
    # Propagated instructions by op_name, reducer and comparator bodies left out.
    by_op_name: Mapping[str, tuple[Instruction, ...]]
    # Propagated instruction name -> the instructions that use it.
    users: Mapping[str, tuple[Instruction, ...]]
    # The same for the optimized module (what a collective's result is used by).
    opt_users: Mapping[str, tuple[Instruction, ...]]
    # Optimized collective name -> the steps of the one data movement it is part of.
    chains: Mapping[str, StepChain]
    # Propagated instruction (or input) name -> where each mesh axis of its layout came from,
    # read from Shardy's record (explorer/_src/report/origins.py); empty where there is none.
    origins: Mapping[str, Origins] = field(default_factory=dict)
    # A multi-slice program's module before libtpu split it: the blocks of devices it cuts a
    # collective's groups at (the slices, and each chip's copies across them), whose parts of
    # a mesh axis are over that axis (explorer._src.hlo.groups.axes_of_groups); () elsewhere.
    cuts: tuple[Sequence[Sequence[int]], ...] = ()

    @classmethod
    def of(cls, optimized: HloModule, propagated: HloModule | None, mesh: MeshSpec,
           inputs: Sequence[str] = (), origins: Mapping[str, Origins] | None = None,
           cuts: Sequence[Sequence[Sequence[int]]] = ()) -> Context:
        opt_names = optimized.by_name()
        by_op_name: dict[str, list[Instruction]] = {}
        if propagated is not None:
            # Reducer and comparator bodies repeat their caller's op_name; a shard_map body,
            # also called with to_apply, is real code.
            reducers = {i.callee("to_apply", "comparator")
                        for i in propagated.instructions() if i.opcode != "call"}
            for instr in propagated.instructions():
                if instr.op_name and instr.computation not in reducers:
                    by_op_name.setdefault(instr.op_name, []).append(instr)
        return cls(optimized, propagated, mesh, tuple(inputs), opt_names,
                   propagated.by_name() if propagated is not None else {},
                   {k: tuple(v) for k, v in by_op_name.items()},
                   propagated.users if propagated is not None else {},
                   optimized.users, find_chains(optimized, opt_names), origins or {},
                   tuple(cuts))

    # -- layouts -----------------------------------------------------------------------------

    def axes(self, i: Instruction) -> DimAxes | None:
        """The layout of a propagated instruction's one array; None for a tuple or an
        unreadable sharding."""
        if len(i.arrays) != 1:
            return None
        return _layout(i.sharding, len(i.arrays[0].dims), self.mesh)

    def shard_dims(self, dims: Sequence[int], axes: DimAxes) -> tuple[int, ...]:
        return shard_dims(dims, axes, self.mesh)

    def group_axes(self, instr: Instruction, kind: CollectiveKind) -> tuple[str, ...]:
        """The mesh axes an optimized collective's device groups span; () when they span no
        whole axis or cannot be read."""
        m = self.mesh
        try:
            if kind is CollectiveKind.COLLECTIVE_PERMUTE:
                return tuple(axes_of_pairs(source_target_pairs(instr.attrs) or [], m.sizes,
                                           m.names))
            groups = device_groups(instr.attrs, m.device_count) or []
            for within in (None, *self.cuts):
                axes = axes_of_groups(groups, m.sizes, m.names, within)
                if axes:
                    return axes
            return ()
        except ValueError:
            return ()

    # -- program inputs ----------------------------------------------------------------------

    def _names(self, module: HloModule) -> Mapping[str, Instruction]:
        return self.prop_names if module is self.propagated else self.opt_names

    def input_of(self, module: HloModule, i: Instruction | None) -> int | None:
        """The number of the program input that `i` (of `module`) is, after reshapes, copies,
        converts and broadcasts (the same in both modules: parameter i is the i-th input);
        None if it is not one."""
        names = self._names(module)
        for _ in range(8):
            if i is None:
                return None
            if i.opcode == "parameter":
                number = ints(i.operand_text)
                return number[0] if i.computation == module.entry and number else None
            if len(i.operands) != 1 or not (i.opcode in RENAMING or renames(module, i)):
                return None
            i = names.get(i.operands[0])
        return None

    def inputs_near(self, module: HloModule, i: Instruction | None, depth: int) -> set[int]:
        """The program inputs among `i`'s operands (and theirs, to `depth` levels)."""
        names = self._names(module)
        found: set[int] = set()
        level = [i] if i is not None else []
        for _ in range(depth):
            level = [names[o] for x in level for o in x.operands if o in names]
            found |= {n for x in level if (n := self.input_of(module, x)) is not None}
        return found

    # -- tracing dimensions back to inputs ---------------------------------------------------

    def trace(self, start: Instruction, dim: int) -> set[tuple[Instruction, int]]:
        """The program inputs (entry parameters) and dimensions that `dim` of propagated
        `start` comes from, following instructions that keep dimensions apart (element-wise
        ops, broadcast, transpose, dot, reduce, reshapes that keep the dimension); where the
        trail is lost (a merged dimension, a call) it adds nothing."""
        todo = [(start, dim)]
        seen = set()
        found = set()
        while todo and len(seen) < 4096:
            i, d = todo.pop()
            if (i.name, d) in seen or not i.arrays:
                continue
            seen.add((i.name, d))
            if i.opcode == "parameter":
                if i.computation == self.propagated.entry:
                    found.add((i, d))
                continue
            dims = i.arrays[0].dims
            ops = [self.prop_names[o] for o in i.operands if o in self.prop_names]
            todo += dim_sources(i, d, dims, ops)
        return found

    def batch_dim(self, *operand_dims: tuple[Instruction, int]) -> tuple[Instruction, int] | None:
        """The input whose dimension 0 (the batch dimension, by the convention of jax models)
        a backward-pass reduction sums over: every program input that each summed dimension
        comes from is one at its dimension 0. A weight's dimension (the `mlp` dimension of w1,
        say) on either side rules it out, however it is sharded."""
        common = None
        for o, d in operand_dims:
            sources = self.trace(o, d)
            if not sources or any(dim != 0 for _, dim in sources):
                return None
            names = {i.name: i for i, _ in sources}
            common = names if common is None else {
                n: i for n, i in common.items() if n in names} or common
        if not common:
            return None
        return common[min(common)], 0

    def reducer(self, a: Instruction) -> str:
        """The reduction a reduce computes, as a sentence names it (`sum`, `maximum`)."""
        for instr in self.propagated.called(a, "to_apply"):
            if instr.is_root:
                return REDUCER.get(instr.opcode, instr.opcode)
        return "sum"
