"""A multi-slice TPU program's collectives as the user's program has them.

libtpu splits every collective whose device groups cross slices into a collective inside each
slice and a DCN leg (explorer/_src/hlo/megascale.py), and drops their metadata on the way. Here:

- each DCN leg becomes a Collective of its own (tier "across", named by its send, its bytes
  what one device sends or receives), in the module's order among the others;
- every collective is matched to the collective of the program it came from, in the module
  before the split (CompileResult.before_slicing), where each still spans every slice and keeps
  its op_name and line: an in-slice one by its channel id and kind (the split keeps both), a
  DCN leg by the name in its rendezvous key, else by being the one collective of its kind (or
  the one at all) whose groups cross slices that no key names; a leg matched to none is said
  in the notes, never guessed;
- a matched collective takes that collective's op_name, line and why (explained on the module
  before the split by the same rules as any other, explorer/_src/report/why), its sentence saying
  which part of the collective it is; one matched to none says why no reason is read;
- a DCN leg is linked (`leg_of`) to the in-slice collective whose result it sends or whose
  operand it receives (explorer._src.hlo.megascale.in_slice_partner), else to the in-slice
  collective matched to the same program collective.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from explorer._src.cost.mapping import Tier
from explorer._src.hlo.collectives import CollectiveKind
from explorer._src.hlo.groups import (
    axes_of_groups,
    axes_of_pairs,
    device_groups,
    ring_direction,
    source_target_pairs,
)
from explorer._src.hlo.megascale import DcnTransfer, SliceLayout, dcn_transfers, in_slice_partner
from explorer._src.hlo.module import HLO_TO_NUMPY, HloModule, Instruction
from explorer._src.report.dtypes import channel_id, collectives_of
from explorer._src.report.report import Collective
from explorer._src.report.source import line_of_code, source_of
from explorer._src.report.why import Reason, Why, explain_collectives
from explorer._src.report.why.text import article
from explorer._src.spec.mesh import MeshSpec


def dcn_legs(module: HloModule, layout: SliceLayout, mesh: MeshSpec,
             unread: list[str]) -> list[Collective]:
    """A Collective per DCN leg of the module; none, with a note, where the legs cannot be
    read."""
    try:
        transfers = dcn_transfers(module, layout)
    except ValueError as e:
        unread.append(f"the transfers between slices could not be read ({e}); the collectives "
                      "listed are those inside each slice")
        return []
    return [replace(_leg(t, layout, mesh), leg_of=in_slice_partner(module, t) or "")
            for t in transfers]


def _leg(t: DcnTransfer, layout: SliceLayout, mesh: MeshSpec) -> Collective:
    received = t.recv.arrays[0] if t.recv.arrays else None
    groups = [list(g) for g in t.groups]
    if t.pairs:
        axes = axes_of_pairs(list(t.pairs), mesh.sizes, mesh.names)
        direction = ring_direction(list(t.pairs), mesh.sizes, mesh.names)
    else:
        axes = axes_of_groups(groups, mesh.sizes, mesh.names, within=layout.peers)
        direction = ""
    dtype = HLO_TO_NUMPY.get(received.dtype, received.dtype) if received else ""
    return Collective(
        kind=t.kind, axes=tuple(axes), group_size=max((len(g) for g in groups), default=1),
        shape=received.dims if received else (), dtype=dtype, bytes=t.bytes, is_async=True,
        hlo_name=t.send.name, computation=t.send.computation, groups=t.groups,
        program_dtypes=(dtype,), program_part_bytes=(t.bytes,),
        part_shapes=(received.dims,) if received else (), direction=direction,
        tier=Tier.ACROSS, dcn_key=t.key)


def in_module_order(module: HloModule, collectives: Sequence[Collective]
                    ) -> tuple[Collective, ...]:
    """The collectives in the order of their instructions in the module (a DCN leg at its
    send), so that each leg sits beside the in-slice part it completes."""
    position = {i.name: k for k, i in enumerate(module.instructions())}
    return tuple(sorted(collectives, key=lambda c: position.get(c.hlo_name, len(position))))


def with_originals(collectives: Sequence[Collective], optimized: HloModule,
                   before: HloModule, propagated: HloModule | None, layout: SliceLayout,
                   mesh: MeshSpec, inputs: Sequence[str], origins: Mapping | None,
                   unread: list[str]) -> tuple[Collective, ...]:
    """The collectives with the op_name, line and why of the program collective each came
    from, and each DCN leg linked to its in-slice part."""
    found = _program_collectives(collectives, optimized, before, layout, mesh, unread)
    legs = [c for c in collectives if c.dcn_key]
    first_inside: dict[str, str] = {}     # program collective -> its first in-slice part
    for c in collectives:
        if not c.dcn_key and c.hlo_name in found:
            first_inside.setdefault(found[c.hlo_name].name, c.hlo_name)
    partner = {c.hlo_name: c.leg_of or (first_inside.get(found[c.hlo_name].name, "")
                                        if c.hlo_name in found else "") for c in legs}
    leg_of_inside = {inside: leg for leg, inside in partner.items() if inside}
    # libtpu has already split some collectives there (an all-reduce over data=4 on 2 slices
    # into a reduce-scatter inside each slice, an all-reduce between them, an all-gather):
    # each part is over the axis it is part of.
    whys = explain_collectives(before, propagated, mesh, inputs, origins,
                               cuts=(layout.members, layout.peers))
    out = []
    for c in collectives:
        orig = found.get(c.hlo_name)
        if c.dcn_key:
            c = replace(c, leg_of=partner[c.hlo_name])
        if orig is None:
            out.append(replace(c, why=Why(Reason.UNKNOWN, _unmatched(c))))
            continue
        why = whys.get(orig.name)
        if why is not None and (c.dcn_key or c.hlo_name in leg_of_inside):
            other = c.leg_of if c.dcn_key else leg_of_inside[c.hlo_name]
            why = replace(why, text=f"{_part_of(c, orig, other)} {why.text}")
        out.append(replace(c, op_name=orig.op_name or c.op_name,
                           source=source_of(before, orig) or c.source,
                           source_text=line_of_code(before, orig) or c.source_text,
                           why=why or c.why))
    return tuple(out)


def _program_collectives(collectives: Sequence[Collective], optimized: HloModule,
                         before: HloModule, layout: SliceLayout, mesh: MeshSpec,
                         unread: list[str]) -> dict[str, Instruction]:
    """hlo_name -> the collective of the module before the split it came from, for those
    that can be told (see the module's docstring); a combined in-slice collective (several
    parts) is none's alone and is left out."""
    originals = {p.instr.name: p for p in collectives_of(before)}
    by_channel = {(channel_id(p.instr), p.kind): p.instr for p in originals.values()
                  if channel_id(p.instr) is not None}
    opt_names = optimized.by_name()
    found: dict[str, Instruction] = {}
    for c in collectives:
        if not c.dcn_key and c.parts == 1 and c.hlo_name in opt_names:
            orig = by_channel.get((channel_id(opt_names[c.hlo_name]), c.kind))
            if orig is not None:
                found[c.hlo_name] = orig
    legs = [c for c in collectives if c.dcn_key]
    named = {c.hlo_name: originals[o].instr for c in legs
             if (o := c.dcn_key.rsplit("_", 1)[0]) in originals}
    claimed = {i.name for i in named.values()}
    unnamed = [p for p in originals.values() if p.instr.name not in claimed
               and _crosses(p.instr, p.kind, layout, mesh)]
    for c in legs:
        orig = named.get(c.hlo_name) or _only(unnamed, c.kind)
        if orig is not None:
            found[c.hlo_name] = orig
    lost = [c for c in legs if c.hlo_name not in found]
    if lost:
        unread.append(f"{len(lost)} DCN leg(s) (e.g. {lost[0].hlo_name}, rendezvous key "
                      f"{lost[0].dcn_key!r}) could not be matched to a collective of the "
                      "program, so their line and reason are not shown")
    return found


def _part_of(c: Collective, orig: Instruction, other: str) -> str:
    """Which part of the program collective `orig` the collective `c` is, in words; `other`
    names its other part ("" where it has none)."""
    kind = orig.opcode.removesuffix("-start")
    split = f"`{orig.name}` before libtpu split it at the slices' edges"
    if c.dcn_key:
        inside = f"; its part inside each slice is `{other}`" if other else ""
        return (f"Between slices, over the data-center network: part of {article(kind)} "
                f"{kind} of the program ({split}{inside}).")
    return (f"Inside each slice, over ICI: part of {article(kind)} {kind} of the program "
            f"({split}; its part between slices is the DCN leg `{other}`).")


def _unmatched(c: Collective) -> str:
    """Why no reason is read for a collective matched to no program collective: libtpu's
    split dropped its metadata, so nothing else names where it came from."""
    if c.dcn_key:
        return (f"No reason found: this DCN leg (rendezvous key {c.dcn_key!r}) names no "
                "collective of the program before libtpu split it at the slices' edges, and "
                f"no one {c.kind} there is left to be it.")
    if c.parts > 1:
        return (f"No reason found: XLA combined {c.parts} {c.kind}s into this one, and libtpu "
                "dropped their metadata when it split the program at the slices' edges, so "
                "no line or reason is read for them.")
    return (f"No reason found: libtpu dropped this {c.kind}'s metadata when it split the "
            "program at the slices' edges, and its channel id names no collective of the "
            "program before the split.")


def _only(candidates: list, kind: CollectiveKind) -> Instruction | None:
    """The one candidate of `kind`, else the one candidate at all; None when it is not one."""
    same = [p for p in candidates if p.kind is kind]
    if len(same) == 1:
        return same[0].instr
    return candidates[0].instr if len(candidates) == 1 else None


def _crosses(instr: Instruction, kind: CollectiveKind, layout: SliceLayout,
             mesh: MeshSpec) -> bool:
    """Whether a collective of the module before the split moves data between slices."""
    try:
        if kind is CollectiveKind.COLLECTIVE_PERMUTE:
            groups = [list(p) for p in source_target_pairs(instr.attrs) or []]
        else:
            groups = device_groups(instr.attrs, mesh.device_count) or []
    except ValueError:
        return False
    return any(len({layout.slice_of[d] for d in g if d < len(layout.slice_of)}) > 1
               for g in groups)
