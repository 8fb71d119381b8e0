"""The data-center-network (DCN) legs of a multi-slice TPU program, read from libtpu's text.

libtpu compiles a program over several TPU slices as one per-slice program (its module says
`num_partitions=` the chips of one slice) and splits every collective whose device groups
cross slices in its "cross-slice-rewrites" pass (the "Megascale" pipeline): what stays inside a
slice remains an ordinary collective, over ICI; what crosses slices becomes a `send` and a `recv`
host transfer for MegaScale, the runtime that moves data between slices over the DCN:

    %after-all = token[] after-all(),
        frontend_attributes={MegascaleRendezvousKeyName="all-reduce_0"}
    %send = (f32[1,1,128]{...}, u32[], token[]) send(%all-reduce.1, %after-all), channel_id=2,
        is_host_transfer=true, frontend_attributes={_xla_host_transfer_handler_name=
        "xla_megascale_runtime",_xla_host_transfer_rendezvous="all-reduce_0",
        _xla_megascale_reduce_operation="SUM",_xla_megascale_target="{1,2}x{0:3}",
        _xla_megascale_transfer_type="ALL_REDUCE"}
    %recv = (f32[1,1,128]{...}, u32[], token[]) recv(%after-all), ... (the same attributes)
    %send-done = token[] send-done(%send), ...
    %recv-done = (f32[1,1,128]{...}, token[]) recv-done(%recv), ...

Measured with jax 0.10.2 and libtpu 0.0.42.1 (tests/hlo/data/megascale_*.hlo are such modules):

- the rendezvous key names the collective of the program the pass split, with a piece number
  (`all-reduce.3_0` for `%all-reduce.3`); the after-all carries it as
  MegascaleRendezvousKeyName, the send and recv as `_xla_host_transfer_rendezvous`;
- `_xla_megascale_transfer_type` is what the DCN leg does: ALL_REDUCE, ALL_GATHER,
  REDUCE_SCATTER, ALL_TO_ALL, or ONE_TO_ONE (a collective-permute's pairs);
- `_xla_megascale_target` names the devices by their MegaScale ids, (slice + 1) * 100000 + the
  chip's id in its slice, in one of three forms: `"{1,2,3,4}x{0:3}"`, every chip 0 to 3 of
  slices 1 to 4, one group per chip (that chip in each slice); `{{100000,300000},...}`, the
  groups spelled out; `{{200000->100002},...}`, a permute's source->target pairs;
- the send's operand is what each device sends and the recv's result what it receives, one
  array each, per device: the DCN leg's bytes are the larger of the two;
- the collectives left inside a slice name their devices by the slice's own partition ids:
  partition p of a slice is the p-th of that slice's devices in the mesh's row-major order, the
  same in every slice (`SliceLayout.everywhere` turns them into mesh positions).

Pure text readers, like the rest of explorer/_src/hlo; no jax.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from explorer._src.hlo.collectives import CollectiveKind, collective_kind
from explorer._src.hlo.groups import connected_groups
from explorer._src.hlo.module import HloModule, Instruction, ints, split_top_level

# A MegaScale device id is (slice + 1) * MEGASCALE_ID_STRIDE + the chip's id in its slice
# (jax's MegaScalePjRtDevice ids, measured: 100000..100003 and 200000..200003 for two v5e:2x2
# slices). The compact `{slices}x{chips}` form of a target is read with it.
MEGASCALE_ID_STRIDE = 100_000

# What a DCN leg does, as `_xla_megascale_transfer_type` says it.
TRANSFER_KINDS = {
    "ALL_REDUCE": CollectiveKind.ALL_REDUCE,
    "ALL_GATHER": CollectiveKind.ALL_GATHER,
    "REDUCE_SCATTER": CollectiveKind.REDUCE_SCATTER,
    "ALL_TO_ALL": CollectiveKind.ALL_TO_ALL,
    "ONE_TO_ONE": CollectiveKind.COLLECTIVE_PERMUTE,
}

RENDEZVOUS_KEY = "MegascaleRendezvousKeyName"     # on the after-all token
_RENDEZVOUS = "_xla_host_transfer_rendezvous"      # on the send and the recv
_TYPE = "_xla_megascale_transfer_type"
_TARGET = "_xla_megascale_target"
_REDUCTION = "_xla_megascale_reduce_operation"

_PRODUCT = re.compile(r"\{([\d,\s]*)\}x\{([\d:,\s]*)\}")
_PAIR = re.compile(r"\{\s*(\d+)\s*->\s*(\d+)\s*\}")


@dataclass(frozen=True)
class SliceLayout:
    """Where the devices of a multi-slice mesh are: per mesh position (row-major, the ids of
    replica groups), its slice and its device id (the MegaScale ids a DCN target names).

    Attributes:
        slice_of: each mesh position's slice, 0-based.
        device_ids: each mesh position's device id.
    """

    slice_of: tuple[int, ...]
    device_ids: tuple[int, ...]

    @cached_property
    def members(self) -> tuple[tuple[int, ...], ...]:
        """Each slice's mesh positions in mesh order: a slice's partition id p is its p-th."""
        slices = max(self.slice_of, default=-1) + 1
        return tuple(tuple(p for p, s in enumerate(self.slice_of) if s == k)
                     for k in range(slices))

    @cached_property
    def peers(self) -> tuple[tuple[int, ...], ...]:
        """Per partition id, its mesh position in each slice, slice by slice: the devices
        that a DCN leg joins (partition p of one slice with partition p of the others)."""
        return tuple(zip(*self.members, strict=True))

    @cached_property
    def _position_of_id(self) -> dict[int, int]:
        return {d: p for p, d in enumerate(self.device_ids)}

    @property
    def slices(self) -> int:
        return len(self.members)

    def position(self, device_id: int) -> int:
        """The mesh position of a MegaScale device id; ValueError for an id of no device."""
        try:
            return self._position_of_id[device_id]
        except KeyError:
            raise ValueError(f"device id {device_id} is none of the mesh's devices") from None

    def everywhere(self, local: list[list[int]]) -> list[list[int]]:
        """Groups of a slice's partition ids (a collective inside each slice) as the mesh
        positions of every slice's copy of them, slice by slice."""
        out = []
        for members in self.members:
            if any(not 0 <= p < len(members) for g in local for p in g):
                raise ValueError(f"partition ids {local} are outside a slice of "
                                 f"{len(members)} devices")
            out += [[members[p] for p in g] for g in local]
        return out

    def everywhere_pairs(self, local: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """A permute's (source, target) partition-id pairs, as mesh positions in every slice."""
        groups = self.everywhere([[s, t] for s, t in local])
        return [(g[0], g[1]) for g in groups]


@dataclass(frozen=True)
class DcnTransfer:
    """One DCN leg: a MegaScale send and recv of one rendezvous key.

    Attributes:
        key: the rendezvous key (MegascaleRendezvousKeyName), e.g. ``"all-reduce.3_0"``.
        kind: what it does across slices (its transfer type).
        send: the send instruction (what each device sends is its operand).
        recv: the recv instruction (what each device receives is its result).
        groups: the devices that exchange data, as mesh positions (for a permute, the
            connected ones).
        pairs: a permute's (source, target) mesh positions; () for the other kinds.
        reduction: the reduction of an all-reduce or reduce-scatter ("SUM"); "" otherwise.
        bytes: per device, the larger of what it sends and what it receives.
    """

    key: str
    kind: CollectiveKind
    send: Instruction
    recv: Instruction
    groups: tuple[tuple[int, ...], ...]
    pairs: tuple[tuple[int, int], ...]
    reduction: str
    bytes: int

    @property
    def original(self) -> str:
        """The name of the program's collective the key says was split (`all-reduce.3_0` ->
        `all-reduce.3`). libtpu may have renamed it on the way, so this is a name to look for,
        not a certainty."""
        return self.key.rsplit("_", 1)[0]


def frontend_attributes(instr: Instruction) -> dict[str, str]:
    """An instruction's `frontend_attributes={k=v,...}`, values unquoted; {} when none."""
    text = instr.attr("frontend_attributes")
    if not text or not text.startswith("{"):
        return {}
    out = {}
    for part in split_top_level(text[1:-1]):
        key, _, value = part.partition("=")
        value = value.strip()
        out[key.strip()] = value[1:-1] if value.startswith('"') and value.endswith('"') \
            else value
    return out


def rendezvous_key(instr: Instruction) -> str | None:
    """The rendezvous key of a MegaScale send or recv (or of the after-all before them); None
    for any other instruction."""
    attrs = frontend_attributes(instr)
    return attrs.get(_RENDEZVOUS) or attrs.get(RENDEZVOUS_KEY)


def is_dcn_send(instr: Instruction) -> bool:
    """A send of a DCN leg (a MegaScale host transfer with a transfer type)."""
    return instr.opcode == "send" and _TYPE in frontend_attributes(instr)


def target_devices(text: str, layout: SliceLayout
                   ) -> tuple[list[list[int]], list[tuple[int, int]]]:
    """The groups (or, for a permute, the pairs) of an `_xla_megascale_target`, as mesh
    positions: ([groups], []) or ([], [pairs]). ValueError for a form not known here."""
    text = text.strip().strip('"')
    m = _PRODUCT.fullmatch(text)
    if m:
        slices = ints(m.group(1))
        chips: list[int] = []
        for item in m.group(2).split(","):
            lo, _, hi = item.partition(":")
            chips += list(range(int(lo), int(hi or lo) + 1))
        return ([[layout.position(k * MEGASCALE_ID_STRIDE + c) for k in slices] for c in chips],
                [])
    if "->" in text:
        pairs = [(layout.position(int(s)), layout.position(int(t)))
                 for s, t in _PAIR.findall(text)]
        if not pairs:
            raise ValueError(f"no source->target pairs in DCN target {text[:120]!r}")
        return [], pairs
    if text.startswith("{{"):
        groups = [[layout.position(d) for d in ints(g)] for g in re.findall(r"\{([^{}]*)\}",
                                                                             text[1:-1])]
        if groups and all(groups):
            return groups, []
    raise ValueError(f"unknown DCN target form {text[:120]!r}")


def dcn_transfers(module: HloModule, layout: SliceLayout) -> list[DcnTransfer]:
    """Every DCN leg of the module, in the order of its sends. A send without its recv, or a
    target that cannot be read, raises ValueError (the caller says what is missing)."""
    recvs = {}
    for instr in module.instructions():
        if instr.opcode == "recv" and (key := rendezvous_key(instr)):
            recvs[key] = instr
    out = []
    for send in (i for i in module.instructions() if is_dcn_send(i)):
        attrs = frontend_attributes(send)
        key = rendezvous_key(send) or _token_key(module, send)
        if key is None or key not in recvs:
            raise ValueError(f"DCN send {send.name} has no recv of its rendezvous key {key!r}")
        kind = TRANSFER_KINDS.get(attrs[_TYPE])
        if kind is None:
            raise ValueError(f"DCN send {send.name}: transfer type {attrs[_TYPE]!r} is none of "
                             f"{', '.join(TRANSFER_KINDS)}")
        groups, pairs = target_devices(attrs.get(_TARGET, ""), layout)
        if pairs:
            groups = connected_groups(pairs)
        recv = recvs[key]
        sent = send.arrays[0].nbytes if send.arrays else 0
        received = recv.arrays[0].nbytes if recv.arrays else 0
        out.append(DcnTransfer(key, kind, send, recv, tuple(tuple(g) for g in groups),
                               tuple(pairs), attrs.get(_REDUCTION, ""), max(sent, received)))
    return out


def _token_key(module: HloModule, send: Instruction) -> str | None:
    """The key on the after-all token a send waits on (its last operand)."""
    names = module.by_name()
    token = names.get(send.operands[-1]) if send.operands else None
    return frontend_attributes(token).get(RENDEZVOUS_KEY) if token is not None else None


def dcn_recv_done_starts(module: HloModule) -> dict[str, str]:
    """recv-done name -> the name of the send of the same DCN leg: where the schedule sees a
    leg end, and which leg it is."""
    names = module.by_name()
    sends = {rendezvous_key(i): i.name for i in module.instructions() if is_dcn_send(i)}
    out = {}
    for instr in module.instructions():
        if instr.opcode == "recv-done" and instr.operands:
            recv = names.get(instr.operands[0])
            key = rendezvous_key(recv) if recv is not None else None
            if key in sends:
                out[instr.name] = sends[key]
    return out


# Instructions that pass their operand on unchanged in value (a layout or shape only), through
# which a DCN leg's data is followed to the in-slice collective beside it.
_PASS_ON = frozenset({"bitcast", "copy", "reshape", "transpose", "get-tuple-element"})


def in_slice_partner(module: HloModule, transfer: DcnTransfer) -> str | None:
    """The collective inside the slice that the DCN leg's data comes from or goes to, through
    instructions that only pass it on: the send's operand is its result (a reduction inside
    each slice first, then across slices), or the recv's result is its operand (across slices
    first). Its name (an async pair's start), or None where the data meets no collective."""
    names = module.by_name()
    users = module.users
    at = names.get(transfer.send.operands[0]) if transfer.send.operands else None
    for _ in range(8):
        if at is None:
            break
        if (found := _collective_name(at, names)) is not None:
            return found
        at = names.get(at.operands[0]) if _passes_on(module, at) and at.operands else None
    done = next((u for u in users.get(transfer.recv.name, ()) if u.opcode == "recv-done"), None)
    at = done
    for _ in range(8):
        following = users.get(at.name, []) if at is not None else []
        if len(following) != 1:
            break
        at = following[0]
        if (found := _collective_name(at, names)) is not None:
            return found
        if not _passes_on(module, at):
            break
    return None


def _collective_name(instr: Instruction, names: dict[str, Instruction]) -> str | None:
    """The collective `instr` is (an async -done named by its start); None if none."""
    if instr.opcode.endswith("-done") and instr.operands:
        start = names.get(instr.operands[0])
        if start is not None and collective_kind(start.opcode)[0] is not None:
            return start.name
        return None
    return instr.name if collective_kind(instr.opcode)[0] is not None else None


def _passes_on(module: HloModule, instr: Instruction) -> bool:
    if instr.opcode == "fusion":
        body = module.called(instr)
        return bool(body) and all(i.opcode in _PASS_ON or i.opcode == "parameter"
                                  for i in body)
    return instr.opcode in _PASS_ON
