# ruff: noqa: E501 (an HLO line is kept verbatim)
"""TPU collectives split over a chain of fusions: which fusions form one chain, found from the
collectives' channel ids, their synchronisation flags and the dataflow between the fusions.

The modules are small hand-written ones in the form the TPU compiler prints (see
explorer/_src/hlo/chains.py's docstring, and tests/report/test_trace.py for the timing of a chain):
`start` begins an all-gather, `cont` continues it beside arithmetic of its own, `done` waits."""

import pytest

from explorer._src.hlo.chains import collective_chains, flagged
from explorer._src.hlo.module import parse_module


def gather(name: str, flag: str | None, channel: str | None = "7") -> str:
    """An all-gather of f32[8,16] shards into f32[64,16] over 8 devices; `flag` its flag_start
    (None: no backend config); `channel` its channel id (None: none)."""
    config = "" if flag is None else (
        f', backend_config={{"async_collective_fusion_config":{{"flag_start":"{flag}"}}}}')
    ch = "" if channel is None else f"channel_id={channel}, "
    return (f"%{name} = f32[64,16]{{1,0}} all-gather(%g0), {ch}replica_groups=[1,8]<=[8], "
            f"dimensions={{0}}, use_global_device_ids=true{config}")


def chain_module(start=("-1", "7"), cont=("2", "7"), done=("2", "7"),
                 cont_reads="%s0, %s2", done_reads="%s0, %c2") -> str:
    """start -> cont -> done, each fusion with its copy of the gather as (flag, channel);
    `cont_reads`, `done_reads`: the shard and flags operands of the continuation and the done
    (by default: the start's shard, and the flags of the fusion before)."""
    return """HloModule jit_tpu, is_scheduled=true, num_partitions=8

%start_body (g0: f32[8,16]) -> (f32[8,16], f32[64,16], u32[]) {
  %g0 = f32[8,16]{1,0} parameter(0)
  """ + gather("ag.0", *start) + """
  ROOT %t = (f32[8,16]{1,0}, f32[64,16]{1,0}, u32[]) custom-call(%ag.0), custom_call_target="AsyncCollectiveFusionStart"
}

%cont_body (g0: f32[8,16], f: u32[], a: f32[16,16]) -> (f32[16,16], f32[64,16], u32[]) {
  %g0 = f32[8,16]{1,0} parameter(0)
  %f = u32[] parameter(1)
  %a = f32[16,16]{1,0} parameter(2)
  """ + gather("ag.1", *cont) + """
  %mm = f32[16,16]{1,0} dot(%a, %a), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %t = (f32[16,16]{1,0}, f32[64,16]{1,0}, u32[]) tuple(%mm, %ag.1, %f)
}

%done_body (g0: f32[8,16], f: u32[]) -> f32[64,16] {
  %g0 = f32[8,16]{1,0} parameter(0)
  %f = u32[] parameter(1)
  ROOT """ + gather("ag.2", *done) + """
}

ENTRY %main (shard: f32[8,16], a: f32[16,16], flags: u32[]) -> (f32[64,16], f32[16,16]) {
  %shard = f32[8,16]{1,0} parameter(0)
  %a = f32[16,16]{1,0} parameter(1)
  %flags = u32[] parameter(2)
  %start = (f32[8,16]{1,0}, f32[64,16]{1,0}, u32[]) fusion(%shard), kind=kCustom, calls=%start_body
  %s0 = f32[8,16]{1,0} get-tuple-element(%start), index=0
  %s2 = u32[] get-tuple-element(%start), index=2
  %cont = (f32[16,16]{1,0}, f32[64,16]{1,0}, u32[]) fusion(""" + cont_reads + """, %a), kind=kCustom, calls=%cont_body
  %c2 = u32[] get-tuple-element(%cont), index=2
  %mm.out = f32[16,16]{1,0} get-tuple-element(%cont), index=0
  %done = f32[64,16]{1,0} fusion(""" + done_reads + """), kind=kCustom, calls=%done_body
  ROOT %out = (f32[64,16]{1,0}, f32[16,16]{1,0}) tuple(%done, %mm.out)
}
"""


def chains(text: str):
    return collective_chains(parse_module(text))


def test_three_fusions_linked_by_channel_and_dataflow_are_one_chain():
    [chain] = chains(chain_module())
    # The head's collective is the one counted; the members' copies are pieces of it.
    assert (chain.computation, chain.head, chain.collective) == ("main", "start", "ag.0")
    assert (chain.members, chain.done) == (("cont", "done"), "done")
    assert chain.pieces == ("ag.1", "ag.2") and chain.carried == ()


def test_fusions_whose_collectives_are_on_other_channels_are_not_one_chain():
    # The continuation's gather is on channel 8: it reads the start's tuple but runs another
    # collective, so it is no part of the start's chain; `done` (channel 7) still is.
    [chain] = chains(chain_module(cont=("2", "8")))
    assert (chain.head, chain.members, chain.done, chain.pieces) == (
        "start", ("done",), "done", ("ag.2",))


def test_a_fusion_that_reads_nothing_of_the_chain_is_not_part_of_it():
    # The continuation takes the entry's own shard and flags, not the start's outputs: on the
    # same channel and flagged, but no dataflow links it. `done` reads the start's flags.
    [chain] = chains(chain_module(cont_reads="%shard, %flags", done_reads="%s0, %s2"))
    assert (chain.head, chain.members, chain.pieces) == ("start", ("done",), ("ag.2",))


def test_the_done_is_the_last_fusion_on_the_chains_path():
    # `done` gathers on channel 8: the chain is start -> cont, and cont is its done.
    [chain] = chains(chain_module(done=("2", "8")))
    assert (chain.head, chain.members, chain.done) == ("start", ("cont",), "cont")


def test_a_collective_without_a_channel_id_starts_no_chain():
    assert chains(chain_module(start=("-1", None), cont=("2", None), done=("2", None))) == ()


def test_a_copy_without_synchronisation_flags_is_a_collective_of_its_own():
    # The continuation's gather has flag_start -1, so it is a head (a collective) of its own.
    # `done` then reads two heads on its channel (the start's shard, cont's flags) and joins
    # neither: no chain has a member, so there is none.
    assert chains(chain_module(cont=("-1", "7"))) == ()


@pytest.mark.parametrize("config, expected", [
    ('{"async_collective_fusion_config":{"flag_start":"2"}}', True),
    ('{"async_collective_fusion_config":{"flag_start":"0"}}', True),
    ('{"async_collective_fusion_config":{"flag_start":"-1"}}', False),
    ('{"flag_configs":[]}', False),
    ("not json", False),
])
def test_a_collective_is_flagged_when_its_flag_start_is_not_negative(config, expected):
    text = """HloModule m, num_partitions=8

ENTRY %main (g0: f32[8,16]) -> f32[64,16] {
  %g0 = f32[8,16]{1,0} parameter(0)
  ROOT %ag = f32[64,16]{1,0} all-gather(%g0), channel_id=1, replica_groups=[1,8]<=[8], dimensions={0}, backend_config=""" + config + """
}
"""
    assert flagged(parse_module(text).by_name()["ag"]) is expected
