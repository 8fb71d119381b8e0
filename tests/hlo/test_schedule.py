# ruff: noqa: E501 (an HLO line is kept verbatim)
"""The schedule reader on small modules: what kind of step each instruction is, the FLOPs and
bytes counted by hand, asynchronous start/done pairs, and loop trip counts read from XLA's
backend config or from the loop's condition.

Modules marked "captured" are excerpts of `explorer.analyze(...).optimized_hlo` on jax 0.10.2's
CPU backend (stack frames dropped); the others are written by hand in the same text form."""

from explorer._src.hlo.arithmetic import dot_flops
from explorer._src.hlo.module import parse_module
from explorer._src.hlo.schedule import StepKind, read_schedule, schedule_work, trip_count

# Captured: `x @ w` with x f32[64,16] replicated and w f32[16,64] split on its rows over
# data=8. Each device gathers w (2 rows each) and runs the whole matmul in one fusion.
GATHER_THEN_MATMUL = """HloModule jit_ag, is_scheduled=true, entry_computation_layout={(f32[64,16]{1,0}, f32[2,64]{1,0})->f32[64,64]{1,0}}, num_partitions=8

%fused_computation (param_0: f32[64,16], param_1: f32[16,64]) -> f32[64,64] {
  %param_0 = f32[64,16]{1,0} parameter(0)
  %param_1 = f32[16,64]{1,0} parameter(1)
  ROOT %dot.1 = f32[64,64]{1,0} dot(%param_0, %param_1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(ag)/dot_general"}
}

ENTRY %main.0_spmd (param: f32[64,16], param.1: f32[2,64]) -> f32[64,64] {
  %param = f32[64,16]{1,0} parameter(0), sharding={replicated}, metadata={op_name="x"}
  %param.1 = f32[2,64]{1,0} parameter(1), sharding={devices=[8,1]<=[8]}, metadata={op_name="w"}
  %all-gather = f32[16,64]{1,0} all-gather(%param.1), channel_id=1, replica_groups=mesh['axis_0'=8,'axis_1'=1] {'axis_0'}, dimensions={0}, use_global_device_ids=true, metadata={op_name="jit(ag)/dot_general"}
  ROOT %ynn_fusion = f32[64,64]{1,0} fusion(%param, %all-gather), kind=kCustom, calls=%fused_computation, metadata={op_name="jit(ag)/dot_general"}, backend_config={"fusion_config":{"kind":"__ynn_fusion"},"outer_dimension_partitions":[]}
}
"""


def kinds(schedule):
    return [(s.instr.name, s.kind) for s in schedule.steps]


def test_a_captured_module_reads_as_free_parameters_a_collective_and_a_matmul_fusion():
    schedule = read_schedule(GATHER_THEN_MATMUL)
    assert schedule.scheduled
    assert kinds(schedule) == [("param", StepKind.FREE), ("param.1", StepKind.FREE),
                               ("all-gather", StepKind.COLLECTIVE),
                               ("ynn_fusion", StepKind.COMPUTE)]
    gather, fusion = schedule.steps[2], schedule.steps[3]
    # A collective's time is its formula's: no FLOPs or bytes of its own, and it names itself.
    assert (gather.flops, gather.bytes, gather.collectives) == (0.0, 0.0, ("all-gather",))
    # The fusion's dot: 2·m·n·k = 2·64·64·16 = 131072 FLOPs.
    assert fusion.flops == 2 * 64 * 64 * 16 == 131072
    # Bytes: x 64·16·4 = 4096 and the gathered w 16·64·4 = 4096 read, 64·64·4 = 16384 written.
    assert fusion.bytes == 4096 + 4096 + 16384


def test_a_module_without_is_scheduled_is_read_but_said_to_be_unscheduled():
    text = GATHER_THEN_MATMUL.replace("is_scheduled=true, ", "")
    assert not read_schedule(text).scheduled


BATCHED_DOT = """HloModule jit_bmm, is_scheduled=true, num_partitions=1

ENTRY %main (a: f32[4,8,32], b: f32[4,32,16]) -> f32[4,8,16] {
  %a = f32[4,8,32]{2,1,0} parameter(0)
  %b = f32[4,32,16]{2,1,0} parameter(1)
  ROOT %d = f32[4,8,16]{2,1,0} dot(%a, %b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
}
"""


def test_a_batched_dot_counts_two_flops_per_term_of_every_batch():
    module = parse_module(BATCHED_DOT)
    names = module.by_name()
    # 2 · batch · m · n · k = 2 · 4 · 8 · 16 · 32 = 32768: the result's dims times the
    # contracted one; the batch dim is in the result once, not contracted.
    assert dot_flops(names["d"], names) == 2 * 4 * 8 * 16 * 32 == 32768
    [step] = [s for s in read_schedule(BATCHED_DOT).steps if s.instr.name == "d"]
    # Bytes: a 4·8·32·4 = 4096, b 4·32·16·4 = 8192, result 4·8·16·4 = 2048.
    assert (step.kind, step.flops, step.bytes) == (StepKind.COMPUTE, 32768, 4096 + 8192 + 2048)


ADD = """%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(%x, %y)
}
"""

# Three asynchronous forms: an all-gather-start/-done pair; an all-reduce wrapped in
# async-start/async-update/async-done (how XLA prints an async op without its own opcodes);
# and a copy-start/-done, a DMA beside compute.
ASYNC = """HloModule jit_async, is_scheduled=true, num_partitions=8

""" + ADD + """
%wrapped_all_reduce (w: f32[256]) -> f32[256] {
  %w = f32[256]{0} parameter(0)
  ROOT %ar = f32[256]{0} all-reduce(%w), channel_id=2, replica_groups=[1,8]<=[8], use_global_device_ids=true, to_apply=%add
}

ENTRY %main (shard: f32[32,64], g: f32[256], a: f32[16,64], c: f32[128]) -> (f32[256,64], f32[256], f32[16,16], f32[128]) {
  %shard = f32[32,64]{1,0} parameter(0)
  %g = f32[256]{0} parameter(1)
  %a = f32[16,64]{1,0} parameter(2)
  %c = f32[128]{0} parameter(3)
  %ags = (f32[32,64]{1,0}, f32[256,64]{1,0}) all-gather-start(%shard), channel_id=1, replica_groups=[1,8]<=[8], dimensions={0}, use_global_device_ids=true
  %ars = ((f32[256]{0}), f32[256]{0}) async-start(%g), calls=%wrapped_all_reduce
  %cps = (f32[128]{0}, f32[128]{0}, u32[]) copy-start(%c)
  %mm = f32[16,16]{1,0} dot(%a, %a), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  %aru = ((f32[256]{0}), f32[256]{0}) async-update(%ars)
  %agd = f32[256,64]{1,0} all-gather-done(%ags)
  %ard = f32[256]{0} async-done(%aru)
  %cpd = f32[128]{0} copy-done(%cps)
  ROOT %out = (f32[256,64]{1,0}, f32[256]{0}, f32[16,16]{1,0}, f32[128]{0}) tuple(%agd, %ard, %mm, %cpd)
}
"""


def test_async_starts_and_dones_pair_up_and_a_copy_is_free():
    steps = {s.instr.name: s for s in read_schedule(ASYNC).steps}
    assert steps["ags"].kind is StepKind.COLLECTIVE_START
    assert steps["ags"].collectives == ("ags",)
    # The wrapped start runs the all-reduce of its called computation, named as the collective.
    assert steps["ars"].kind is StepKind.COLLECTIVE_START
    assert steps["ars"].collectives == ("ar",)
    # Each done names its start; the async-done finds it through the async-update.
    assert (steps["agd"].kind, steps["agd"].start) == (StepKind.COLLECTIVE_DONE, "ags")
    assert (steps["ard"].kind, steps["ard"].start) == (StepKind.COLLECTIVE_DONE, "ars")
    assert steps["aru"].kind is StepKind.FREE
    # A DMA costs the compute lane nothing, at its start and at its done.
    assert steps["cps"].kind is StepKind.FREE and steps["cpd"].kind is StepKind.FREE
    # The dot between them: 2·16·16·64 = 32768 FLOPs.
    assert (steps["mm"].kind, steps["mm"].flops) == (StepKind.COMPUTE, 32768)


# Captured: `lax.scan` of `tanh(c @ c)` over 3 steps, c f32[16,16] (entry and loop computations;
# the condition's compare sits in a fusion, the body's increment too).
SCAN = """HloModule jit_loop, is_scheduled=true, entry_computation_layout={(f32[16,16]{1,0})->f32[16,16]{1,0}}, num_partitions=8

%fused_computation (param_0: f32[16,16]) -> f32[16,16] {
  %param_0 = f32[16,16]{1,0} parameter(0)
  ROOT %dot.1 = f32[16,16]{1,0} dot(%param_0, %param_0), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(loop)/while/body/closed_call/dot_general"}
}

%wrapped_add_computation (param_0.1: s32[], param_1: s32[]) -> s32[] {
  %param_0.1 = s32[] parameter(0)
  %param_1 = s32[] parameter(1)
  ROOT %add.3 = s32[] add(%param_0.1, %param_1), metadata={op_name="jit(loop)/while/body/add"}
}

%wrapped_tanh_computation (param_0.2: f32[16,16]) -> f32[16,16] {
  %param_0.2 = f32[16,16]{1,0} parameter(0)
  ROOT %tanh.4 = f32[16,16]{1,0} tanh(%param_0.2), metadata={op_name="jit(loop)/while/body/closed_call/tanh"}
}

%region_0.1_spmd (param: (s32[], f32[16,16])) -> (s32[], f32[16,16]) {
  %param = (s32[], f32[16,16]{1,0}) parameter(0)
  %constant.0.clone = s32[] constant(1)
  %get-tuple-element.15 = f32[16,16]{1,0} get-tuple-element(%param), index=1
  %get-tuple-element.14 = s32[] get-tuple-element(%param), index=0
  %ynn_fusion = f32[16,16]{1,0} fusion(%get-tuple-element.15), kind=kCustom, calls=%fused_computation, metadata={op_name="jit(loop)/while/body/closed_call/dot_general"}, backend_config={"fusion_config":{"kind":"__ynn_fusion"},"outer_dimension_partitions":[]}
  %wrapped_add = s32[] fusion(%get-tuple-element.14, %constant.0.clone), kind=kLoop, calls=%wrapped_add_computation, metadata={op_name="jit(loop)/while/body/add"}
  %wrapped_tanh = f32[16,16]{1,0} fusion(%ynn_fusion), kind=kLoop, calls=%wrapped_tanh_computation, metadata={op_name="jit(loop)/while/body/closed_call/tanh"}
  ROOT %tuple.6 = (s32[], f32[16,16]{1,0}) tuple(%wrapped_add, %wrapped_tanh)
}

%wrapped_compare_computation (param_0.3: s32[], param_1.1: s32[]) -> pred[] {
  %param_0.3 = s32[] parameter(0)
  %param_1.1 = s32[] parameter(1)
  ROOT %lt.3 = pred[] compare(%param_0.3, %param_1.1), direction=LT, metadata={op_name="jit(loop)/while/cond/lt"}
}

%region_1.2_spmd (param.1: (s32[], f32[16,16])) -> pred[] {
  %param.1 = (s32[], f32[16,16]{1,0}) parameter(0)
  %constant.1.clone = s32[] constant(3)
  %get-tuple-element.10 = s32[] get-tuple-element(%param.1), index=0
  ROOT %wrapped_compare = pred[] fusion(%get-tuple-element.10, %constant.1.clone), kind=kLoop, calls=%wrapped_compare_computation, metadata={op_name="jit(loop)/while/cond/lt"}
}

ENTRY %main.3_spmd (param.2: f32[16,16]) -> f32[16,16] {
  %constant.3.clone = s32[] constant(0)
  %param.2 = f32[16,16]{1,0} parameter(0), sharding={replicated}, metadata={op_name="x"}
  %copy.7 = s32[] copy(%constant.3.clone)
  %copy.8 = f32[16,16]{1,0} copy(%param.2)
  %tuple.4 = (s32[], f32[16,16]{1,0}) tuple(%copy.7, %copy.8)
  %while.8 = (s32[], f32[16,16]{1,0}) while(%tuple.4), condition=%region_1.2_spmd, body=%region_0.1_spmd, metadata={op_name="jit(loop)/while"}, backend_config={"dynamic_variables":[],"known_induction_variable":{"tuple_index":"0"},"known_init_step":{"init":"0","step":"1"},"known_trip_count":{"n":"3"}}
  ROOT %get-tuple-element.11 = f32[16,16]{1,0} get-tuple-element(%while.8), index=1, metadata={op_name="jit(loop)/while"}
}
"""

KNOWN_TRIPS = '"known_trip_count":{"n":"3"}'


def loop_of(text, name="while.8"):
    module = parse_module(text)
    return module, module.by_name()[name]


def test_a_scan_is_a_loop_step_with_xlas_known_trip_count_and_its_body_steps():
    [loop] = [s for s in read_schedule(SCAN).steps if s.kind is StepKind.LOOP]
    assert loop.trips == 3
    body = {s.instr.name: s for s in loop.body}
    # One matmul per trip: 2·16·16·16 = 8192 FLOPs; the tanh has none of its own.
    assert body["ynn_fusion"].flops == 2 * 16 * 16 * 16 == 8192
    assert body["wrapped_tanh"].flops == 0
    # Work sums over the trips: three matmuls, each run 3 times.
    work = schedule_work(read_schedule(SCAN))
    assert (8192.0, 16 * 16 * 4 * 2, 3) in work.compute
    assert work.uncounted_loops == ()


def test_a_trip_count_is_read_from_the_condition_when_xla_gives_only_the_start_and_step():
    # Without known_trip_count: the condition `i < 3` (its compare inside a fusion), from
    # known_init_step's init 0 by step 1: i = 0, 1, 2, so 3 trips.
    module, loop = loop_of(SCAN.replace(KNOWN_TRIPS, '"dynamic":{}'))
    assert trip_count(module, loop) == 3


def test_a_trip_count_needs_a_step_it_can_read():
    # Without known_init_step either, the start is the init tuple's constant (0, through a
    # copy), but the body's increment is a fusion, not `add(counter, constant)`: unreadable.
    text = SCAN.replace(KNOWN_TRIPS, '"dynamic":{}').replace(
        '"known_init_step":{"init":"0","step":"1"},', "")
    module, loop = loop_of(text)
    assert trip_count(module, loop) is None
    work = schedule_work(read_schedule(text))
    assert work.uncounted_loops == ("while.8",)


def countdown(compare: str, start: int = 10) -> str:
    """A loop whose counter starts at `start` and steps by -2 in its body, under the condition
    `compare` (the counter is %ci, the limit %limit, which is 0)."""
    return """HloModule jit_countdown, is_scheduled=true, num_partitions=1

%cond (cp: (s32[], f32[8])) -> pred[] {
  %cp = (s32[], f32[8]{0}) parameter(0)
  %ci = s32[] get-tuple-element(%cp), index=0
  %limit = s32[] constant(0)
  ROOT %go = pred[] """ + compare + """
}

%body (bp: (s32[], f32[8])) -> (s32[], f32[8]) {
  %bp = (s32[], f32[8]{0}) parameter(0)
  %bi = s32[] get-tuple-element(%bp), index=0
  %two = s32[] constant(2)
  %next = s32[] subtract(%bi, %two)
  %h = f32[8]{0} get-tuple-element(%bp), index=1
  ROOT %bt = (s32[], f32[8]{0}) tuple(%next, %h)
}

ENTRY %main (x: f32[8]) -> (s32[], f32[8]) {
  %x = f32[8]{0} parameter(0)
  %start = s32[] constant(""" + str(start) + """)
  %init = (s32[], f32[8]{0}) tuple(%start, %x)
  ROOT %loop = (s32[], f32[8]{0}) while(%init), condition=%cond, body=%body
}
"""


def test_a_counter_that_steps_down_runs_until_its_condition_fails():
    # i = 10, 8, 6, 4, 2 are > 0: 5 trips; with >= also i = 0: 6 trips.
    module, loop = loop_of(countdown("compare(%ci, %limit), direction=GT"), "loop")
    assert trip_count(module, loop) == 5
    module, loop = loop_of(countdown("compare(%ci, %limit), direction=GE"), "loop")
    assert trip_count(module, loop) == 6
    # An odd start: i = 9, 7, 5, 3, 1 are > 0 (the next, -1, is not): 5 trips.
    module, loop = loop_of(countdown("compare(%ci, %limit), direction=GT", start=9), "loop")
    assert trip_count(module, loop) == 5


def test_a_condition_with_the_limit_first_is_read_the_other_way_round():
    # `0 < i` is `i > 0`: the same 5 trips from 10 down by 2.
    module, loop = loop_of(countdown("compare(%limit, %ci), direction=LT"), "loop")
    assert trip_count(module, loop) == 5


def test_a_counter_stepping_away_from_its_limit_gets_no_trip_count():
    # From -4 down by 2 under `i < 0`: -4, -6, -8, ... never reach the limit, so no count.
    module, loop = loop_of(countdown("compare(%ci, %limit), direction=LT", start=-4), "loop")
    assert trip_count(module, loop) is None


# A call runs its computation in place; a dot in a `fused_kernel_causal` scope stands for a
# causal flash kernel: half the FLOPs, no memory traffic.
CALL_AND_KERNEL = """HloModule jit_call, is_scheduled=true, num_partitions=1

%inner (p: f32[32,64]) -> f32[32,32] {
  %p = f32[32,64]{1,0} parameter(0)
  ROOT %scores = f32[32,32]{1,0} dot(%p, %p), lhs_contracting_dims={1}, rhs_contracting_dims={1}, metadata={op_name="jit(f)/attn/fused_kernel_causal/dot_general"}
}

ENTRY %main (q: f32[32,64]) -> f32[32,32] {
  %q = f32[32,64]{1,0} parameter(0)
  ROOT %c = f32[32,32]{1,0} call(%q), to_apply=%inner
}
"""


def test_a_call_is_inlined_and_a_causal_kernel_does_half_its_flops_without_memory_traffic():
    steps = read_schedule(CALL_AND_KERNEL).steps
    assert [s.instr.name for s in steps] == ["q", "p", "scores"]
    scores = steps[-1]
    # The whole square would be 2·32·32·64 = 131072 FLOPs; the causal kernel does half.
    assert (scores.flops, scores.bytes) == (131072 / 2, 0.0)
    assert scores.fused_kernel and scores.causal_kernel
    work = schedule_work(read_schedule(CALL_AND_KERNEL))
    assert (work.fused_kernel_runs, work.causal_kernel_runs) == (1, 1)
