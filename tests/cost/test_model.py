"""The cost model against public worked examples, each with its source and the arithmetic.

BOOK = "How to Scale Your Model", Austin et al., https://jax-ml.github.io/scaling-book/
NCCL_TESTS = https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md
No jax here: the cost model is pure arithmetic over the catalog.
"""

import json
import typing
from enum import StrEnum
from types import SimpleNamespace

import pytest

import explorer
from explorer import TargetError
from explorer._src.compile.tpu import topology_chips
from explorer._src.cost import collectives
from explorer._src.cost.catalog.names import get_target, targets
from explorer._src.cost.catalog.tpu import tpu_generations
from explorer._src.cost.catalog.types import LinkKind, TargetFamily
from explorer._src.cost.collectives import CollectiveBound, collective_time
from explorer._src.cost.compute import Bound, compute_time
from explorer._src.cost.estimate import estimate
from explorer._src.cost.mapping import (
    AxisMapping,
    Tier,
    check_mapping,
    default_mapping,
    parse_mapping,
)
from explorer._src.cost.memory_fit import memory_fit
from explorer._src.errors import ExplorerError, MappingError
from explorer._src.hlo.collectives import CollectiveKind
from explorer._src.hlo.groups import RingDirection
from explorer._src.report.predict import estimate_report


def coll(kind, nbytes, *axes, group_size=None, groups=()):
    """A stand-in for Report's Collective: what the cost model reads of one
    (explorer._src.cost.estimate.PricedCollective), on no ring and every tier, run once."""
    return SimpleNamespace(kind=kind, axes=tuple(axes), program_bytes=nbytes,
                           group_size=group_size, groups=groups, direction="", tier="",
                           hlo_name="", runs=1)


def time_of(target, names, sizes, kind, nbytes, *axes, mapping=None):
    placed = (default_mapping(target, names, sizes) if mapping is None
              else check_mapping(target, names, sizes, mapping))
    return collective_time(kind, nbytes, axes, target, placed)


# ---------------------------------------------------------------------------------------------
# TPU ICI collectives: BOOK, "Sharded Matrices and How to Multiply Them"
# (https://jax-ml.github.io/scaling-book/sharding/).

def test_v5e_all_gather_with_and_without_wraparound():
    # BOOK sharding, Pop Quiz 2 [AllGather time]: AllGather_Y([E_Y, F]) on TPU v5e, mesh
    # {'X': 8, 'Y': 4}, E = 2048, F = 8192, bf16. V = 2048 * 8192 * 2 = 33.5e6 bytes.
    v = 2048 * 8192 * 2
    # "we have T_comms = 34e6 / 9e10 = 377us": the bidirectional formula, which needs a ring.
    # On a v5e only an axis of 16 wraps, so put Y on a full 16 ring of a 16x16 slice:
    # floor(16/2) hops * (V/16) / 4.5e10 = V / 9e10 = 372.8 us (the book rounds V to 34e6).
    ring = time_of("tpu-v5e-16x16", ("X", "Y"), (16, 16), "all-gather", v, "Y")
    assert ring.seconds == pytest.approx(v / 9e10)
    assert ring.seconds == pytest.approx(377e-6, rel=0.02)
    assert "wraparound" in ring.links and "no wraparound" not in ring.links
    # "TPU v5e only has a wraparound connection when one axis has size 16 ... T_comms =
    # 3 * 8.4e6 / 4.5e10 = 560us": on the real 32-chip slice (tpu-v5e-8x4), Y = 4, no ring:
    # (4 - 1) hops * (V/4) / 4.5e10 = 559 us.
    line = time_of("tpu-v5e-8x4", ("X", "Y"), (8, 4), "all-gather", v, "Y")
    assert line.seconds == pytest.approx(3 * (v / 4) / 4.5e10)
    assert line.seconds == pytest.approx(560e-6, rel=0.01)
    assert "no wraparound" in line.links
    # Part (2), E = F = 256: "each shard has size 64 * 256 * 2 = 32kB ... we're latency bound.
    # Since we have 3 hops, this will take roughly 3 * 1us = 3us."
    small = time_of("tpu-v5e-8x4", ("X", "Y"), (8, 4), "all-gather", 256 * 256 * 2, "Y")
    assert small.bound == "latency"
    assert small.seconds == pytest.approx(3e-6)


def test_v4_sharded_matmul_gathers():
    # BOOK sharding, "Some Problems to Work", Question 2 [AllGather latency]: TPU v4p 4x4x4,
    # Mesh({'X': 4, 'Y': 4, 'Z': 4}), B = 1024, D = 4096 in bf16, array [B_X, D_Y]. A 4x4x4 is
    # a whole cube, so every axis wraps; W_bidi = 9e10 bytes/s.
    names, sizes = ("X", "Y", "Z"), (4, 4, 4)
    mapping = "X=x,Y=y,Z=z"
    b, d = 1024, 4096
    # 1. AllGather_X: "2BD / (9e10 * Y) = 2 * 1024 * 4096 / (9e10 * 4) = 23 us".
    one = time_of("tpu-v4-4x4x4", names, sizes, "all-gather", 2 * b * d // 4, "X",
                  mapping=mapping)
    assert one.seconds == pytest.approx(2 * b * d / (9e10 * 4))
    assert one.seconds == pytest.approx(23e-6, rel=0.02)
    # 3. AllGather_XY: "max{4 T_min, 2BD / (2 W_ICI)} ... 2 * 1024 * 4096 / 1.8e11 seconds, or
    # 46 us, so we're throughput bound": two axes give twice the bandwidth.
    both = time_of("tpu-v4-4x4x4", names, sizes, "all-gather", 2 * b * d, "X", "Y",
                   mapping=mapping)
    assert both.seconds == pytest.approx(2 * b * d / 1.8e11)
    assert both.seconds == pytest.approx(46e-6, rel=0.02)
    assert both.bound == "bandwidth"
    # 4. AllGather_Z([B_X, D_Y] {U_Z}): "2 * 1024 * 4096 / (16 * 9e10) seconds, or 5.8 us".
    z = time_of("tpu-v4-4x4x4", names, sizes, "all-gather", 2 * b * d // 16, "Z",
                mapping=mapping)
    assert z.seconds == pytest.approx(5.8e-6, rel=0.01)
    # Question 3 [latency-bound AllGather]: AllGather_X([B_X]) with B = 128 in bf16 is 256
    # bytes: "we can do the full gather in only 2 hops, so roughly 2us".
    tiny = time_of("tpu-v4-4x4x4", names, sizes, "all-gather", 256, "X", mapping=mapping)
    assert tiny.bound == "latency"
    assert tiny.seconds == pytest.approx(2e-6)


def test_all_reduce_is_two_all_gathers_and_all_to_all_a_quarter():
    # BOOK sharding, "What Have We Learned?" table: AllReduce "2 * AllGather"; AllToAll
    # "AllGather / 4 for a bidirectional ring". The all-gather's V is the whole gathered array
    # (n shards); the all-to-all's V is one device's buffer, 1/n of that: n*V_dev / (4 W_bidi).
    names, sizes, v = ("a", "b"), (16, 16), 64 * 2**20
    ag = time_of("tpu-v5e-16x16", names, sizes, "all-gather", v, "b")
    ar = time_of("tpu-v5e-16x16", names, sizes, "all-reduce", v, "b")
    rs = time_of("tpu-v5e-16x16", names, sizes, "reduce-scatter", v, "b")
    a2a = time_of("tpu-v5e-16x16", names, sizes, "all-to-all", v // 16, "b")
    assert rs.seconds == pytest.approx(ag.seconds)
    assert ar.seconds == pytest.approx(2 * ag.seconds)
    assert a2a.seconds == pytest.approx(ag.seconds / 4)


def test_ici_latency_bound_below_45kb():
    # BOOK sharding, "A note on ICI latency": "TPU v5e with 4.5e10 unidirectional ICI bandwidth,
    # sending any buffer under 4.5e10 * 1e-6 = 45kB will be latency bound."
    names, sizes = ("a", "b"), (16, 16)
    under = time_of("tpu-v5e-16x16", names, sizes, "collective-permute", 40_000, "b")
    over = time_of("tpu-v5e-16x16", names, sizes, "collective-permute", 50_000, "b")
    assert under.bound == "latency" and under.seconds == pytest.approx(1e-6)
    assert over.bound == "bandwidth" and over.seconds == pytest.approx(50_000 / 4.5e10)


def test_multi_axis_is_faster_than_one_axis():
    # Same V over two torus axes instead of one: twice the links (BOOK sharding, "What happens
    # when we AllGather over multiple axes?").
    names, sizes, v = ("a", "b"), (16, 16), 2**26
    single = time_of("tpu-v5e-16x16", names, sizes, "all-gather", v, "b")
    double = time_of("tpu-v5e-16x16", names, sizes, "all-gather", v, "a", "b")
    assert double.seconds < single.seconds
    assert double.seconds == pytest.approx(single.seconds / 2)


def test_strided_axis_shares_links():
    # Two mesh axes on one physical axis of 16: the inner one takes neighbours, the outer one
    # steps over 4 chips, so its groups share each link 4 ways (our model; see cost-model.md).
    m = check_mapping("tpu-v5e-16x16", ("a", "b", "c"), (4, 4, 16), "a=x:4,b=x:4,c=y")
    assert [s.stride for s in m.segments("a")] == [4]
    assert [s.stride for s in m.segments("b")] == [1]
    inner = collective_time("all-gather", 2**24, ("b",), "tpu-v5e-16x16", m)
    outer = collective_time("all-gather", 2**24, ("a",), "tpu-v5e-16x16", m)
    # b: a line of 4 (no wraparound); a: a ring of 4 at stride 4 (it goes all the way round).
    assert inner.seconds == pytest.approx(3 * 2**24 / 4 / 4.5e10)
    assert outer.seconds == pytest.approx(2 * 2**24 / 4 / (4.5e10 / 4))


# ---------------------------------------------------------------------------------------------
# GPU collectives: BOOK, "How to Think About GPUs" (https://jax-ml.github.io/scaling-book/gpus/)
# and NCCL_TESTS.

def test_h100_node_all_gather():
    # BOOK gpus, Pop Quiz 1 [AllGather time]: 8xH100, AllGather(bf16[B_X, F]), B = 1024,
    # F = 16384: "(2 * B * F * (8 - 1)) / (8 * 450e9) ... more precisely, 65us".
    v = 2 * 1024 * 16384
    t = time_of("h100-8", ("x",), (8,), "all-gather", v, "x")
    assert t.seconds == pytest.approx(v * 7 / (8 * 450e9))
    assert t.seconds == pytest.approx(65e-6, rel=0.01)
    # Quiz 2, Question 3: bf16[D_X, F], D = 4096, F = 65536: "536e6 * (8 - 1) / 3.6e12 = 1.04ms".
    v = 2 * 4096 * 65536
    t = time_of("h100-8", ("x",), (8,), "all-gather", v, "x")
    assert t.seconds == pytest.approx(1.04e-3, rel=0.01)


def test_h100_bus_bandwidth_is_the_nvlink_bandwidth():
    # NCCL_TESTS: algbw = S / t; AllReduce busbw = algbw * 2(n-1)/n, AllGather busbw =
    # algbw * (n-1)/n, and "The bus bandwidth should reflect the speed of the hardware
    # bottleneck". So the predicted busbw of 8 H100s is their 450 GB/s NVLink (one way).
    s, n = 2**30, 8
    ar = time_of("h100-8", ("x",), (n,), "all-reduce", s, "x")
    ag = time_of("h100-8", ("x",), (n,), "all-gather", s, "x")
    assert (s / ar.seconds) * 2 * (n - 1) / n == pytest.approx(450e9)
    assert (s / ag.seconds) * (n - 1) / n == pytest.approx(450e9)
    # 1 GiB all-reduce: 2 * 2**30 * 7 / (8 * 450e9) = 4.18 ms.
    assert ar.seconds == pytest.approx(4.175e-3, rel=1e-3)


def test_h100_all_to_all_in_and_across_nodes():
    # BOOK gpus, "AllToAlls": in a node "B * (N - 1) / (W * N^2)" with B the whole array
    # (each GPU holds B/N); across M nodes "B * (M - 1) / (M^2 * W_node egress)".
    b = 2**30
    inside = time_of("h100-8", ("x",), (8,), "all-to-all", b // 8, "x")
    assert inside.seconds == pytest.approx(b * 7 / (450e9 * 64))
    across = time_of("h100-8x2", ("x",), (16,), "all-to-all", b // 16, "x")
    assert across.seconds == pytest.approx(b * 1 / (4 * 400e9))
    assert "InfiniBand" in across.links


def test_two_node_all_gather_is_node_bound():
    # BOOK gpus, Quiz 4, Question 5 [2-way AllGather cost]: "At the node level, we have
    # T = B * 7 / (8 * 450e9) = B / 514e9 while beyond we actually have
    # B * (2 - 1) / (2 * 400e9) = B / 800e9. Thus, we're actually bounded by the node level".
    b = 2**30
    t = time_of("h100-8x2", ("data",), (16,), "all-gather", b, "data")
    assert t.seconds == pytest.approx(b * 7 / (8 * 450e9))
    assert t.seconds == pytest.approx(b / 514e9, rel=1e-3)


def test_outer_axis_across_nodes_gets_one_nic():
    # BOOK gpus, "Reductions when array is sharded over a separate axis": with the inner axis
    # Y = 8 on NVLink, a gather over the outer axis only uses each GPU's own NIC:
    # bytes/W_node * D_node/max(D_node, Y), bytes = 8 V, W_node = 400e9: V / 50e9 per (M-1)/M.
    v = 2**28
    t = time_of("h100-8x4", ("data", "model"), (4, 8), "all-gather", v, "data")
    assert t.seconds == pytest.approx(v * 3 / (4 * 50e9))


# ---------------------------------------------------------------------------------------------
# Critical batch size for data parallelism: compute 8*b*D*F per chip (b tokens per chip) against
# two gradient all-reduces of 2*D*F bytes per layer (BOOK, "How to Parallelize a Transformer for
# Training", https://jax-ml.github.io/scaling-book/training/, Data Parallelism).

D, F = 8192, 32768


def critical_batch(target, names, sizes, data_axes, dtype="bfloat16"):
    grads = [coll("all-reduce", 2 * D * F, *data_axes)] * 2
    # The book's arithmetic is at the peak FLOP/s and nominal ICI bandwidth.
    est = estimate(grads, 8 * D * F, None, None, dtype, names, sizes, target, peak=True)
    return est.comm_seconds / est.compute.seconds     # b where compute == communication


def test_critical_batch_v5p():
    # BOOK training: "For TPUv5p, C=4.6e14 and W=2 * 9e10 for 1D data parallelism over ICI,
    # so our batch size per chip must be at least 2,550"; "4.59e14 / 1.8e11 = 2550".
    b = critical_batch("tpu-v5p-4x4x4", ("data", "y", "z"), (4, 4, 4), ("data",))
    assert b == pytest.approx(4.59e14 / 1.8e11)
    assert b == pytest.approx(2550, rel=1e-3)
    # "if we dedicate all three axes ... we 3x our bandwidth ... only BS=850 per TPU".
    b3 = critical_batch("tpu-v5p-4x4x4", ("data",), (64,), ("data",))
    assert b3 == pytest.approx(850, rel=1e-3)
    # And the bound flips there.
    grads = [coll("all-reduce", 2 * D * F, "data")] * 2
    for per_chip, bound in ((2600, "compute"), (2500, "communication")):
        est = estimate(grads, 8 * per_chip * D * F, None, None, "bfloat16",
                       ("data", "y", "z"), (4, 4, 4), "tpu-v5p-4x4x4", peak=True)
        assert est.bound == bound


def test_critical_batch_v5e():
    # The same rule, B/X > C / W_ici (BOOK training), with v5e's numbers: 197e12 FLOP/s
    # (Cloud TPU v5e page) over 2 * 4.5e10 (BOOK tpus ICI table) = 2189 tokens per chip on a
    # full 16 ring. (The book's 2550 is v5p's.)
    b = critical_batch("tpu-v5e-16x16", ("data", "model"), (16, 16), ("data",))
    assert b == pytest.approx(197e12 / 9e10)
    assert b == pytest.approx(2189, rel=1e-3)


def test_critical_batch_h100_and_b200():
    # BOOK gpus, Data Parallelism: "Within a node, we just need the per-GPU token batch size >
    # 990e12 / 450e9 = 2200. Within an SU or at the spine level, BS > 990e12 / 400e9 = 2475",
    # and for small X "B / N > alpha * (X - 1) / X". The exact ring keeps the (n-1)/n factor.
    node = critical_batch("h100-8", ("data",), (8,), ("data",))
    assert node == pytest.approx(989e12 / 450e9 * 7 / 8)
    assert node == pytest.approx(2200 * 7 / 8, rel=0.01)
    # One SU: 32 nodes of 8 (256 GPUs), pure data parallelism over all of them.
    su = critical_batch("h100-8x32", ("data",), (256,), ("data",))
    assert su == pytest.approx(989e12 / 400e9 * 31 / 32)
    assert su == pytest.approx(2475 * 31 / 32, rel=0.01)
    # Quiz 5, Question 1: B200 "our critical batch size increases to 2250e12 / 400e9 = 5625".
    b200 = critical_batch("b200-8x32", ("data",), (256,), ("data",))
    assert b200 == pytest.approx(5625 * 31 / 32, rel=1e-3)


# ---------------------------------------------------------------------------------------------
# Compute, memory and the step.

def test_v5e_matmul_roofline():
    # BOOK tpus, Question 4: int8[16384, 4096] weights times int8[B, 4096] on one TPU v5e:
    # T_math = 2 * 4096 * 16384 * B / 3.94e14, T_comms = (16384 * 4096 + 4096 B + 16384 B) /
    # 8.1e11: "We'll be FLOPs-bound when ... B > 271" (the book rounds 1.34e8 to 1.3e8 and
    # 2.05e4 to 2e4; with Cloud's 393e12 OP/s and 819 GB/s the crossing is at B = 259.5).
    def roof(b):
        return compute_time(2 * 4096 * 16384 * b, 16384 * 4096 + 4096 * b + 16384 * b, "int8",
                            "tpu-v5e-1x1")
    assert roof(240).bound == "memory"
    assert roof(300).bound == "compute"
    crossing = next(b for b in range(1, 1000) if roof(b).bound == "compute")
    assert crossing == pytest.approx(271, rel=0.05)


def test_b200_matmul_roofline():
    # BOOK gpus, Quiz 1, Question 4: fp16[64, 4096] * fp16[4096, 8192] on one B200 "is purely
    # bandwidth bound ... 69e6 / 8e12 = 8.6us"; with a batch of 512 "T = 2*512*4096*8192 /
    # 2.3e15 = 15us" (we use 2.25e15).
    def roof(b):
        return compute_time(2 * b * 4096 * 8192, 2 * b * 4096 + 2 * 4096 * 8192 + 2 * b * 8192,
                            "float16", "b200-1")
    small, big = roof(64), roof(512)
    assert small.bound == "memory" and small.seconds == pytest.approx(8.6e-6, rel=0.02)
    assert big.bound == "compute" and big.seconds == pytest.approx(15e-6, rel=0.03)


def test_memory_fit_llama70b_on_h100():
    # BOOK gpus, Quiz 5, Question 2: LLaMA-3 70B with Adam needs "2 bytes for the weights and
    # 8 for the optimizer state, so at least 700GB"; with 8-way sharding "700GB / 8 = 87.5GB /
    # GPU, which won't fit". 16-way (two nodes) does. The capacity is what CUDA gives a
    # program of the H100's 80 GiB: 84,942,979,072 bytes (79.1 GiB); 87.5e9 bytes are 81.5 GiB.
    no = memory_fit(700e9 / 8, "h100-8")
    assert not no.fits and no.fraction == pytest.approx(87.5e9 / 84_942_979_072)
    assert "does not fit" in no.text and "81.5 GiB" in no.text and "79.1 GiB" in no.text
    yes = memory_fit(700e9 / 16, "h100-8x2")
    assert yes.fits and yes.fraction == pytest.approx(43.75e9 / 84_942_979_072)


def test_step_bounds_and_json():
    colls = [coll("all-gather", 2**26, "data"), coll("all-reduce", 2**24, "model"),
             coll("all-to-all", 2**20, "data", "model")]
    est = estimate(colls, 4e12, 2e10, 12e9, "bfloat16", ("data", "model"), (16, 16),
                   "tpu-v5e-16x16")
    assert [t.kind for t in est.collectives] == ["all-gather", "all-reduce", "all-to-all"]
    assert est.step_upper_seconds >= est.step_lower_seconds > 0
    assert est.step_lower_seconds == pytest.approx(max(est.compute.seconds, est.comm_seconds))
    assert est.step_upper_seconds == pytest.approx(est.compute.seconds + est.comm_seconds)
    assert est.bound in ("compute", "memory", "communication")
    assert est.memory.fits
    d = json.loads(json.dumps(est.to_dict()))
    assert d["target"] == "tpu-v5e-16x16" and d["mapping"] == {"data": "x", "model": "y"}
    assert est.text().startswith("target tpu-v5e-16x16")


def test_memory_bound_step_is_named():
    # A step whose HBM time beats both FLOPs and communication is "memory"-bound.
    est = estimate([], 1e9, 1e11, None, "bfloat16", ("data",), (8,), "h100-8")
    assert est.bound == "memory" and est.compute.bound == "memory"


def test_missing_flops_is_said_not_invented():
    est = estimate([coll("all-reduce", 2**20, "data")], None, None, None, "bfloat16",
                   ("data",), (8,), "h100-8")
    assert est.compute.seconds is None and est.step_upper_seconds is None
    assert est.bound is None and est.memory is None
    # No step time at all rather than the communication alone, which understates it.
    assert est.step_lower_seconds is None and est.comm_seconds > 0
    assert any("no FLOP count" in n for n in est.notes)
    assert any("no step time is given" in n for n in est.notes)


def test_a_dtype_with_no_matrix_peak_is_timed_at_memory_speed_and_said():
    # No int32 figure for the H100: 1e12 FLOPs are not timed, and the compute is its 3.35e9
    # bytes at the H100 SXM's 3.35 TB/s ("GPU Memory Bandwidth 3.35TB/s", nvidia.com/h100),
    # 1 ms at the nominal bandwidth (the H100's HBM has no measured fraction).
    est = estimate([], 1e12, 3.35e9, None, "int32", ("data",), (8,), "h100-8")
    assert est.compute.seconds == pytest.approx(1e-3) and est.compute.bound == "memory"
    assert est.step_lower_seconds == pytest.approx(1e-3)
    assert any("no sourced int32 matrix peak for H100 SXM" in n and "memory speed" in n
               for n in est.notes)
    # Without a bytes count either, nothing is known: no step time.
    est = estimate([], 1e12, None, None, "float16", ("data",), (4,), "tpu-v5e-2x2")
    assert est.compute.seconds is None and est.step_lower_seconds is None


def test_tpu_float32_is_predicted_at_the_bf16_peak():
    # Cloud TPU, "Improve your model's performance with bfloat16": "By default, TPUs perform
    # matrix multiplication operations with bfloat16 values and accumulations with IEEE float32
    # values"; no TPU page quotes a float32 peak. TPU v5e bf16: 197e12 FLOP/s (Cloud v5e page),
    # so 197e12 FLOPs take one second; 819e9 bytes at 819 GB/s (same page) take one too.
    est = estimate([], 197e12, 819e9 / 2, None, "float32", ("data",), (4,), "tpu-v5e-2x2",
                   peak=True)
    assert est.compute.seconds == pytest.approx(1.0)
    assert est.compute.memory_seconds == pytest.approx(0.5)
    assert est.step_lower_seconds == pytest.approx(1.0) == est.step_upper_seconds
    assert est.dtype == "float32" and est.compute.peak_dtype == "bfloat16"
    [note] = [n for n in est.notes if "float32" in n]
    assert "TPU v5e has no float32 matmul peak" in note and "bfloat16 peak 197 TFLOP/s" in note
    assert "197 TFLOP/s bfloat16" in est.text()


def test_cpu_and_bow_have_no_invented_numbers():
    est = estimate([coll("all-reduce", 2**20, "d")], 1e9, 1e9, 1e9, "float32", ("d",), (4,),
                   "cpu")
    assert est.compute.seconds is None and est.collectives[0].seconds is None
    bow = get_target("bow-2000")
    assert bow.chip.memory_bandwidth is None
    t = time_of("bow-2000", ("d",), (4,), "all-gather", 2**20, "d")
    assert t.seconds == pytest.approx(2**20 * 3 / (4 * 64e9))
    assert "latency" in t.note


def test_collective_with_no_axes_is_not_guessed():
    est = estimate([coll("collective-permute", 2**20, group_size=2)], 1e9, None, None,
                   "bfloat16", ("data",), (8,), "h100-8")
    assert est.collectives[0].seconds is None
    assert any("could not be timed" in n for n in est.notes)


def test_estimate_report_reads_a_report():
    report = SimpleNamespace(
        mesh=SimpleNamespace(names=("data", "model"), sizes=(2, 4)),
        collectives=(coll("all-reduce", 2**22, "model", group_size=4),),
        cost=SimpleNamespace(flops=1e12, bytes_accessed=1e9),
        memory=SimpleNamespace(total=3e9),
        tensors=(SimpleNamespace(kind="input", bytes_per_device=10, dtype="bfloat16"),
                 SimpleNamespace(kind="input", bytes_per_device=5, dtype="float32")))
    est = estimate_report(report, "h100-8")
    assert est.dtype == "bfloat16" and est.mapping == {"data": "gpu:2", "model": "gpu:4"}
    # At the rate measured runs reach: 794.5 TFLOP/s in the ml-engineering MAMF table.
    assert est.compute.flops_seconds == pytest.approx(1e12 / 794.5e12)
    assert estimate_report(report, "h100-8", peak=True).compute.flops_seconds == \
        pytest.approx(1e12 / 989e12)


def test_default_rates_are_the_published_measured_fractions():
    # Published measurements, taken as printed (the expected values do not come from the
    # catalog): stas00/ml-engineering's MAMF table, H100 SXM 794.5 of 989 bf16 TFLOP/s; its
    # NVLink table, an NCCL ring on 8x H200 (NVLink 4, as H100) 367.61 of 450 GB/s busbw; the
    # scaling book (sharding), an AllGather on a v5e 8x16 slice at "about 95% of the peak
    # claimed bandwidth (4.5e10)", and (profiling) a TPU v2 matmul 96 ms against 95.6 ms at peak.
    v = 2**30
    ar = [coll("all-reduce", v, "data", group_size=8)]
    est = estimate(ar, 1e12, None, None, "bfloat16", ("data",), (8,), "h100-8")
    assert est.compute.flops_seconds == pytest.approx(1e12 / 794.5e12)
    assert est.collectives[0].seconds == pytest.approx(2 * 7 / 8 * v / 367.61e9)
    assert not est.peak and any("x 0.80" in n for n in est.notes)
    assert any("NVLink bandwidth x 0.82" in n for n in est.notes)
    at_peak = estimate(ar, 1e12, None, None, "bfloat16", ("data",), (8,), "h100-8", peak=True)
    assert at_peak.compute.flops_seconds == pytest.approx(1e12 / 989e12)
    assert at_peak.collectives[0].seconds == pytest.approx(2 * 7 / 8 * v / 450e9)
    assert at_peak.peak and at_peak.to_dict()["peak"] is True
    # Between nodes, no measurement: InfiniBand keeps 400 Gb/s and the note says so.
    multi = estimate([coll("all-gather", v, "node", group_size=2)], 1e12, None, None,
                     "bfloat16", ("node", "gpu"), (2, 8), "h100-8x2")
    assert any(n.startswith("InfiniBand at its nominal bandwidth") for n in multi.notes)
    # TPU v5e: a 1-D all-gather over a 4-chip ring without wraparound, one link each way
    # ((N-1)/N V per direction pair over 2 links, as test_torus_all_gather_v5e above has it),
    # at 95% of 4.5e10; the matmul peak at 0.97 of 197e12, the median of 187 to 194 TFLOP/s
    # measured on a v5e chip (benchmarks/results/tpu-v5e-2026-12-06/rates.json), and HBM at
    # 0.81 of 819 GB/s (copies of 256 MiB to 2 GiB, 646 to 687 GB/s, the same run).
    tpu = estimate([coll("all-gather", v, "x", group_size=4)], 197e12, None, None, "bfloat16",
                   ("x",), (4,), "tpu-v5e-2x2", peak=False)
    tpu_peak = estimate([coll("all-gather", v, "x", group_size=4)], 197e12, None, None,
                        "bfloat16", ("x",), (4,), "tpu-v5e-2x2", peak=True)
    assert tpu.collectives[0].seconds / tpu_peak.collectives[0].seconds == \
        pytest.approx(1 / 0.95)
    assert tpu.compute.seconds == pytest.approx(1 / 0.97)
    hbm = estimate([], 1e9, 819e9, None, "bfloat16", ("x",), (4,), "tpu-v5e-2x2")
    assert hbm.compute.memory_seconds == pytest.approx(1 / 0.81)
    assert any("HBM bandwidth x 0.81" in n for n in hbm.notes)
    # v5p is not measured: the scaling book's TPU v2 matmul, 95.6/96 of its 459e12.
    v5p = estimate([], 459e12, None, None, "bfloat16", ("x",), (8,), "tpu-v5p-2x2x2")
    assert v5p.compute.seconds == pytest.approx(96 / 95.6)


# ---------------------------------------------------------------------------------------------
# The catalog and the mapping rules.

def test_catalog_names_and_describe():
    ts = targets()
    assert list(ts)[0].startswith("tpu-") and list(ts)[-1] == "cpu"
    for name, t in ts.items():
        assert t.name == name and t.describe().startswith(name + ":")
    assert get_target("tpu-v5e-16x16").chips == 256
    assert get_target("h100-8x4").chips == 32
    assert get_target("tpu-v5p-8x16x16-2slices").chips == 4096


def test_wraparound_rules():
    # BOOK tpus: v5e/v6e wrap "along any axis of size 16 (meaning an 8x16 has a wraparound on
    # the long axis)"; v4/v5p wrap on multiples of a full 4x4x4 cube, "a 2x2x4 won't have any".
    wraps = {a.name: a.wraparound for a in get_target("tpu-v5e-8x16").axes}
    assert wraps == {"x": False, "y": True}
    assert not any(a.wraparound for a in get_target("tpu-v5e-8x4").axes)
    assert not any(a.wraparound for a in get_target("tpu-v4-2x2x4").axes)
    assert all(a.wraparound for a in get_target("tpu-v4-4x4x8").axes)
    # Either order names the same slice ("a mesh of 32 chips maps onto a tpu-v5e-8x4 slice").
    assert get_target("tpu-v5e-8x4").chips == get_target("tpu-v5e-4x8").chips == 32


def test_unknown_target_lists_names():
    with pytest.raises(TargetError) as e:
        get_target("tpu-v7-4x4")
    assert "'v5e'" in str(e.value) and "'v4'" in str(e.value)
    with pytest.raises(TargetError) as e:
        get_target("h300-8")
    assert "'h100-8'" in str(e.value) and "'tpu-v5e-16x16'" in str(e.value)
    with pytest.raises(TargetError) as e:
        get_target("tpu-v5e-3x3")
    assert "16x16" in str(e.value)
    with pytest.raises(TargetError, match="a node has 8 GPUs"):
        get_target("h100-16")
    with pytest.raises(TargetError, match="'h100-8x0': the node count must be at least 1"):
        get_target("h100-8x0")


def test_mapping_that_does_not_fit_names_the_limit():
    with pytest.raises(MappingError) as e:
        check_mapping("h100-8x2", ("model",), (16,), {"model": "gpu"})
    msg = str(e.value)
    assert "'model'" in msg and "size 16" in msg and "a node has 8 GPUs on NVLink" in msg
    assert "model=gpu+node:2" in msg and e.value.axis == "model"
    with pytest.raises(MappingError, match="takes 16 from 'gpu' but a node has 8 GPUs"):
        check_mapping("h100-8x2", ("model",), (16,), {"model": "gpu:16"})
    with pytest.raises(MappingError, match="has 8 devices but tpu-v5e-16x16 has 256 chips"):
        default_mapping("tpu-v5e-16x16", ("data",), (8,))
    with pytest.raises(MappingError, match="lacks; its axes"):
        check_mapping("tpu-v5e-4x4", ("a", "b"), (4, 4), "a=x,b=z")
    with pytest.raises(MappingError, match="ask for 16 of 'x'"):
        check_mapping("tpu-v5e-4x4", ("a", "b"), (4, 4), "a=x,b=x")
    with pytest.raises(MappingError, match="made for h100-8, not a100-8"):
        collective_time("all-gather", 1, ("a",), "a100-8", default_mapping("h100-8", "a", (8,)))


def test_every_collective_kind_has_a_formula_and_others_raise(monkeypatch):
    assert set(collectives.FORMULAS) == set(CollectiveKind)
    mapping = default_mapping("h100-8", ("a",), (8,))
    # A kind string XLA might print that the explorer has no formula for.
    with pytest.raises(ExplorerError, match="'broadcast' has no time formula") as e:
        collective_time("broadcast", 2**20, ("a",), "h100-8", mapping)
    assert "'all-gather'" in str(e.value) and "'collective-permute'" in str(e.value)

    # A kind from another enum, and a member whose formula was never written: both raise, and
    # neither is priced as some other kind.
    class FakeKind(StrEnum):
        COLLECTIVE_BROADCAST = "collective-broadcast"

    with pytest.raises(ExplorerError, match="'collective-broadcast' has no time formula"):
        collective_time(FakeKind.COLLECTIVE_BROADCAST, 2**20, ("a",), "h100-8", mapping)
    without_permute = {k: f for k, f in collectives.FORMULAS.items()
                       if k is not CollectiveKind.COLLECTIVE_PERMUTE}
    monkeypatch.setattr(collectives, "FORMULAS", without_permute)
    with pytest.raises(ExplorerError, match="'collective-permute' has no time formula"):
        collective_time(CollectiveKind.COLLECTIVE_PERMUTE, 2**20, ("a",), "h100-8", mapping)


def test_default_mapping_puts_inner_axes_on_fast_links():
    assert default_mapping("h100-8x4", ("data", "model"), (4, 8)).to_dict() == \
        {"data": "node", "model": "gpu"}
    assert default_mapping("tpu-v5e-16x16-2slices", ("dcn", "data", "model"),
                           (2, 16, 16)).to_dict() == {"dcn": "slice", "data": "x", "model": "y"}
    assert default_mapping("h100-8x4", ("data",), (32,)).to_dict() == {"data": "node+gpu"}


def test_mapping_text_round_trip():
    assert parse_mapping("data=slice, model=x+y:2") == {"data": ("slice",),
                                                         "model": ("x", "y:2")}
    m = check_mapping("tpu-v5e-16x16", ("a", "b"), (8, 32), "a=y:8,b=x+y:2")
    assert isinstance(m, AxisMapping)
    assert check_mapping("tpu-v5e-16x16", ("a", "b"), (8, 32), m.text()) == m


def test_tpu_topologies_take_their_generations_from_the_catalog():
    # CLOUD v4/v5p: 3-D torus slices (e.g. 4x4x8); v5e/v6e: 2-D (e.g. 16x16).
    assert tpu_generations() == {"v4": 3, "v5e": 2, "v5p": 3, "v6e": 2}
    assert topology_chips("v5p:4x4x8") == 128 and topology_chips("v6e:16x16") == 256
    with pytest.raises(ExplorerError, match="a v5e slice has 2 dimensions"):
        topology_chips("v5e:4x4x4")


def test_a_collective_over_part_of_an_axis_is_timed_over_the_whole_axis():
    # The TPU compiler splits data=16 itself: groups of every fourth device along data
    # ({0, 16, 32, 48}, ... with device = 4·data + model) match no whole mesh axis. They lie
    # in `data`, so they are timed over it (an upper bound), with a note, instead of untimed.
    groups = tuple(tuple(4 * (4 * k + d) + m for k in range(4)) for d in range(4) for m in range(4))
    split = coll(CollectiveKind.ALL_GATHER, 64 * 2**20, group_size=4, groups=groups)
    est = estimate([split], 1e12, 1e9, None, "bfloat16", ("data", "model"), (16, 4),
                   "tpu-v5p-4x4x4")
    [t] = est.collectives
    [whole] = estimate([coll(CollectiveKind.ALL_GATHER, 64 * 2**20, "data")], 1e12, 1e9,
                       None, "bfloat16", ("data", "model"), (16, 4),
                       "tpu-v5p-4x4x4").collectives
    assert t.axes == ("data",) and whole.seconds > 0 and t.seconds == whole.seconds
    assert est.step_upper_seconds is not None
    assert any("part of a mesh axis" in n for n in est.notes)
    # Groups of single devices move nothing and stay untimed by axes.
    alone = coll(CollectiveKind.ALL_GATHER, 1024, group_size=1,
                 groups=tuple((d,) for d in range(64)))
    [t] = estimate([alone], 1e12, 1e9, None, "bfloat16", ("data", "model"), (16, 4),
                   "tpu-v5p-4x4x4").collectives
    assert t.seconds == 0.0


# ---------------------------------------------------------------------------------------------
# The closed sets of the cost model are StrEnums: each member is the word the JSON always held.

def _json(obj) -> dict:
    return json.loads(json.dumps(obj.to_dict()))


def test_collective_bounds_and_ring_directions_write_their_old_words_in_the_json():
    # As in test_ici_latency_bound_below_45kb: on a v5e a permute under 45 kB is latency-bound,
    # one over it bandwidth-bound. Axis b lies on the slice's wrapped 16-ring, so a one-way
    # permute keeps its direction, given as a Report's JSON writes it ("-") or as the member.
    names, sizes = ("a", "b"), (16, 16)
    ring = default_mapping("tpu-v5e-16x16", names, sizes)
    under = collective_time("collective-permute", 40_000, ("b",), "tpu-v5e-16x16", ring,
                            direction="-")
    over = collective_time("collective-permute", 50_000, ("b",), "tpu-v5e-16x16", ring,
                           direction=RingDirection.NEXT)
    assert under.bound is CollectiveBound.LATENCY and under.one_way is RingDirection.PREVIOUS
    assert over.bound is CollectiveBound.BANDWIDTH and over.one_way is RingDirection.NEXT
    assert [(_json(t)["bound"], _json(t)["one_way"]) for t in (under, over)] == \
        [("latency", "-"), ("bandwidth", "+")]
    # Behind NVSwitch there is no ring to go one way round: no direction, "" in the JSON.
    switch = collective_time("collective-permute", 50_000, ("b",), "h100-8",
                             default_mapping("h100-8", ("b",), (8,)), direction="+")
    assert switch.one_way is RingDirection.NONE and _json(switch)["one_way"] == ""


def test_a_collectives_tier_is_the_tier_enum_and_writes_its_old_words():
    # The links a leg of a collective split at the slices' edges uses: a Report's Collective
    # holds a Tier, public beside it, whose JSON is the text the field held before.
    assert typing.get_type_hints(explorer.Collective)["tier"] is explorer.Tier
    assert json.loads(json.dumps([Tier.INSIDE, Tier.ACROSS, Tier.ALL])) == ["inside", "across", ""]
    assert Tier("across") is Tier.ACROSS and Tier.ALL == "" and not Tier.ALL


def test_step_bounds_write_their_old_words_in_the_json():
    # The three verdicts of the critical-batch example (test_critical_batch_v5p): 2600 tokens
    # per chip are compute-bound, 2500 communication-bound; and the HBM-heavy step of
    # test_memory_bound_step_is_named is memory-bound, its compute too.
    grads = [coll("all-reduce", 2 * D * F, "data")] * 2
    words = []
    for per_chip in (2600, 2500):
        est = estimate(grads, 8 * per_chip * D * F, None, None, "bfloat16",
                       ("data", "y", "z"), (4, 4, 4), "tpu-v5p-4x4x4", peak=True)
        words.append(_json(est)["bound"])
    memory = estimate([], 1e9, 1e11, None, "bfloat16", ("data",), (8,), "h100-8")
    assert memory.bound is Bound.MEMORY and memory.compute.bound is Bound.MEMORY
    assert words + [_json(memory)["bound"], _json(memory)["compute"]["bound"]] == \
        ["compute", "communication", "memory", "memory"]


def test_target_families_and_link_kinds_are_the_catalogs_words():
    assert {t.family for t in targets().values()} == {"tpu", "gpu", "ipu", "cpu"}
    assert get_target("cpu").family is TargetFamily.CPU and get_target("cpu").chips is None
    # Outermost axis first: the slow tier (InfiniBand between nodes, DCN between slices).
    assert [a.link.kind for a in get_target("h100-8x2").axes] == ["InfiniBand", "NVLink"]
    assert [a.link.kind for a in get_target("tpu-v5e-16x16-2slices").axes] == \
        [LinkKind.DCN, LinkKind.ICI, LinkKind.ICI]
    assert get_target("bow-2000").axes[0].link.kind is LinkKind.IPU_LINK
    # The words reach the listing as they were.
    assert "InfiniBand 50 GB/s per device one way" in get_target("h100-8x2").describe()


def test_matmul_dtype_is_never_that_of_token_ids():
    """A language model at a large batch: its int32 token ids are its largest input, but its
    FLOPs are bf16 matmuls, so the bf16 peak times it (before, the int32 ids made compute
    unknown and the step was priced as its communication alone). The largest floating-point
    input decides, not the dots: a CPU compile upcasts bf16 dots to f32."""
    from types import SimpleNamespace

    from explorer._src.cost.compute import matmul_dtype
    from explorer._src.hlo.arithmetic import Dot
    from explorer._src.hlo.schedule import Work

    ids = SimpleNamespace(kind="input", dtype="int32", bytes_per_device=64 * 2**20)
    weights = SimpleNamespace(kind="input", dtype="bfloat16", bytes_per_device=2**20)
    f32 = Dot(1, 4096, 4096, 4096, "f32", "f32")      # a CPU compile's upcast bf16 dot
    bf16 = Dot(1, 64, 64, 64, "bf16", "bf16")
    work = Work(compute=((f32.flops, 0.0, 1), (bf16.flops, 0.0, 1)), collective_runs={},
                uncounted_loops=(), dots=((f32,), (bf16,)))
    assert matmul_dtype(work, [ids, weights]) == "bfloat16"
    assert matmul_dtype(None, [ids, weights]) == "bfloat16"
    # No floating-point input: the dots doing most FLOPs, else the largest input.
    assert matmul_dtype(work, [ids]) == "float32"
    assert matmul_dtype(None, [ids]) == "int32"
    assert matmul_dtype(None, []) == "float32"
