# ruff: noqa: E501  (HLO instruction lines are long)
"""The predicted step trace: lane rules on hand-written scheduled modules, with times worked out
here from the formulas and datasheet numbers, and the bounds on compiled programs.

Numbers (h100-8, one NVLink node of 8 GPUs): bf16 peak 989e12 FLOP/s dense and HBM 3.35e12
bytes/s (nvidia.com/en-us/data-center/h100); NVLink 450e9 bytes/s each way per GPU (scaling
book, gpus chapter: "18 * 25=450GB/s of full-duplex bandwidth"); 0.6 us per ring step (NCCL
src/graph/tuning.cc, hwLat NVLINK Ring LL). Ring all-gather of V bytes over n GPUs:
V·(n-1)/(n·W); all-reduce twice that (nccl-tests PERFORMANCE.md). A dot's FLOPs are
2·M·N·K, one multiply and one add per term.
"""

import importlib.util
import json

import pytest

from explorer import TensorSpec, analyze, analyze_workload
from explorer._src.cli import main
from explorer._src.compile.gpu import gpu_plugin_installed
from explorer._src.cost.estimate import estimate
from explorer._src.hlo.module import parse_module
from explorer._src.hlo.schedule import StepKind, read_schedule, schedule_work, trip_count
from explorer._src.report.build import read_collectives
from explorer._src.report.trace import TraceLane, step_trace
from explorer._src.spec.mesh import parse_mesh

PEAK = 989e12      # FLOP/s, H100 SXM bf16 dense
HBM = 3.35e12      # bytes/s
NVLINK = 450e9     # bytes/s one way
MiB = 2**20

_NO_LIBTPU = pytest.mark.skipif(importlib.util.find_spec("libtpu") is None,
                                  reason="libtpu (the tpu extra) is not installed")


def needs_libtpu(test):
    """A test that compiles for a TPU topology: marked `tpu`, skipped without libtpu."""
    return pytest.mark.tpu(_NO_LIBTPU(test))

ADD = """%add (x: bf16[], y: bf16[]) -> bf16[] {
  %x = bf16[] parameter(0)
  %y = bf16[] parameter(1)
  ROOT %s = bf16[] add(%x, %y)
}
"""

# An async all-gather (16 MiB gathered) whose start and done bracket an independent dot; a dot
# on the gathered array; a synchronous all-reduce of its 4 MiB result; an elementwise fusion.
OVERLAP = """HloModule jit_step, is_scheduled=true, num_partitions=8

FileNames
1 "/home/u/model.py"

FunctionNames
1 "step"

FileLocations
1 {file_name_id=1 function_name_id=1 line=7 end_line=7 column=1 end_column=9}

StackFrames
1 {file_location_id=1 parent_frame_id=1}

""" + ADD + """
%scale (p: bf16[2048,1024]) -> bf16[2048,1024] {
  %p = bf16[2048,1024]{1,0} parameter(0)
  ROOT %n = bf16[2048,1024]{1,0} negate(%p)
}

ENTRY %main (shard: bf16[256,4096], a: bf16[1024,2048], b: bf16[2048,1024], w: bf16[4096,1024]) -> bf16[2048,1024] {
  %shard = bf16[256,4096]{1,0} parameter(0)
  %a = bf16[1024,2048]{1,0} parameter(1)
  %b = bf16[2048,1024]{1,0} parameter(2)
  %w = bf16[4096,1024]{1,0} parameter(3)
  %ags = (bf16[256,4096]{1,0}, bf16[2048,4096]{1,0}) all-gather-start(%shard), channel_id=1, replica_groups=[1,8]<=[8], dimensions={0}, use_global_device_ids=true, metadata={op_name="jit(step)/all_gather" stack_frame_id=1}
  %dot.1 = bf16[1024,1024]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(step)/dot_general" stack_frame_id=1}
  %agd = bf16[2048,4096]{1,0} all-gather-done(%ags)
  %dot.2 = bf16[2048,1024]{1,0} dot(%agd, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %ar = bf16[2048,1024]{1,0} all-reduce(%dot.2), channel_id=2, replica_groups=[1,8]<=[8], use_global_device_ids=true, to_apply=%add
  %bc = bf16[2048,1024]{1,0} bitcast(%ar)
  ROOT %neg = bf16[2048,1024]{1,0} fusion(%bc), kind=kLoop, calls=%scale
}
"""

AG = 16 * MiB * 7 / (8 * NVLINK)          # 32.6 us: over 7 steps x 0.6 us, bandwidth-bound
AR = 2 * 4 * MiB * 7 / (8 * NVLINK)       # 16.3 us: over 14 x 0.6 us, bandwidth-bound
DOT1 = 2 * 1024 * 1024 * 2048 / PEAK      # 4.34 us; its 10.5 MB of HBM take only 3.1 us
DOT2 = 2 * 2048 * 1024 * 4096 / PEAK      # 17.4 us; its 29.4 MB take 8.8 us
NEG = 2 * 4 * MiB / HBM                   # 2.5 us: reads and writes 4 MiB, no FLOPs


def predict(hlo: str, mesh: str = "data=8", target: str = "h100-8"):
    m = parse_mesh(mesh)
    collectives = read_collectives(parse_module(hlo), m)
    schedule = read_schedule(hlo)
    # The hand times above are at the peak FLOP/s and nominal NVLink and HBM rates.
    est = estimate(collectives, None, None, None, "bfloat16", m.names, m.sizes, target,
                   work=schedule_work(schedule), peak=True)
    return est, step_trace(schedule, collectives, est)


def by_hlo(trace):
    return {e.hlo: e for e in trace.events}


def test_async_collective_overlaps_the_compute_between_start_and_done():
    est, trace = predict(OVERLAP)
    assert AG > 7 * 0.6e-6 and AR > 14 * 0.6e-6 and DOT1 > 10.5e6 / HBM
    ev = by_hlo(trace)
    ag, d1, d2, ar, neg = ev["ags"], ev["dot.1"], ev["dot.2"], ev["ar"], ev["neg"]
    assert [e.lane for e in (ag, d1, d2, ar, neg)] == [TraceLane.COMMUNICATION, TraceLane.COMPUTE,
                                                      TraceLane.COMPUTE, TraceLane.COMMUNICATION,
                                                      TraceLane.COMPUTE]
    # The gather starts with the step and the independent dot runs under it.
    assert ag.start == 0 and ag.duration == pytest.approx(AG)
    assert d1.start == 0 and d1.duration == pytest.approx(DOT1)
    # The done waits for the gather; the dot that reads it starts then.
    assert d2.start == pytest.approx(AG) and d2.duration == pytest.approx(DOT2)
    # The synchronous all-reduce waits for its operand and blocks compute until it ends.
    assert ar.start == pytest.approx(AG + DOT2) and ar.duration == pytest.approx(AR)
    assert neg.start == pytest.approx(AG + DOT2 + AR) and neg.duration == pytest.approx(NEG)
    assert trace.seconds == pytest.approx(AG + DOT2 + AR + NEG)
    # Free instructions (parameters, the bitcast, the done) are not on the timeline.
    assert set(ev) == {"ags", "dot.1", "dot.2", "ar", "neg"}
    # The estimate's bounds bracket it: all of dot.1 is hidden, nothing else is.
    assert est.compute.seconds == pytest.approx(DOT1 + DOT2 + NEG)
    assert est.comm_seconds == pytest.approx(AG + AR)
    assert est.step_lower_seconds == pytest.approx(AG + AR)
    assert est.step_upper_seconds - trace.seconds == pytest.approx(DOT1)
    # Collective events say what they move; compute events where they come from.
    assert ag.name == "all-gather over data" and ar.name == "all-reduce over data"
    assert ag.args["kind"] == "all-gather" and ag.args["axes"] == ["data"]
    assert ag.args["bytes"] == 16 * MiB and ag.args["async"] is True
    assert ar.args["async"] is False and ar.args["bytes"] == 4 * MiB
    assert d1.name == "dot_general" and d1.source == "/home/u/model.py:7"
    assert d1.args["flops"] == 2 * 1024 * 1024 * 2048


def test_a_collective_that_is_not_async_blocks_compute():
    # The same program with the gather synchronous: nothing overlaps, the step is the sum.
    sync = OVERLAP.replace(
        "%ags = (bf16[256,4096]{1,0}, bf16[2048,4096]{1,0}) all-gather-start(%shard)",
        "%ags = bf16[2048,4096]{1,0} all-gather(%shard)").replace(
        "%agd = bf16[2048,4096]{1,0} all-gather-done(%ags)\n", "").replace(
        "dot(%agd, %w)", "dot(%ags, %w)")
    est, trace = predict(sync)
    ev = by_hlo(trace)
    assert ev["ags"].start == 0
    assert ev["dot.1"].start == pytest.approx(AG)
    assert ev["dot.2"].start == pytest.approx(AG + DOT1)
    assert trace.seconds == pytest.approx(AG + DOT1 + DOT2 + AR + NEG)
    assert trace.seconds == pytest.approx(est.step_upper_seconds)


def with_op_name(hlo: str, line: str, op_name: str) -> str:
    """`hlo` with `op_name` metadata added to the instruction written as `line`."""
    assert line in hlo
    return hlo.replace(line, f'{line}, metadata={{op_name="{op_name}"}}')


def test_code_in_a_fused_kernel_scope_is_timed_without_its_memory_traffic():
    # The final negate fusion reads and writes 4 MiB and has no FLOPs: NEG = 2.5 us on HBM.
    # Marked as code of a fused kernel (jax.named_scope("fused_kernel"), here in the backward
    # pass's op_name form), its traffic stays on chip: it takes no time, the step loses NEG.
    fused = with_op_name(OVERLAP, "ROOT %neg = bf16[2048,1024]{1,0} fusion(%bc), kind=kLoop, "
                         "calls=%scale", "jit(step)/transpose(jvp(fused_kernel))/neg")
    est, trace = predict(OVERLAP)
    est_f, trace_f = predict(fused)
    assert trace.seconds - trace_f.seconds == pytest.approx(NEG)
    assert est.compute.seconds - est_f.compute.seconds == pytest.approx(NEG)
    work = schedule_work(read_schedule(fused))
    assert work.fused_kernel_runs == 1
    assert any("1 instruction run(s) in a 'fused_kernel' named scope" in n for n in est_f.notes)
    # A scope whose name only contains the word is not the fused kernel's.
    other = fused.replace("jvp(fused_kernel)", "jvp(my_fused_kernels)")
    assert schedule_work(read_schedule(other)).fused_kernel_runs == 0


def test_a_causal_fused_kernel_does_half_the_flops():
    # dot.2 marked as code of a causal kernel (jax.named_scope("fused_kernel_causal")): its
    # 2·2048·1024·4096 FLOPs count half (the blocks above the diagonal are skipped) and its
    # memory traffic none, so it takes DOT2 / 2 and the step loses the other half.
    causal = with_op_name(OVERLAP, "%dot.2 = bf16[2048,1024]{1,0} dot(%agd, %w), "
                          "lhs_contracting_dims={1}, rhs_contracting_dims={0}",
                          "jit(step)/fused_kernel_causal/dot_general")
    est, trace = predict(causal)
    [step] = [s for s in read_schedule(causal).steps if s.instr.name == "dot.2"]
    assert step.flops == 2048 * 1024 * 4096 and step.bytes == 0 and step.causal_kernel
    assert by_hlo(trace)["dot.2"].duration == pytest.approx(DOT2 / 2)
    assert trace.seconds == pytest.approx(AG + DOT2 / 2 + AR + NEG)
    work = schedule_work(read_schedule(causal))
    assert work.fused_kernel_runs == 1 and work.causal_kernel_runs == 1
    assert any("1 of them in a 'fused_kernel_causal' scope count half" in n for n in est.notes)


# An async-start wrapping an all-reduce, overlapping a fusion whose body holds the dot (FLOPs
# read through calls=), then a second wrapped all-reduce started while the first is in flight.
WRAPPED = """HloModule jit_wrapped, is_scheduled=true, num_partitions=8

""" + ADD + """
%wrapped_all_reduce (p: bf16[2048,1024]) -> bf16[2048,1024] {
  %p = bf16[2048,1024]{1,0} parameter(0)
  ROOT %ar.in = bf16[2048,1024]{1,0} all-reduce(%p), channel_id=1, replica_groups=[1,8]<=[8], use_global_device_ids=true, to_apply=%add
}

%wrapped_all_reduce.2 (p.2: bf16[2048,1024]) -> bf16[2048,1024] {
  %p.2 = bf16[2048,1024]{1,0} parameter(0)
  ROOT %ar.in2 = bf16[2048,1024]{1,0} all-reduce(%p.2), channel_id=2, replica_groups=[1,8]<=[8], use_global_device_ids=true, to_apply=%add
}

%fused_dot (l: bf16[1024,2048], r: bf16[2048,1024]) -> bf16[1024,1024] {
  %l = bf16[1024,2048]{1,0} parameter(0)
  %r = bf16[2048,1024]{1,0} parameter(1)
  %d = bf16[1024,1024]{1,0} dot(%l, %r), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %t = bf16[1024,1024]{1,0} tanh(%d)
}

ENTRY %main (g: bf16[2048,1024], a: bf16[1024,2048], b: bf16[2048,1024]) -> bf16[1024,1024] {
  %g = bf16[2048,1024]{1,0} parameter(0)
  %a = bf16[1024,2048]{1,0} parameter(1)
  %b = bf16[2048,1024]{1,0} parameter(2)
  %s1 = ((bf16[2048,1024]{1,0}), bf16[2048,1024]{1,0}) async-start(%g), calls=%wrapped_all_reduce
  %s2 = ((bf16[2048,1024]{1,0}), bf16[2048,1024]{1,0}) async-start(%b), calls=%wrapped_all_reduce.2
  %f = bf16[1024,1024]{1,0} fusion(%a, %b), kind=kOutput, calls=%fused_dot
  %d1 = bf16[2048,1024]{1,0} async-done(%s1)
  %d2 = bf16[2048,1024]{1,0} async-done(%s2)
  ROOT %out = bf16[1024,1024]{1,0} add(%f, %f)
}
"""


def test_wrapped_async_collectives_queue_on_the_link_and_overlap_a_fusion():
    est, trace = predict(WRAPPED)
    ev = by_hlo(trace)
    # Two 4 MiB all-reduces, one after the other on the communication lane.
    assert ev["ar.in"].start == 0 and ev["ar.in"].duration == pytest.approx(AR)
    assert ev["ar.in2"].start == pytest.approx(AR) and ev["ar.in2"].duration == \
        pytest.approx(AR)
    # The fusion's dot is counted from its body: 4.3 us of FLOPs against 6 MB of HBM traffic.
    assert ev["f"].start == 0 and ev["f"].duration == pytest.approx(DOT1)
    # `out` waits for both dones, then reads 2 MiB twice and writes 2 MiB.
    assert ev["out"].start == pytest.approx(2 * AR)
    assert ev["out"].duration == pytest.approx(3 * 2 * MiB / HBM)
    assert trace.seconds == pytest.approx(2 * AR + 3 * 2 * MiB / HBM)
    assert est.step_lower_seconds <= trace.seconds <= est.step_upper_seconds


# A while with a dot and a synchronous all-reduce in its body; the trip count comes from the
# backend config, or from the condition `i < 5` with i from 0 by 1.
LOOP = """HloModule jit_loop, is_scheduled=true, num_partitions=8

""" + ADD + """
%cond (cp: (s32[], bf16[1024,1024])) -> pred[] {
  %cp = (s32[], bf16[1024,1024]{1,0}) parameter(0)
  %ci = s32[] get-tuple-element(%cp), index=0
  %limit = s32[] constant(5)
  ROOT %lt = pred[] compare(%ci, %limit), direction=LT
}

%body (bp: (s32[], bf16[1024,1024])) -> (s32[], bf16[1024,1024]) {
  %bp = (s32[], bf16[1024,1024]{1,0}) parameter(0)
  %bi = s32[] get-tuple-element(%bp), index=0
  %one = s32[] constant(1)
  %next = s32[] add(%bi, %one)
  %h = bf16[1024,1024]{1,0} get-tuple-element(%bp), index=1
  %mm = bf16[1024,1024]{1,0} dot(%h, %h), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %sum = bf16[1024,1024]{1,0} all-reduce(%mm), channel_id=1, replica_groups=[1,8]<=[8], use_global_device_ids=true, to_apply=%add
  ROOT %bt = (s32[], bf16[1024,1024]{1,0}) tuple(%next, %sum)
}

ENTRY %main (x: bf16[1024,1024]) -> bf16[1024,1024] {
  %x = bf16[1024,1024]{1,0} parameter(0)
  %zero = s32[] constant(0)
  %init = (s32[], bf16[1024,1024]{1,0}) tuple(%zero, %x)
  %loop = (s32[], bf16[1024,1024]{1,0}) while(%init), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"3"}}
  ROOT %y = bf16[1024,1024]{1,0} get-tuple-element(%loop), index=1
}
"""

MM = 2 * 1024**3 / PEAK                  # 2.17 us; its 6 MiB of HBM take 1.9 us
INC = 3 * 4 / HBM                        # i + 1: reads two s32, writes one
SUM = 2 * 2 * MiB * 7 / (8 * NVLINK)     # 8.16 us, under the 14 x 0.6 = 8.4 us latency floor
SUM_FLOOR = 14 * 0.6e-6


def test_a_loop_runs_its_body_trip_count_times():
    est, trace = predict(LOOP)
    assert SUM < SUM_FLOOR
    mms = [e for e in trace.events if e.hlo == "mm"]
    sums = [e for e in trace.events if e.hlo == "sum"]
    assert [e.args["iteration"] for e in mms] == [0, 1, 2]
    assert {e.args["loop"] for e in sums} == {"loop"}
    for k, (mm, s) in enumerate(zip(mms, sums, strict=True)):
        assert mm.start == pytest.approx(k * (INC + MM + SUM_FLOOR) + INC, abs=1e-15)
        assert s.start == pytest.approx(k * (INC + MM + SUM_FLOOR) + INC + MM, abs=1e-15)
        assert s.duration == pytest.approx(SUM_FLOOR)
    assert trace.seconds == pytest.approx(3 * (INC + MM + SUM_FLOOR))
    # The estimate counts the loop's all-reduce three times too.
    [t] = est.collectives
    assert t.runs == 3 and est.comm_seconds == pytest.approx(3 * SUM_FLOOR)
    assert est.step_upper_seconds == pytest.approx(trace.seconds)


def test_trip_count_from_the_condition_or_counted_once():
    no_config = LOOP.replace(', backend_config={"known_trip_count":{"n":"3"}}', "")
    module = parse_module(no_config)
    assert trip_count(module, module.by_name()["loop"]) == 5      # 0, 1, 2, 3, 4
    est, trace = predict(no_config)
    assert len([e for e in trace.events if e.hlo == "mm"]) == 5
    # A condition it cannot read: the body runs once, and both the trace and estimate say so.
    unknown = no_config.replace("compare(%ci, %limit), direction=LT",
                                "compare(%ci, %ci), direction=LT")
    [step] = [s for s in read_schedule(unknown).steps if s.kind is StepKind.LOOP]
    assert step.trips is None
    est, trace = predict(unknown)
    assert len([e for e in trace.events if e.hlo == "mm"]) == 1
    assert any("'loop'" in n and "counted once" in n for n in trace.notes)
    assert any("'loop'" in n and "counted once" in n for n in est.notes)


def test_chrome_trace_json_has_the_event_keys(tmp_path):
    _, trace = predict(OVERLAP)
    doc = json.loads(json.dumps(trace.to_chrome()))
    events = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(events) == 5
    for e in events:
        assert {"name", "ph", "ts", "dur", "pid", "tid", "args"} <= set(e)
    ag = next(e for e in events if e["args"]["hlo"] == "ags")
    assert ag["ts"] == 0 and ag["dur"] == pytest.approx(AG * 1e6)      # microseconds
    assert ag["args"]["kind"] == "all-gather" and ag["args"]["axes"] == ["data"]
    assert ag["args"]["bytes"] == 16 * MiB
    lanes = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M"
             and e["name"] == "thread_name"}
    assert lanes[ag["tid"]] == "communication"


# ---------------------------------------------------------------------------------------------
# Compiled programs.

def within(est, seconds):
    assert est.step_lower_seconds * (1 - 1e-9) <= seconds <= est.step_upper_seconds * (1 + 1e-9)


@pytest.mark.slow
def test_a_users_own_causal_kernel_scope_counts_half_its_flops():
    # A user's attention, defined here and traced in this process, with its
    # core in jax.named_scope("fused_kernel_causal"). Per device (batch split over data=2):
    # the forward does q·kᵀ and p·v, 2·b·h·s²·d FLOPs each; the backward twice the forward.
    import jax
    import jax.numpy as jnp

    b, s, h, d = 4, 64, 2, 32

    def step(q, k, v, scoped):
        def core(q, k, v):
            scores = jnp.einsum("bshk,bthk->bhst", q, k)
            mask = jnp.tril(jnp.ones((s, s), bool))
            p = jax.nn.softmax(jnp.where(mask, scores, -1e9), axis=-1)
            return jnp.einsum("bhst,bthk->bshk", p, v)

        def loss(q, k, v):
            if scoped:
                with jax.named_scope("fused_kernel_causal"):
                    return jnp.sum(core(q, k, v) ** 2)
            return jnp.sum(core(q, k, v) ** 2)
        return jax.grad(loss, argnums=(0, 1, 2))(q, k, v)

    args = [TensorSpec(n, (b, s, h, d), "float32", ("data", None, None, None)) for n in "qkv"]
    flops = {}
    for scoped in (False, True):
        r = analyze(lambda q, k, v, scoped=scoped: step(q, k, v, scoped), *args, mesh="data=2",
                    target="h100-2")
        work = schedule_work(read_schedule(r.optimized_hlo))
        flops[scoped] = sum(f * n for f, _, n in work.compute)
        if scoped:
            assert work.causal_kernel_runs > 0
            assert any("'fused_kernel_causal' scope count half" in n for n in r.estimate.notes)
    core = 3 * 4 * (b // 2) * h * s * s * d
    assert flops[False] - flops[True] == pytest.approx(0.5 * core)


@pytest.mark.slow
@pytest.mark.parametrize("compile_for", ["cpu", pytest.param("target", marks=[
    pytest.mark.gpu, pytest.mark.skipif(not gpu_plugin_installed(),
                                        reason="the gpu extra is not installed")])])
def test_compiled_training_step_trace_lies_within_the_bounds(tmp_path, compile_for):
    r = analyze_workload("mlp_train", "data=2,model=4", preset="fsdp_tp", target="h100-8",
                         compile_for=compile_for)
    est, trace = r.estimate, r.trace
    assert est.step_trace_seconds == trace.seconds
    within(est, trace.seconds)
    # Every collective of the report is on the timeline once, with its own predicted time.
    comm = [e for e in trace.events if e.lane == TraceLane.COMMUNICATION]
    assert sorted(e.hlo for e in comm) == sorted(c.hlo_name for c in r.collectives)
    for e in comm:
        [c] = [c for c in r.collectives if c.hlo_name == e.hlo]
        assert e.duration == pytest.approx(c.est_seconds)
    assert trace.lane_seconds(TraceLane.COMPUTE) == pytest.approx(est.compute.seconds)
    # The FLOPs read from the dots' dims agree with XLA's own cost analysis of the program
    # (which XLA's GPU compiler does not give without a GPU).
    if r.backend == "cpu":
        assert sum(e.args["flops"] for e in trace.events if e.lane == TraceLane.COMPUTE) == \
            pytest.approx(r.cost.flops, rel=0.02)
    else:
        assert r.backend == "gpu" and all(c.is_async for c in r.collectives)
    d = json.loads(json.dumps(r.to_dict()))
    assert d["cost"]["estimate"]["step_trace_seconds"] == pytest.approx(trace.seconds)


@pytest.mark.slow
def test_cli_writes_the_trace(tmp_path, capsys):
    out = tmp_path / "step.json"
    assert main(["analyze", "--workload", "mlp", "--mesh", "data=2,model=4", "--spec",
                 "x=data,None", "--spec", "w1=None,model", "--spec", "w2=model,None",
                 "--target", "h100-8", "--trace", str(out)]) == 0
    doc = json.loads(out.read_text())
    [ar] = [e for e in doc["traceEvents"] if e.get("args", {}).get("kind") == "all-reduce"]
    assert ar["args"]["axes"] == ["model"] and ar["ph"] == "X"
    assert "trace    " in capsys.readouterr().out
    assert main(["analyze", "--workload", "mlp", "--mesh", "data=8", "--trace",
                 str(out)]) == 2
    assert "needs --target" in capsys.readouterr().err


def scan_layers(x, ws):
    """Six tanh layers under lax.scan, the hidden dimension split over `model`."""
    import jax
    import jax.numpy as jnp

    def layer(h, w):
        return jnp.tanh(h @ w), None

    return jax.lax.scan(layer, x, ws)[0]


@pytest.mark.slow
def test_scan_loop_collectives_count_once_per_layer():
    r = analyze(scan_layers, TensorSpec("x", (256, 512), spec="data,model"),
                TensorSpec("ws", (6, 512, 512), spec="None,model,None"),
                mesh="data=2,model=4", target="tpu-v5e-2x4")
    est, trace = r.estimate, r.trace
    # The per-layer reduction of h @ w over `model` runs once per layer: six times.
    looped = [t for t in est.collectives if t.runs == 6]
    assert looped and all(t.axes == ("model",) for t in looped)
    events = [e for e in trace.events if e.lane == TraceLane.COMMUNICATION
              and e.args.get("loop") is not None]
    assert sorted({e.args["iteration"] for e in events}) == list(range(6))
    assert est.comm_seconds == pytest.approx(sum(t.runs * t.seconds for t in est.collectives))
    within(est, trace.seconds)
    # float32 on a TPU: predicted at the bf16 peak, and said.
    assert est.compute.peak_dtype == "bfloat16"
    assert any("no float32 matmul peak" in n for n in est.notes)


@pytest.mark.slow
@needs_libtpu
def test_tpu_compile_overlaps_collectives_inside_the_bounds():
    r = analyze_workload("transformer_train", "data=2,model=4", preset="fsdp_tp",
                         tpu_topology="v5e:2x4", target="tpu-v5e-2x4")
    est, trace = r.estimate, r.trace
    within(est, trace.seconds)
    # The TPU compiler fuses some gathers with independent matmuls: some compute runs under
    # communication, so the step is shorter than the no-overlap bound.
    assert trace.seconds < est.step_upper_seconds * (1 - 1e-6)


@pytest.mark.slow     # a 4-layer v5e:4x4 compile; tests/hlo/test_chains.py has the rules
@needs_libtpu
def test_tpu_chains_are_the_compilers_own_start_and_done_pairs():
    # libtpu names the first and last fusions of a collective it splits over several
    # `async-collective-start.N` and `async-collective-done.N`; the chains read from dataflow and
    # channel ids must be exactly those pairs, and the collective list must hold each once.
    from explorer._src.hlo.chains import collective_chains
    params = {"d_model": 1024, "d_ff": 4096, "heads": 8, "d_head": 128, "layers": 4, "seq": 512,
              "batch": 32, "compute_dtype": "bfloat16", "remat": "full"}
    # The pool's 120 s default was passed once at a load of 38 (a CI dry run beside other
    # jobs); the limit is for a hung compile, not a slow one.
    r = analyze_workload("transformer_train", "data=16", preset="fsdp", params=params,
                         tpu_topology="v5e:4x4", target="tpu-v5e-4x4", timeout=600)
    module = parse_module(r.optimized_hlo)
    starts = {i.name for i in module.instructions() if i.name.startswith("async-collective-start")}
    chains = {c.head: c for c in collective_chains(module)}
    assert starts and set(chains) >= starts
    for head in starts:
        assert chains[head].done == head.replace("-start", "-done")
    listed = {c.hlo_name for c in r.collectives}
    for chain in chains.values():
        assert chain.collective in listed and not listed & set(chain.pieces)
        assert next(c for c in r.collectives if c.hlo_name == chain.collective).is_async
    comm = [e.hlo for e in r.trace.events if e.lane == TraceLane.COMMUNICATION]
    assert not set(comm) & {p for c in chains.values() for p in c.pieces}
    within(r.estimate, r.trace.seconds)


def test_no_trace_without_a_peak():
    r = analyze_workload("mlp", "data=8", target="cpu")
    assert r.estimate is not None and r.trace is None
    assert r.estimate.step_trace_seconds is None


# ---------------------------------------------------------------------------------------------
# The schedule reader's counts, on fusions as the TPU compiler prints them.

FUSIONS = """HloModule jit_tpu, is_scheduled=true, num_partitions=8

""" + ADD + """
%conv_body (l: f32[128,1024], r: bf16[1024,512]) -> f32[128,512] {
  %l = f32[128,1024]{1,0} parameter(0)
  %r = bf16[1024,512]{1,0} parameter(1)
  ROOT %c = f32[128,512]{1,0} convolution(%l, %r), dim_labels=bf_io->bf
}

%conv3_body (x3: f32[4,32,64], k3: bf16[64,256,1]) -> f32[4,32,256] {
  %x3 = f32[4,32,64]{2,1,0} parameter(0)
  %k3 = bf16[64,256,1]{2,1,0} parameter(1)
  ROOT %c3 = f32[4,32,256]{2,1,0} convolution(%x3, %k3), window={size=1}, dim_labels=0bf_io0->0bf
}

%slice_body (stack: f32[6,128,512], i: s32[]) -> f32[1,128,512] {
  %stack = f32[6,128,512]{2,1,0} parameter(0)
  %i = s32[] parameter(1)
  %z = s32[] constant(0)
  ROOT %one = f32[1,128,512]{2,1,0} dynamic-slice(%stack, %i, %z, %z), dynamic_slice_sizes={1,128,512}
}

%reduce_then_slice (in: f32[256,512]) -> f32[128,512] {
  %in = f32[256,512]{1,0} parameter(0)
  %ar.rs = f32[256,512]{1,0} all-reduce(%in), channel_id=1, replica_groups=[4,2]<=[8], use_global_device_ids=true, to_apply=%add
  %z2 = s32[] constant(0)
  ROOT %half = f32[128,512]{1,0} dynamic-slice(%ar.rs, %z2, %z2), dynamic_slice_sizes={128,512}
}

%gather_beside_matmul (g: f32[64,512], m: f32[128,1024], n: bf16[1024,512]) -> (f32[128,512], f32[128,512]) {
  %g = f32[64,512]{1,0} parameter(0)
  %m = f32[128,1024]{1,0} parameter(1)
  %n = bf16[1024,512]{1,0} parameter(2)
  %ag.in = f32[128,512]{1,0} all-gather(%g), channel_id=2, replica_groups=[4,2]<=[8], dimensions={0}, use_global_device_ids=true
  %mm.in = f32[128,512]{1,0} convolution(%m, %n), dim_labels=bf_io->bf
  ROOT %pair = (f32[128,512]{1,0}, f32[128,512]{1,0}) tuple(%ag.in, %mm.in)
}

ENTRY %main (l: f32[128,1024], r: bf16[1024,512], x3: f32[4,32,64], k3: bf16[64,256,1], stack: f32[6,128,512], i: s32[], in: f32[256,512], g: f32[64,512]) -> f32[128,512] {
  %pl = f32[128,1024]{1,0} parameter(0)
  %pr = bf16[1024,512]{1,0} parameter(1)
  %px = f32[4,32,64]{2,1,0} parameter(2)
  %pk = bf16[64,256,1]{2,1,0} parameter(3)
  %ps = f32[6,128,512]{2,1,0} parameter(4)
  %pi = s32[] parameter(5)
  %pin = f32[256,512]{1,0} parameter(6)
  %pg = f32[64,512]{1,0} parameter(7)
  %conv = f32[128,512]{1,0} fusion(%pl, %pr), kind=kOutput, calls=%conv_body
  %conv3 = f32[4,32,256]{2,1,0} fusion(%px, %pk), kind=kOutput, calls=%conv3_body
  %layer = f32[1,128,512]{2,1,0} fusion(%ps, %pi), kind=kLoop, calls=%slice_body
  %rs = f32[128,512]{1,0} fusion(%pin), kind=kCustom, calls=%reduce_then_slice
  %both = (f32[128,512]{1,0}, f32[128,512]{1,0}) fusion(%pg, %pl, %pr), kind=kOutput, calls=%gather_beside_matmul
  ROOT %out = f32[128,512]{1,0} get-tuple-element(%both), index=1
}
"""


def test_fusion_counts_convolutions_slices_and_collectives_in_place():
    steps = {s.instr.name: s for s in read_schedule(FUSIONS).steps}
    # A matmul as the TPU prints it: kernel [in=1024, out=512], so 2·128·512·1024 FLOPs.
    assert steps["conv"].flops == 2 * 128 * 512 * 1024
    assert steps["conv"].bytes == 128 * 1024 * 4 + 1024 * 512 * 2 + 128 * 512 * 4
    # 0bf_io0->0bf: M = 4·32 rows, K = 64 inputs, N = 256 outputs, a window of 1.
    assert steps["conv3"].flops == 2 * (4 * 32) * 256 * 64
    # A loop body's slice of a stacked weight reads one layer of the stack, not all six.
    assert steps["layer"].bytes == 128 * 512 * 4 + 4 + 128 * 512 * 4
    # A collective fused with arithmetic that needs its result: a collective, math after it.
    assert steps["rs"].kind is StepKind.COLLECTIVE and steps["rs"].collectives == ("ar.rs",)
    assert not steps["rs"].overlaps
    # A gather fused with an independent matmul: the matmul runs alongside it.
    assert steps["both"].kind is StepKind.COLLECTIVE and steps["both"].collectives == ("ag.in",)
    assert steps["both"].overlaps and steps["both"].flops == 2 * 128 * 512 * 1024


def test_fused_collective_math_runs_after_or_beside_it():
    est, trace = predict(FUSIONS, mesh="data=4,model=2", target="h100-8")
    ev = by_hlo(trace)
    math = [e for e in trace.events if e.lane == TraceLane.COMPUTE]
    # `rs`: the slice starts when the all-reduce ends; `both`: the matmul starts with the gather.
    rs_math = next(e for e in math if e.hlo == "rs")
    both_math = next(e for e in math if e.hlo == "both")
    assert rs_math.start == pytest.approx(ev["ar.rs"].end)
    assert both_math.start == pytest.approx(ev["ag.in"].start)
    within(est, trace.seconds)


# The TPU compiler's background collectives, written as it prints them. An async collective
# fusion: a 16 MiB all-gather with synchronisation flags (flag_start >= 0) fused with an
# independent matmul; the gathered half of its tuple is read two instructions later. The gather
# writes into a buffer passed in (p4), which the body never reads.
BACKGROUND = """HloModule jit_tpu, is_scheduled=true, num_partitions=8

%acf_body (p0: bf16[256,4096], p1: bf16[1024,2048], p2: bf16[2048,1024], p3: u32[], p4: bf16[2048,4096]) -> (bf16[1024,1024], bf16[2048,4096]) {
  %p4 = bf16[2048,4096]{1,0} parameter(4)
  %p0 = bf16[256,4096]{1,0} parameter(0)
  %p1 = bf16[1024,2048]{1,0} parameter(1)
  %p2 = bf16[2048,1024]{1,0} parameter(2)
  %p3 = u32[] parameter(3)
  %mm = bf16[1024,1024]{1,0} dot(%p1, %p2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %ag.in = bf16[2048,4096]{1,0} all-gather(%p0), channel_id=1, replica_groups=[1,8]<=[8], dimensions={0}, use_global_device_ids=true, backend_config={"flag_configs":[],"async_collective_fusion_config":{"flag_start":"3","flag_end":"3"}}
  ROOT %t = (bf16[1024,1024]{1,0}, bf16[2048,4096]{1,0}) tuple(%mm, %ag.in)
}

ENTRY %main (shard: bf16[256,4096], a: bf16[1024,2048], b: bf16[2048,1024], c: bf16[1024,1024], w: bf16[4096,1024], f: u32[], buf: bf16[2048,4096]) -> bf16[2048,1024] {
  %shard = bf16[256,4096]{1,0} parameter(0)
  %a = bf16[1024,2048]{1,0} parameter(1)
  %b = bf16[2048,1024]{1,0} parameter(2)
  %c = bf16[1024,1024]{1,0} parameter(3)
  %w = bf16[4096,1024]{1,0} parameter(4)
  %f = u32[] parameter(5)
  %buf = bf16[2048,4096]{1,0} parameter(6)
  %acf = (bf16[1024,1024]{1,0}, bf16[2048,4096]{1,0}) fusion(%shard, %a, %b, %f, %buf), kind=kOutput, calls=%acf_body, output_to_operand_aliasing={{1}: (4, {})}
  %first = bf16[1024,1024]{1,0} get-tuple-element(%acf), index=0
  %dot.3 = bf16[1024,1024]{1,0} dot(%first, %c), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %gathered = bf16[2048,4096]{1,0} get-tuple-element(%acf), index=1
  ROOT %dot.2 = bf16[2048,1024]{1,0} dot(%gathered, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""

DOT3 = 2 * 1024**3 / PEAK                 # 2.17 us; its 6 MiB of HBM take 1.9 us


def test_async_collective_fusion_runs_on_until_its_result_is_read():
    est, trace = predict(BACKGROUND)
    ev = by_hlo(trace)
    math = {e.hlo: e for e in trace.events if e.lane == TraceLane.COMPUTE}
    # The gather starts with the step; the fusion's own matmul and the next dot run under it.
    assert ev["ag.in"].start == 0 and ev["ag.in"].duration == pytest.approx(AG)
    assert ev["ag.in"].args["async"] is True
    # Its memory traffic is the matmul's (a, b and the 2 MiB product: 3.1 us, under DOT1); the
    # gather's shard, its 16 MiB result and the buffer it writes into move over the links, and
    # the flag (p3) is never read.
    assert math["acf"].args["bytes"] == 4 * MiB + 4 * MiB + 2 * MiB
    assert math["acf"].start == 0 and math["acf"].duration == pytest.approx(DOT1)
    assert math["dot.3"].start == pytest.approx(DOT1)
    # The dot that reads the gathered half waits for the gather.
    assert AG > DOT1 + DOT3
    assert math["dot.2"].start == pytest.approx(AG)
    assert trace.seconds == pytest.approx(AG + DOT2)
    within(est, trace.seconds)
    # Without flags (flag_start -1) the fusion is synchronous: the next dot waits for the gather.
    sync = BACKGROUND.replace('"flag_start":"3"', '"flag_start":"-1"')
    steps = {s.instr.name: s for s in read_schedule(sync).steps}
    assert steps["acf"].kind is StepKind.COLLECTIVE
    _, trace = predict(sync)
    math = {e.hlo: e for e in trace.events if e.lane == TraceLane.COMPUTE}
    assert math["acf"].start == 0 and math["dot.3"].start == pytest.approx(AG)
    assert trace.seconds == pytest.approx(AG + DOT3 + DOT2)


# A windowed einsum loop (the SPMD partitioner's collective matmul) runs two steps: each sends
# 16 MiB to the next device while a matmul on the chunk at hand runs, then reads what arrived.
WINDOWED = """HloModule jit_tpu, is_scheduled=true, num_partitions=8

%cond (cs: (bf16[2048,4096], bf16[1024,2048], bf16[2048,1024])) -> pred[] {
  %cs = (bf16[2048,4096]{1,0}, bf16[1024,2048]{1,0}, bf16[2048,1024]{1,0}) parameter(0)
  ROOT %go = pred[] constant(true)
}

%windowed_dot_general_body_ag.1 (s: (bf16[2048,4096], bf16[1024,2048], bf16[2048,1024])) -> (bf16[2048,4096], bf16[1024,2048], bf16[2048,1024]) {
  %s = (bf16[2048,4096]{1,0}, bf16[1024,2048]{1,0}, bf16[2048,1024]{1,0}) parameter(0)
  %x = bf16[2048,4096]{1,0} get-tuple-element(%s), index=0
  %a = bf16[1024,2048]{1,0} get-tuple-element(%s), index=1
  %b = bf16[2048,1024]{1,0} get-tuple-element(%s), index=2
  %cp = bf16[2048,4096]{1,0} collective-permute(%x), channel_id=3, source_target_pairs={{0,1},{1,2},{2,3},{3,4},{4,5},{5,6},{6,7},{7,0}}
  %mm = bf16[1024,1024]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %next = bf16[2048,4096]{1,0} negate(%cp)
  ROOT %out = (bf16[2048,4096]{1,0}, bf16[1024,2048]{1,0}, bf16[2048,1024]{1,0}) tuple(%next, %a, %b)
}

ENTRY %main (x: bf16[2048,4096], a: bf16[1024,2048], b: bf16[2048,1024]) -> bf16[2048,4096] {
  %x = bf16[2048,4096]{1,0} parameter(0)
  %a = bf16[1024,2048]{1,0} parameter(1)
  %b = bf16[2048,1024]{1,0} parameter(2)
  %init = (bf16[2048,4096]{1,0}, bf16[1024,2048]{1,0}, bf16[2048,1024]{1,0}) tuple(%x, %a, %b)
  %loop = (bf16[2048,4096]{1,0}, bf16[1024,2048]{1,0}, bf16[2048,1024]{1,0}) while(%init), condition=%cond, body=%windowed_dot_general_body_ag.1, backend_config={"known_trip_count":{"n":"2"}}
  ROOT %y = bf16[2048,4096]{1,0} get-tuple-element(%loop), index=0
}
"""

CP = 16 * MiB / NVLINK                    # 37.3 us: each device sends 16 MiB over one link
NEXT = 2 * 16 * MiB / HBM                 # 10 us: reads and writes 16 MiB


def test_windowed_einsum_permute_overlaps_the_matmul_beside_it():
    est, trace = predict(WINDOWED)
    cps = [e for e in trace.events if e.hlo == "cp"]
    mms = [e for e in trace.events if e.hlo == "mm"]
    nexts = [e for e in trace.events if e.hlo == "next"]
    assert [e.duration for e in cps] == pytest.approx([CP, CP])
    for k in range(2):
        begin = k * (CP + NEXT)
        # The permute and the matmul start together; the negate reads what arrived.
        assert cps[k].start == pytest.approx(begin) and mms[k].start == pytest.approx(begin)
        assert nexts[k].start == pytest.approx(begin + CP)
    assert trace.seconds == pytest.approx(2 * (CP + NEXT))
    within(est, trace.seconds)
    # The same loop under any other name is no collective matmul: the permute blocks.
    plain = WINDOWED.replace("windowed_dot_general_body_ag.1", "body")
    _, trace = predict(plain)
    assert trace.seconds == pytest.approx(2 * (CP + DOT1 + NEXT))


# A TPU collective run across a chain of fusions, written as the TPU compiler prints one: `start`
# begins a 16 MiB all-gather (channel 7, no flags); `cont` reads its tuple, runs a matmul of its
# own and holds a flagged copy of the same all-gather; `cont.remat` is a rematerialised clone of
# it; `done` waits on the flags and returns the gathered array, which dot.2 reads.
def _gather(name: str, flag: str) -> str:
    return (f"%{name} = bf16[2048,4096]{{1,0}} all-gather(%g0), channel_id=7, "
            "replica_groups=[1,8]<=[8], dimensions={0}, use_global_device_ids=true, "
            f'backend_config={{"flag_configs":[],"async_collective_fusion_config":{{"flag_start":"{flag}"}}}}')


# The chain's first fusion starts the gather at the top of the entry.
_STARTED = """  %shard = bf16[256,4096]{1,0} parameter(0)
  %a = bf16[1024,2048]{1,0} parameter(1)
  %b = bf16[2048,1024]{1,0} parameter(2)
  %w = bf16[4096,1024]{1,0} parameter(3)
  %start = (bf16[256,4096]{1,0}, bf16[2048,4096]{1,0}, u32[]) fusion(%shard), kind=kCustom, calls=%start_body
  %s0 = bf16[256,4096]{1,0} get-tuple-element(%start), index=0
  %s2 = u32[] get-tuple-element(%start), index=2
"""

CHAIN = """HloModule jit_tpu, is_scheduled=true, num_partitions=8

%start_body (g0: bf16[256,4096]) -> (bf16[256,4096], bf16[2048,4096], u32[]) {
  %g0 = bf16[256,4096]{1,0} parameter(0)
  """ + _gather("ag.0", "-1") + """
  ROOT %t = (bf16[256,4096]{1,0}, bf16[2048,4096]{1,0}, u32[]) custom-call(%ag.0), custom_call_target="AsyncCollectiveFusionStart"
}

%cont_body (g0: bf16[256,4096], f: u32[], p1: bf16[1024,2048], p2: bf16[2048,1024]) -> (bf16[1024,1024], bf16[2048,4096], u32[]) {
  %g0 = bf16[256,4096]{1,0} parameter(0)
  %f = u32[] parameter(1)
  %p1 = bf16[1024,2048]{1,0} parameter(2)
  %p2 = bf16[2048,1024]{1,0} parameter(3)
  """ + _gather("ag.1", "2") + """
  %mm = bf16[1024,1024]{1,0} dot(%p1, %p2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %t = (bf16[1024,1024]{1,0}, bf16[2048,4096]{1,0}, u32[]) tuple(%mm, %ag.1, %f)
}

%done_body (g0: bf16[256,4096], f: u32[]) -> bf16[2048,4096] {
  %g0 = bf16[256,4096]{1,0} parameter(0)
  %f = u32[] parameter(1)
  ROOT """ + _gather("ag.2", "2") + """
}

ENTRY %main (shard: bf16[256,4096], a: bf16[1024,2048], b: bf16[2048,1024], w: bf16[4096,1024]) -> (bf16[2048,1024], bf16[1024,1024]) {
""" + _STARTED + """  %cont = (bf16[1024,1024]{1,0}, bf16[2048,4096]{1,0}, u32[]) fusion(%s0, %s2, %a, %b), kind=kCustom, calls=%cont_body, backend_config={"continuation_config":{}}
  %cont.remat = (bf16[1024,1024]{1,0}, bf16[2048,4096]{1,0}, u32[]) fusion(%s0, %s2, %a, %b), kind=kCustom, calls=%cont_body, backend_config={"continuation_config":{}}
  %c2 = u32[] get-tuple-element(%cont), index=2
  %done = bf16[2048,4096]{1,0} fusion(%s0, %c2), kind=kCustom, calls=%done_body
  %dot.2 = bf16[2048,1024]{1,0} dot(%done, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %mm.r = bf16[1024,1024]{1,0} get-tuple-element(%cont.remat), index=0
  ROOT %out = (bf16[2048,1024]{1,0}, bf16[1024,1024]{1,0}) tuple(%dot.2, %mm.r)
}
"""


def test_a_collective_run_across_a_chain_of_fusions_counts_once_and_runs_in_the_background():
    from explorer._src.hlo.chains import collective_chains

    [chain] = collective_chains(parse_module(CHAIN))
    assert (chain.head, chain.collective, chain.done) == ("start", "ag.0", "done")
    assert set(chain.members) == {"cont", "cont.remat", "done"}
    assert set(chain.pieces) == {"ag.1", "ag.2"}
    # One all-gather, asynchronous: the three copies are one collective.
    [ag] = read_collectives(parse_module(CHAIN), parse_mesh("data=8"))
    assert (ag.hlo_name, ag.is_async, ag.bytes) == ("ag.0", True, 16 * MiB)
    est, trace = predict(CHAIN)
    comm = [e for e in trace.events if e.lane == TraceLane.COMMUNICATION]
    assert [(e.hlo, e.start) for e in comm] == [("ag.0", 0)]
    assert comm[0].duration == pytest.approx(AG)
    # The continuation's matmul and its clone's run while the gather is in flight; dot.2 reads
    # what `done` returns and waits for the gather.
    math = {e.hlo: e for e in trace.events if e.lane == TraceLane.COMPUTE}
    assert math["cont"].start == 0 and math["cont.remat"].start == pytest.approx(DOT1)
    assert 2 * DOT1 < AG
    assert math["dot.2"].start == pytest.approx(AG)
    assert trace.seconds == pytest.approx(AG + DOT2)
    within(est, trace.seconds)


# The same chain carried through a loop: the loop's state holds the start's flags, and each
# trip of its body runs a flagged copy of the gather beside a matmul; `done` follows the loop.
LOOP_CHAIN = CHAIN.split("ENTRY")[0] + """
%lcond (cs: (bf16[256,4096], u32[], bf16[1024,2048], bf16[2048,1024])) -> pred[] {
  %cs = (bf16[256,4096]{1,0}, u32[], bf16[1024,2048]{1,0}, bf16[2048,1024]{1,0}) parameter(0)
  ROOT %go = pred[] constant(true)
}

%lbody (ls: (bf16[256,4096], u32[], bf16[1024,2048], bf16[2048,1024])) -> (bf16[256,4096], u32[], bf16[1024,2048], bf16[2048,1024]) {
  %ls = (bf16[256,4096]{1,0}, u32[], bf16[1024,2048]{1,0}, bf16[2048,1024]{1,0}) parameter(0)
  %l0 = bf16[256,4096]{1,0} get-tuple-element(%ls), index=0
  %l1 = u32[] get-tuple-element(%ls), index=1
  %l2 = bf16[1024,2048]{1,0} get-tuple-element(%ls), index=2
  %l3 = bf16[2048,1024]{1,0} get-tuple-element(%ls), index=3
  %step = (bf16[1024,1024]{1,0}, bf16[2048,4096]{1,0}, u32[]) fusion(%l0, %l1, %l2, %l3), kind=kCustom, calls=%cont_body, backend_config={"continuation_config":{}}
  %f = u32[] get-tuple-element(%step), index=2
  ROOT %next = (bf16[256,4096]{1,0}, u32[], bf16[1024,2048]{1,0}, bf16[2048,1024]{1,0}) tuple(%l0, %f, %l2, %l3)
}

ENTRY %main (shard: bf16[256,4096], a: bf16[1024,2048], b: bf16[2048,1024], w: bf16[4096,1024]) -> bf16[2048,1024] {
""" + _STARTED + """  %init = (bf16[256,4096]{1,0}, u32[], bf16[1024,2048]{1,0}, bf16[2048,1024]{1,0}) tuple(%s0, %s2, %a, %b)
  %loop = (bf16[256,4096]{1,0}, u32[], bf16[1024,2048]{1,0}, bf16[2048,1024]{1,0}) while(%init), condition=%lcond, body=%lbody, backend_config={"known_trip_count":{"n":"3"}}
  %f = u32[] get-tuple-element(%loop), index=1
  %done = bf16[2048,4096]{1,0} fusion(%s0, %f), kind=kCustom, calls=%done_body
  ROOT %dot.2 = bf16[2048,1024]{1,0} dot(%done, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def test_a_chain_carried_through_a_loop_counts_once():
    from explorer._src.hlo.chains import collective_chains

    [chain] = collective_chains(parse_module(LOOP_CHAIN))
    assert (chain.head, chain.members, chain.done, chain.carried) == (
        "start", ("loop", "done"), "done", ("step",))
    [ag] = read_collectives(parse_module(LOOP_CHAIN), parse_mesh("data=8"))
    assert ag.hlo_name == "ag.0"
    est, trace = predict(LOOP_CHAIN)
    assert [e.hlo for e in trace.events if e.lane == TraceLane.COMMUNICATION] == ["ag.0"]
    # Three trips of the body's matmul run under the gather; dot.2 waits for it.
    steps = [e for e in trace.events if e.hlo == "step"]
    assert [e.start for e in steps] == pytest.approx([0, DOT1, 2 * DOT1])
    assert 3 * DOT1 < AG
    assert trace.seconds == pytest.approx(AG + DOT2)
    within(est, trace.seconds)


def _ring_pairs(step: int) -> str:
    """source_target_pairs of a permute round the model rings of data=16,model=4 (device
    data·4 + model): each device sends to model + step, mod 4."""
    return ",".join(f"{{{4 * d + m},{4 * d + (m + step) % 4}}}" for d in range(16) for m in range(4))


# Two async permutes of 16 MiB round the same rings, one each way, and a dot while they run.
BOTH_WAYS = """HloModule jit_tpu, is_scheduled=true, num_partitions=64

ENTRY %main (x: bf16[2048,4096], y: bf16[2048,4096], a: bf16[1024,2048], b: bf16[2048,1024]) -> bf16[2048,4096] {
  %x = bf16[2048,4096]{1,0} parameter(0)
  %y = bf16[2048,4096]{1,0} parameter(1)
  %a = bf16[1024,2048]{1,0} parameter(2)
  %b = bf16[2048,1024]{1,0} parameter(3)
  %fwd = (bf16[2048,4096]{1,0}, bf16[2048,4096]{1,0}) collective-permute-start(%x), channel_id=1, source_target_pairs={""" + _ring_pairs(1) + """}
  %bwd = (bf16[2048,4096]{1,0}, bf16[2048,4096]{1,0}) collective-permute-start(%y), channel_id=2, source_target_pairs={""" + _ring_pairs(-1) + """}
  %mm = bf16[1024,1024]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %fwd.done = bf16[2048,4096]{1,0} collective-permute-done(%fwd)
  %bwd.done = bf16[2048,4096]{1,0} collective-permute-done(%bwd)
  ROOT %sum = bf16[2048,4096]{1,0} add(%fwd.done, %bwd.done)
}
"""

ICI_V4 = 4.5e10                           # bytes/s one way per link (scaling book, tpus)
V4_PEAK, V4_HBM = 275e12, 1200e9          # bf16 FLOP/s and bytes/s (cloud.google.com/tpu/docs/v4)


def test_opposite_permutes_share_a_torus_ring_but_not_a_switch():
    # On TPU v4 (model on the z rings of a 4x4x4 cube, closed by wraparound) each permute sends
    # 16 MiB over one link one way: 373 us. The two go opposite ways on separate wires, so
    # they run side by side, with the dot (2·1024·1024·2048 FLOPs, 15.6 us) under them.
    cp = 16 * MiB / ICI_V4
    add = 3 * 16 * MiB / V4_HBM
    est, trace = predict(BOTH_WAYS, mesh="data=16,model=4", target="tpu-v4-4x4x4")
    ev = by_hlo(trace)
    assert [c.one_way for c in est.collectives] == ["+", "-"]
    assert ev["fwd"].start == 0 and ev["bwd"].start == 0
    assert ev["fwd"].duration == pytest.approx(cp) and ev["bwd"].duration == pytest.approx(cp)
    assert ev["mm"].start == 0 and ev["mm"].duration == pytest.approx(2 * 1024**2 * 2048 / V4_PEAK)
    assert ev["sum"].start == pytest.approx(cp)
    assert trace.seconds == pytest.approx(cp + add)
    # The bounds count the two directions apart: full overlap is one permute's time.
    assert est.comm_seconds == pytest.approx(2 * cp)
    assert est.step_lower_seconds == pytest.approx(cp)
    within(est, trace.seconds)
    # The reverse permute has a row of its own, in the app and in the Chrome trace.
    assert ev["bwd"].row == "comm., reverse ring" and ev["fwd"].row == "communication"
    chrome = trace.to_chrome()
    tid = {e["args"]["hlo"]: e["tid"] for e in chrome["traceEvents"] if e["ph"] == "X"}
    assert tid["fwd"] != tid["bwd"] and tid["fwd"] != tid["mm"]
    for t in set(tid.values()):      # complete events on one thread may not overlap
        spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in chrome["traceEvents"]
                       if e["ph"] == "X" and e["tid"] == t)
        assert all(b[0] >= a[1] - 1e-9 for a, b in zip(spans, spans[1:], strict=False))
    # Behind a switch (8 H100s on NVLink: one egress port per GPU) they take turns.
    mesh8 = "data=2,model=4"
    pairs8 = lambda k: ",".join(f"{{{4 * d + m},{4 * d + (m + k) % 4}}}" for d in range(2) for m in range(4))  # noqa: E731
    switched = BOTH_WAYS.replace(_ring_pairs(1), pairs8(1)).replace(_ring_pairs(-1), pairs8(-1)) \
        .replace("num_partitions=64", "num_partitions=8")
    est, trace = predict(switched, mesh=mesh8, target="h100-8")
    ev = by_hlo(trace)
    assert [c.one_way for c in est.collectives] == ["", ""]
    assert ev["bwd"].start == pytest.approx(ev["fwd"].end)
    assert est.step_lower_seconds == pytest.approx(est.comm_seconds)
    within(est, trace.seconds)
