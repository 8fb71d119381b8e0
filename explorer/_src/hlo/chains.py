"""TPU collectives that run across several fusions: one collective, several instructions.

The TPU compiler splits some collectives over a chain of fusions in one computation (its
"async collective fusion" with multiple steps): a first fusion starts the collective, later
fusions do arithmetic of their own while it progresses, and a last one waits for it. Each
fusion of the chain holds a copy of the same collective instruction, under the same
`channel_id`; every fusion after the first reads the one before it (through get-tuple-element)
and gives its collective synchronisation flags in the backend config
(`"async_collective_fusion_config":{"flag_start":"2",...}`; -1 when it has none). In text:

    %async-collective-start.3 = (...) fusion(%x), calls=%fc.595         # all-gather.154, ch 30
    %fusion.854 = (...) fusion(%gte.0, ..., %w), calls=%acf.854         # all-gather.156, ch 30
    %async-collective-done.3 = bf16[...] fusion(%gte.1, ...), calls=...  # all-gather.158, ch 30

That is one all-gather, in flight from the first fusion to the last, not three. Rematerialisation
may clone a middle fusion; a clone reads the same fusion as the original and uses only its
arithmetic. This module finds the chains; the collective list counts each chain once (its first
fusion's collective) and the schedule reads it as one asynchronous collective.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from weakref import WeakKeyDictionary

from explorer._src.hlo.module import HloModule, Instruction

# Free ops through which a fusion's result is passed on to the next fusion of a chain.
_PASS_ON = frozenset({"get-tuple-element", "bitcast"})


@dataclass(frozen=True)
class Chain:
    """One collective run across the fusions `head`, `members`... of one computation."""

    computation: str
    head: str                    # the fusion that starts it
    collective: str              # the collective instruction in the head's body: the one counted
    members: tuple[str, ...]     # the later fusions of the chain, in schedule order
    done: str                    # the member that waits for the collective (the chain's last)
    pieces: tuple[str, ...]      # the members' copies of the collective: not counted again
    carried: tuple[str, ...] = ()   # fusions in the bodies of member loops that continue it


def flagged(instr: Instruction) -> bool:
    """A TPU async collective fusion's collective: its backend_config gives it synchronisation
    flags (`"async_collective_fusion_config":{"flag_start":"2",...}`; -1 when it has none)."""
    try:
        config = json.loads(instr.attr("backend_config") or "{}")
        return int(config.get("async_collective_fusion_config", {}).get("flag_start", -1)) >= 0
    except (TypeError, ValueError, AttributeError):
        return False


# Module -> its chains. The collective list (explorer._src.report.dtypes) and the schedule ask for
# the chains of the same parsed module; they are found once and live as long as it does.
_CHAINS: WeakKeyDictionary[HloModule, tuple[Chain, ...]] = WeakKeyDictionary()


def collective_chains(module: HloModule) -> tuple[Chain, ...]:
    """Every chain of fusions that runs one collective (see the module docstring); found once
    per module."""
    chains = _CHAINS.get(module)
    if chains is None:
        chains = _CHAINS[module] = _find_chains(module)
    return chains


def _find_chains(module: HloModule) -> tuple[Chain, ...]:
    chains = [c for computation, instrs in module.computations.items()
              for c in _chains_in(module, computation, instrs)]
    # A loop body's fusions that carry a chain from outside are not a chain of their own.
    carried = {name for c in chains for name in c.carried}
    return tuple(c for c in chains if c.head not in carried)


def fused_collectives(module: HloModule, instr: Instruction) -> tuple[Instruction, ...]:
    """The collectives in the body of a fusion; () for any other instruction."""
    return module.collectives.get(instr.callee(), ()) if instr.opcode == "fusion" else ()


def _collectives(module: HloModule, fusion: Instruction) -> tuple[Instruction, ...]:
    """The collectives of a fusion's body, where each has a channel id; else ()."""
    found = fused_collectives(module, fusion)
    return found if all(i.attr("channel_id") for i in found) else ()


def _chains_in(module: HloModule, computation: str, instrs: list[Instruction]) -> list[Chain]:
    by_name = {i.name: i for i in instrs}

    def produced_by(name: str) -> str:
        instr = by_name.get(name)
        while instr is not None and instr.opcode in _PASS_ON and instr.operands:
            name = instr.operands[0]
            instr = by_name.get(name)
        return name

    def sources(instr: Instruction) -> set[str]:
        names = instr.operands
        if instr.opcode == "while" and names and names[0] in by_name \
                and by_name[names[0]].opcode == "tuple":
            names = by_name[names[0]].operands    # a loop reads its state tuple's parts
        return {produced_by(o) for o in names}

    head_of: dict[str, str] = {}               # chain fusion -> the head of its chain
    reads: dict[str, set[str]] = {}            # member -> the chain instructions it reads
    channel: dict[str, set[str]] = {}          # head -> its collectives' channel ids
    inner: dict[str, tuple[Instruction, ...]] = {}   # chain fusion -> its collectives
    # loop -> {head: the body's fusions} for each chain whose flags the loop carries
    carried: dict[str, dict[str, tuple[Instruction, ...]]] = {}

    def chain_of(source: str, channels: set[str]) -> str | None:
        """The head of the chain with these channels that `source` is part of, if any."""
        if source in carried:
            return next((h for h in carried[source] if channel[h] == channels), None)
        head = head_of.get(source)
        return head if head is not None and channel[head] == channels else None

    for instr in instrs:
        if instr.opcode == "while":
            body = module.called(instr, "body")
            parts = [(f, found) for f in body if (found := _collectives(module, f))
                     and all(flagged(i) for i in found)]
            state = sources(instr)
            for f, found in parts:
                channels = {i.attr("channel_id") for i in found}
                for source in state:
                    head = chain_of(source, channels)
                    if head is None:
                        continue
                    # The loop carries the chain's flags: its body's fusion continues it.
                    loop = carried.setdefault(instr.name, {})
                    if f not in loop.get(head, ()):
                        loop[head] = (*loop.get(head, ()), f)
                    reads.setdefault(instr.name, set()).add(source)
            continue
        found = _collectives(module, instr)
        if not found:
            continue
        inner[instr.name] = found
        channels = {i.attr("channel_id") for i in found}
        linked = {s for s in sources(instr) if chain_of(s, channels) is not None}
        heads = {chain_of(s, channels) for s in linked}
        if len(heads) == 1 and all(flagged(i) for i in found):
            head_of[instr.name] = heads.pop()
            reads[instr.name] = linked
        else:
            head_of[instr.name] = instr.name
            channel[instr.name] = channels
    chains = []
    for head in channel:
        members = tuple(i.name for i in instrs if head_of.get(i.name) == head and i.name != head
                        or head in carried.get(i.name, {}))
        if not members:
            continue
        done = _last_on_path(head, members, reads)
        in_loops = tuple(f for m in members for f in carried.get(m, {}).get(head, ()))
        chains.append(Chain(
            computation, head, inner[head][0].name, members, done,
            tuple(i.name for m in members for i in inner.get(m, ()))
            + tuple(i.name for f in in_loops for i in _collectives(module, f)),
            tuple(f.name for f in in_loops)))
    return chains


def _last_on_path(head: str, members: tuple[str, ...], reads: dict[str, set[str]]) -> str:
    """The member that waits for the chain's collective: the last on the chain's own path,
    from the head, each time the first member that reads the last one (`reads`: member -> the
    chain instructions it reads); rematerialised clones read the same fusion later and sit off
    the path."""
    done = head
    while True:
        nxt = next((m for m in members if done in reads[m]), None)
        if nxt is None:
            return done
        done = nxt
