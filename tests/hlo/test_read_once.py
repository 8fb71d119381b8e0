"""What the readers derive from a parsed module is read once: each computation's collectives,
the chains of fusions that run one collective, the schedule of a module's text."""

import gc
import weakref

from explorer._src.hlo.chains import collective_chains
from explorer._src.hlo.collectives import CollectiveKind, collective_kind
from explorer._src.hlo.module import parse_module
from explorer._src.hlo.schedule import SCHEDULES_KEPT, StepKind, cached_schedule


def _gather(name: str, operand: str, flag: str) -> str:
    return (f"%{name} = bf16[2048,4096]{{1,0}} all-gather(%{operand}), channel_id=7, "
            "replica_groups=[1,8]<=[8], dimensions={0}, "
            f'backend_config={{"async_collective_fusion_config":{{"flag_start":"{flag}"}}}}')


# A TPU all-gather split over two fusions: `start` begins it, `done` (which reads `start` and
# holds a flagged copy of the gather under the same channel id) waits for it.
CHAIN = f"""HloModule m, is_scheduled=true, num_partitions=8

%start_body (g0: bf16[256,4096]) -> bf16[2048,4096] {{
  %g0 = bf16[256,4096]{{1,0}} parameter(0)
  ROOT {_gather("ag.0", "g0", "-1")}
}}

%done_body (g1: bf16[2048,4096]) -> bf16[2048,4096] {{
  %g1 = bf16[2048,4096]{{1,0}} parameter(0)
  ROOT {_gather("ag.1", "g1", "2")}
}}

ENTRY %main (shard: bf16[256,4096]) -> bf16[2048,4096] {{
  %shard = bf16[256,4096]{{1,0}} parameter(0)
  %start = bf16[2048,4096]{{1,0}} fusion(%shard), kind=kCustom, calls=%start_body
  %copy.1 = bf16[256,4096]{{1,0}} copy-start(%shard)
  ROOT %done = bf16[2048,4096]{{1,0}} fusion(%start), kind=kCustom, calls=%done_body
}}
"""


def test_an_opcode_names_its_collective_kind_and_whether_it_starts_an_async_pair():
    assert collective_kind("all-gather") == (CollectiveKind.ALL_GATHER, False)
    assert collective_kind("all-reduce-start") == (CollectiveKind.ALL_REDUCE, True)
    assert collective_kind("all-reduce-done") == (None, False)
    assert collective_kind("copy-start") == (None, False)
    assert collective_kind("fusion") == (None, False)


def test_each_computation_lists_its_collectives_in_order():
    module = parse_module(CHAIN)
    assert {name: [i.name for i in instrs] for name, instrs in module.collectives.items()} == {
        "start_body": ["ag.0"], "done_body": ["ag.1"], "main": []}


def test_the_chains_of_a_module_are_found_once_per_parse():
    module = parse_module(CHAIN)
    [chain] = collective_chains(module)
    assert (chain.head, chain.collective, chain.members, chain.done, chain.pieces) == (
        "start", "ag.0", ("done",), "done", ("ag.1",))
    assert collective_chains(module) is collective_chains(module)
    # Another parse of the same text is another module: its chains are found for it.
    again = collective_chains(parse_module(CHAIN))
    assert again == collective_chains(module) and again is not collective_chains(module)


def test_the_chains_kept_for_a_module_do_not_keep_the_module_alive():
    module = parse_module(CHAIN)
    collective_chains(module)
    gone = weakref.ref(module)
    del module
    gc.collect()
    assert gone() is None


def test_a_schedule_is_read_once_per_text_and_the_oldest_is_let_go():
    schedule = cached_schedule(CHAIN)
    assert [(s.instr.name, s.kind) for s in schedule.steps] == [
        ("shard", StepKind.FREE), ("start", StepKind.COLLECTIVE_START),
        ("copy.1", StepKind.FREE), ("done", StepKind.COLLECTIVE_DONE),
        ("done", StepKind.COMPUTE)]
    # An equal text (a Report loaded from disk holds its own copy) finds the same schedule.
    assert cached_schedule("".join(list(CHAIN))) is schedule
    for k in range(SCHEDULES_KEPT):
        cached_schedule(CHAIN.replace("HloModule m,", f"HloModule m{k},"))
    assert cached_schedule(CHAIN) is not schedule
