"""Predicted against published step times: public training measurements whose whole
configuration `transformer_train` expresses, predicted with explorer, and the error.

Run by hand (this 2-core machine: under a minute a case; TPU cases compile ahead of time for
the real topology through libtpu):

    .venv/bin/python benchmarks/published.py                  # every case, a markdown table
    .venv/bin/python benchmarks/published.py --only maxtext-v5p-32b
    .venv/bin/python benchmarks/published.py --fake           # TPU cases on fake CPU devices
    .venv/bin/python benchmarks/published.py --attention plain   # no flash-kernel timing
    .venv/bin/python benchmarks/published.py --depth          # compile time against depth

Progress goes to stderr, the tables to stdout (docs/performance.md, "Predicted against
published step times"). Nothing is fitted: the prediction is explorer's estimate with the
catalog's sourced peaks and link speeds, and the published step time is derived from the
published figure by the arithmetic printed beside it.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from dataclasses import dataclass, field, replace

import explorer
from explorer.cost.model import roofline_seconds
from explorer.hlo.schedule import MATH_KINDS, StepKind, read_schedule
from explorer.report.predict import with_target
from explorer.workloads.models import TRANSFORMER_TRAIN

MAXTEXT_COMMIT = "76bd53b0f"   # AI-Hypercomputer/maxtext, 2023-12-15: the tables and configs
MAXTEXT = f"https://github.com/AI-Hypercomputer/maxtext/blob/{MAXTEXT_COMMIT}/MaxText/configs"
TORCHTITAN_COMMIT = "395a52627"    # pytorch/torchtitan, 2024-04-18: docs/performance.md
TORCHTITAN3_COMMIT = "1ea476e9f"   # 2024-04-24: the Llama 3 rows added
TORCHTITAN = "https://github.com/pytorch/torchtitan/blob/{}/docs/performance.md"

# Peak bf16 FLOP/s the publishers divide by to get MFU: MaxText's
# accelerator_to_spec_map.py (v5p 459e12, v5e 197e12); torchtitan's A100 312e12.
PEAK = {"v5p": 459e12, "v5e": 197e12, "a100": 312e12}


@dataclass(frozen=True)
class Case:
    name: str
    source: str                    # where the published number is: URL and table
    config: str                    # where its configuration is
    quoted: str                    # the published figure, as printed there
    params: dict                   # transformer_train params
    mesh: str
    preset: str
    target: str
    topology: str | None           # TPU ahead-of-time compile, e.g. "v5p:4x4x4"
    published_s: float             # the published step time, derived
    arithmetic: str                # how published_s follows from `quoted`
    notes: tuple[str, ...] = field(default=())


def param_count(params: dict) -> int:
    """Parameters of the transformer_train config (embedding, blocks, norms; no optimizer)."""
    p = TRANSFORMER_TRAIN.resolve(params)
    kinds = TRANSFORMER_TRAIN.kinds(p)
    return sum(math.prod(s) for n, s in TRANSFORMER_TRAIN.shapes(p).items() if n not in kinds)


# --- MaxText, December 2023: the v5p and v5e tables ---------------------------------------------

def maxtext_dims(scale: int) -> dict:
    """MaxText's model at global_parameter_scale `scale` (pyconfig.get_individual_scales at
    76bd53b0f): base.yml base_emb_dim 2560, base_num_heads 8, base_mlp_dim 8192,
    base_num_decoder_layers 16, head_dim 256, vocab_size 32768; doubling in turn heads and
    mlp_dim, emb_dim, layers."""
    base, rem = divmod(int(math.log2(scale)), 3)
    heads = base + int(rem > 0)
    emb = base + int(rem > 1)
    return {"d_model": 2560 * 2 ** emb, "heads": 8 * 2 ** heads, "d_head": 256,
            "d_ff": 8192 * 2 ** heads, "layers": 16 * 2 ** base, "vocab": 32768}


# The block of MaxText's models.py at 76bd53b0f: one RMSNorm, attention and MLP of the same
# normed input added to the residual (a parallel block), mlp_activations ["relu"] (one wi, one
# wo), logits through the embedding (logits_via_embedding: True) scaled by 1/sqrt(emb),
# use_iota_embed=true (a one-hot matmul), float32 params (DenseGeneral's kernel) cast to
# dtype bfloat16, AdamW state in float32, scan_layers true, seq max_target_length 2048.
# attention=flash in the published runs (a Pallas kernel that keeps the scores in VMEM):
# attention=fused times the attention core that way.
MAXTEXT_MODEL = {"seq": 2048, "mlp": "relu", "block": "parallel", "tied_embed": "true",
                 "dtype": "float32", "compute_dtype": "bfloat16", "scan_layers": "true",
                 "attention": "fused"}


def maxtext_case(gen: str, scale: int, slice_name: str, chips: int, per_device_batch: int,
                 remat: str, fsdp: int, tensor: int, mfu: float, tflops: int, topology: str,
                 target: str, script: str) -> Case:
    dims = maxtext_dims(scale)
    params = {**MAXTEXT_MODEL, **dims, "batch": per_device_batch * chips, "remat": remat}
    n = param_count(params)
    s, b = params["seq"], per_device_batch
    # MaxText train.py calculate_training_tflops at 76bd53b0f (PaLM, arXiv:2204.02311, App. B):
    # per device, 6·N·S·b for the weights plus 12·H·L·d_head·S²·b/2 for causal attention.
    flops = 6 * n * s * b + 6 * dims["heads"] * dims["layers"] * dims["d_head"] * s * s * b
    step = flops / (mfu * PEAK[gen])
    mesh = f"data={fsdp}" if tensor == 1 else f"data={fsdp},model={tensor}"
    table = (f"{MAXTEXT}/{gen}/README.md" if gen == "v5p" else f"{MAXTEXT}/v5e/README.md")
    return Case(
        f"maxtext-{gen}-{scale}b", f"{table} (`{scale}B model`, `1x {slice_name}` row)",
        f"{MAXTEXT}/{gen}/{script}",
        f"{tflops} TFLOP/s/chip, MFU {mfu:.2%}", params, mesh,
        "fsdp" if tensor == 1 else "2d", target, topology, step,
        f"(6·N·S·b + 6·H·L·d_head·S²·b) / (MFU·peak) = (6·{n / 1e9:.2f}e9·{s}·{b} + "
        f"6·{dims['heads']}·{dims['layers']}·{dims['d_head']}·{s}²·{b}) / "
        f"({mfu:.4f}·{PEAK[gen] / 1e12:.0f}e12) = {step:.3f} s",
        notes=(f"per_device_batch_size={b}, remat_policy={remat}, ici_fsdp={fsdp}, "
               f"ici_tensor={tensor}, attention=flash",))


# --- torchtitan, April 2024: Llama on 64 A100 80GB with FSDP2 -----------------------------------

# torchtitan's Llama (torchtitan/models/llama at 395a52627/1ea476e9f): RMSNorm, SwiGLU with
# ffn = multiple_of·ceil(ffn_dim_multiplier·(8/3)·dim / multiple_of), untied output; FSDP2
# MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32): float32 params gathered
# and computed in bfloat16, AdamW state float32. Attention is SDPA's flash kernel: fused.
TORCHTITAN_MODEL = {"mlp": "swiglu", "dtype": "float32", "compute_dtype": "bfloat16",
                    "scan_layers": "true", "attention": "fused"}
LLAMA2_13B = {"vocab": 32000, "d_model": 5120, "heads": 40, "d_head": 128, "d_ff": 13824,
              "layers": 40}
LLAMA2_70B = {"vocab": 32000, "d_model": 8192, "heads": 64, "kv_heads": 8, "d_head": 128,
              "d_ff": 28672, "layers": 80}
LLAMA3_70B = {**LLAMA2_70B, "vocab": 128256}


def torchtitan_case(name: str, model: dict, seq: int, local_batch: int, remat: str, wps: int,
                    mfu: str, row: str, commit: str) -> Case:
    gpus = 64
    params = {**TORCHTITAN_MODEL, **model, "seq": seq, "batch": local_batch * gpus,
              "remat": remat}
    # train.py: wps = tokens of this rank since the last log / time (model_parallel_size 1
    # under FSDP alone), so one step of local_batch·seq tokens takes local_batch·seq / wps.
    step = local_batch * seq / wps
    return Case(
        name, f"{TORCHTITAN.format(commit)} ({row})",
        f"https://github.com/pytorch/torchtitan/blob/{commit}/train_configs",
        f"{wps} WPS per GPU, MFU {mfu}", params, f"data={gpus}", "fsdp", "a100-8x8", None,
        step, f"local batch·seq / WPS = {local_batch}·{seq} / {wps} = {step:.3f} s",
        notes=(f"local batch {local_batch}, activation checkpointing {remat}, FSDP over 64 "
               "GPUs (8 nodes of 8), attention = SDPA (flash)",))


CASES = [
    maxtext_case("v5p", 32, "v5p-128", 64, 8, "minimal", 16, 4, 0.7147, 328, "v5p:4x4x4",
                 "tpu-v5p-4x4x4", "32b.sh"),
    maxtext_case("v5p", 64, "v5p-128", 64, 4, "minimal", 16, 4, 0.7031, 323, "v5p:4x4x4",
                 "tpu-v5p-4x4x4", "64b.sh"),
    maxtext_case("v5p", 128, "v5p-256", 128, 2, "minimal", 16, 8, 0.6868, 315, "v5p:4x4x8",
                 "tpu-v5p-4x4x8", "128b.sh"),
    maxtext_case("v5e", 16, "v5e-256", 256, 6, "full", 256, 1, 0.6110, 120, "v5e:16x16",
                 "tpu-v5e-16x16", "16b.sh"),
    maxtext_case("v5e", 32, "v5e-256", 256, 4, "full", 256, 1, 0.6686, 132, "v5e:16x16",
                 "tpu-v5e-16x16", "32b.sh"),
    maxtext_case("v5e", 64, "v5e-256", 256, 2, "full", 256, 1, 0.5990, 118, "v5e:16x16",
                 "tpu-v5e-16x16", "64b.sh"),
    maxtext_case("v5e", 128, "v5e-256", 256, 1, "full", 16, 16, 0.5606, 110, "v5e:16x16",
                 "tpu-v5e-16x16", "128b.sh"),
    torchtitan_case("torchtitan-llama2-13b", LLAMA2_13B, 4096, 2, "none", 2162, "61.1%",
                    "Llama 2 table, `13B | 2 | no` row", TORCHTITAN_COMMIT),
    torchtitan_case("torchtitan-llama2-70b", LLAMA2_70B, 4096, 2, "full", 353, "50.5%",
                    "Llama 2 table, `70B | 2 | full` row", TORCHTITAN_COMMIT),
    torchtitan_case("torchtitan-llama3-70b", LLAMA3_70B, 8192, 1, "full", 331, "51.7%",
                    "Llama 3 table, `70B | 1 | full` row", TORCHTITAN3_COMMIT),
]


# --- prediction ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Prediction:
    case: Case
    lower_s: float | None
    upper_s: float | None
    trace_s: float | None
    compute_s: float | None
    comm_s: float | None
    compile_s: float
    how: str                        # "TPU v5p:4x4x4 AOT" or "64 fake CPU devices"
    memory: str
    parts: dict[str, float]         # compute seconds by kind, see compute_parts

    def error(self, which: str = "trace_s") -> float | None:
        value = getattr(self, which)
        return None if value is None else value / self.case.published_s - 1


def _compile_kwargs(case: Case, fake: bool) -> dict:
    """How a case compiles: a TPU case for its topology through libtpu, a GPU case for its
    GPUs through XLA's GPU compiler (the gpu extra), or, with --fake, on fake CPU devices."""
    if fake:
        return {"compile_for": "cpu"}
    if case.topology is not None:
        return {"tpu_topology": case.topology}
    return {"target": case.target}


def predict(case: Case, fake: bool, timeout: float) -> Prediction:
    kw = _compile_kwargs(case, fake)
    start = time.perf_counter()
    fallback = ""
    try:
        report = explorer.analyze_workload("transformer_train", case.mesh, preset=case.preset,
                                           params=case.params, timeout=timeout,
                                           use_cache=False, **kw)
    except explorer.CompileError as e:
        if "tpu_topology" not in kw or "RESOURCE_EXHAUSTED" not in str(e):
            raise
        # The TPU compiler refuses a program whose temporaries exceed HBM; the published run
        # fit (its attention was a flash kernel, which never holds the [seq, seq] scores).
        fallback = str(e).split("RESOURCE_EXHAUSTED: ")[-1].rstrip(".")
        log(f"{case.name}: the TPU compile failed ({fallback}); compiling on fake CPU devices")
        kw = {}
        report = explorer.analyze_workload("transformer_train", case.mesh, preset=case.preset,
                                           params=case.params, timeout=timeout,
                                           use_cache=False)
    compile_s = time.perf_counter() - start
    # The matmuls run in compute_dtype; analyze_workload's target would take the dtype of the
    # largest input (the float32 params), whose peak an A100 quotes at 19.5 TFLOP/s.
    report = with_target(report, case.target, dtype=case.params["compute_dtype"])
    est = report.estimate
    for note in est.notes:
        if "trip count could not be read" in note or "could not be timed" in note:
            log(f"{case.name}: {note}")
    how = (f"TPU {case.topology} ahead of time" if report.backend.startswith("tpu") else
           f"{report.mesh.device_count} × {report.device_kind} ahead of time"
           if report.backend == "gpu" else f"{report.mesh.device_count} fake CPU devices")
    if fallback:
        how += f" (the TPU {case.topology} compile: {fallback})"
    verdict = report.memory_verdict
    if verdict is not None and not verdict.fits:
        # The compiler stopped at its memory check; the schedule read is the one it had then,
        # after rematerialising what it could to fit.
        how += (f"; **out of memory**: {verdict.message.split('RESOURCE_EXHAUSTED: ')[-1]} "
                "(timed on the schedule the compiler stopped with)")
    memory = est.memory.text if est.memory is not None else ""
    return Prediction(case, est.step_lower_seconds, est.step_upper_seconds,
                      est.step_trace_seconds, est.compute_seconds, est.comm_seconds, compile_s,
                      how, memory, compute_parts(report, case))


def compute_parts(report, case: Case) -> dict[str, float]:
    """The estimate's compute time split by what the instructions do, each at its roofline
    max(FLOPs / peak, bytes / HBM bandwidth) as the estimate sums them: `attention` is the flash
    kernel's code (attention=fused: no bytes, the causal half of the FLOPs) or touches the
    [.., seq, seq] scores (an array of rank 4 or more ending in seq, seq); `matmul` is the other
    instructions with FLOPs; `other` the rest (elementwise, norms, the optimizer, copies). A
    TPU fusion that fuses a projection's matmul with kernel code is timed as kernel code (no
    bytes); its time is split between the two by their FLOPs."""
    # The rates the estimate used: measured achievable fractions of the peaks (not --peak).
    peak = report.estimate.compute.peak_flops
    bandwidth = report.estimate.compute.memory_bandwidth
    seq = case.params["seq"]
    names = read_schedule(report.optimized_hlo)
    by_name = names.module.by_name()
    parts = {"matmul": 0.0, "attention": 0.0, "other": 0.0}

    def scores(instr) -> bool:
        arrays = list(instr.arrays) + [a for o in instr.operands if o in by_name
                                       for a in by_name[o].arrays]
        return any(len(a.dims) >= 4 and tuple(a.dims[-2:]) == (seq, seq) for a in arrays)

    def walk(steps, runs):
        for s in steps:
            if s.kind is StepKind.LOOP:
                walk(s.body, runs * (s.trips or 1))
            elif s.kind in MATH_KINDS and (s.flops or s.bytes):
                seconds = runs * roofline_seconds(s.flops, s.bytes, peak, bandwidth)
                if s.fused_kernel and s.flops:
                    share = min(1.0, s.kernel_flops / s.flops)
                    parts["attention"] += share * seconds
                    parts["matmul"] += (1 - share) * seconds
                    continue
                kind = ("attention" if s.fused_kernel or scores(s.instr)
                        else "matmul" if s.flops else "other")
                parts[kind] += seconds

    walk(names.steps, 1)
    return parts


def _s(value: float | None) -> str:
    return "?" if value is None else f"{value:.2f}"


def _pct(value: float | None) -> str:
    return "?" if value is None else f"{value:+.0%}"


def ranks(values: list[float]) -> list[int]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0] * len(values)
    for rank, i in enumerate(order):
        out[i] = rank
    return out


def swapped(a: list[float], b: list[float]) -> list[tuple[int, int]]:
    """The pairs of cases (i, j) that `a` and `b` order differently."""
    n = len(a)
    return [(i, j) for i in range(n) for j in range(i + 1, n) if (a[i] - a[j]) * (b[i] - b[j]) < 0]


def discordant_pairs(a: list[float], b: list[float]) -> int:
    """How many pairs of cases `a` and `b` order differently (0: the ranking is preserved)."""
    return len(swapped(a, b))


def table(preds: list[Prediction]) -> str:
    lines = ["| case | published | published step (s) | predicted step, trace (s) | "
             "error | full overlap .. none (s) | compute / comm (s) | compiled on, wall |",
             "|---|---|---|---|---|---|---|---|"]
    for p in preds:
        c = p.case
        lines.append(
            f"| `{c.name}` | {c.quoted} | {c.published_s:.2f} | {_s(p.trace_s)} | "
            f"{_pct(p.error())} | {_s(p.lower_s)} .. {_s(p.upper_s)} | "
            f"{_s(p.compute_s)} / {_s(p.comm_s)} | {p.how}, {p.compile_s:.0f} s |")
    lines += ["", "Where the predicted step goes (seconds; compute split as `compute_parts` says, "
              "`exposed comm` = trace - compute):", "",
              "| case | published | matmul | attention kernel or scores | other compute "
              "| exposed comm | trace | matmul alone vs published |",
              "|---|---|---|---|---|---|---|---|"]
    for p in preds:
        exposed = (p.trace_s - p.compute_s) if p.trace_s and p.compute_s else None
        lines.append(
            f"| `{p.case.name}` | {p.case.published_s:.2f} | {p.parts['matmul']:.2f} | "
            f"{p.parts['attention']:.2f} | {p.parts['other']:.2f} | {_s(exposed)} | "
            f"{_s(p.trace_s)} | {p.parts['matmul'] / p.case.published_s - 1:+.0%} |")
    lines.append("")
    for which, label in (("trace_s", "trace"), ("lower_s", "full-overlap bound"),
                         ("upper_s", "no-overlap bound")):
        errors = [p.error(which) for p in preds]
        if None in errors or not errors:
            lines.append(f"- {label}: not every case has one")
            continue
        published = [p.case.published_s for p in preds]
        predicted = [getattr(p, which) for p in preds]
        bad = discordant_pairs(published, predicted)
        lines.append(f"- {label}: median absolute error "
                     f"{statistics.median(abs(e) for e in errors):.0%} over {len(errors)} "
                     f"cases (min {min(errors):+.0%}, max {max(errors):+.0%}); ranking by step "
                     f"time {'preserved' if bad == 0 else f'not preserved: {bad} of '}"
                     f"{'' if bad == 0 else f'{len(preds) * (len(preds) - 1) // 2} pairs swap'}")
        if which == "trace_s" and bad:
            # Which pairs, and how far apart their published times are: a swap of two runs
            # within a few percent of each other says less than one of runs 2x apart.
            gaps = [(preds[i].case.name, preds[j].case.name,
                     max(published[i], published[j]) / min(published[i], published[j]) - 1)
                    for i, j in swapped(published, predicted)]
            lines.append("  swapped (published times apart by): " + "; ".join(
                f"`{x}` / `{y}` ({g:.0%})" for x, y, g in sorted(gaps, key=lambda t: t[2])))
    return "\n".join(lines)


def sources(cases: list[Case]) -> str:
    lines = ["| case | published figure (source) | configuration | transformer_train | mesh, "
             "preset, target | published step time |", "|---|---|---|---|---|---|"]
    for c in cases:
        shown = ", ".join(f"{k}={v}" for k, v in c.params.items())
        lines.append(f"| `{c.name}` | {c.quoted} ({c.source}) | {c.config}; {'; '.join(c.notes)} "
                     f"| {shown} | `{c.mesh}`, {c.preset}, `{c.target}` | {c.arithmetic} |")
    return "\n".join(lines)


# --- compile time against depth --------------------------------------------------------------

def compile_seconds(params: dict, mesh: str, preset: str, timeout: float) -> float:
    start = time.perf_counter()
    explorer.analyze_workload("transformer_train", mesh, preset=preset, params=params,
                              use_cache=False, timeout=timeout)
    return time.perf_counter() - start


def depth_table(timeout: float) -> str:
    """Wall time of analyze_workload (lower, compile, report) against layers, scanned and
    unrolled, on transformer_train's small defaults under fsdp on 8 fake devices; then one
    real-size model (MaxText 16B, 32 layers) on 256 fake devices."""
    compile_seconds({"layers": 1}, "data=8", "fsdp", timeout)      # warm the worker
    rows, base = [], {}
    for layers in (2, 4, 8, 16, 32, 64):
        row = [layers]
        for scan in (True, False):
            log(f"depth: layers={layers} scan_layers={scan}")
            s = compile_seconds({"layers": layers, "scan_layers": scan}, "data=8", "fsdp", timeout)
            base.setdefault(scan, s)
            row += [s, s / base[scan]]
        rows.append(row)
    lines = ["| layers | scanned (s) | scanned / 2 layers | unrolled (s) | unrolled / 2 layers "
             "| unrolled / scanned |", "|---|---|---|---|---|---|"]
    lines += [f"| {n} | {a:.2f} | {ra:.2f} | {b:.2f} | {rb:.2f} | {b / a:.1f} |"
              for n, a, ra, b, rb in rows]
    big = {**MAXTEXT_MODEL, **maxtext_dims(16), "batch": 1536, "remat": "full"}
    log("depth: MaxText 16B on 256 fake devices, scanned")
    scanned = compile_seconds(big, "data=256", "fsdp", timeout)
    log("depth: MaxText 16B on 256 fake devices, unrolled")
    unrolled = compile_seconds({**big, "scan_layers": "false"}, "data=256", "fsdp", timeout)
    lines += ["", f"MaxText 16B (32 layers, d_model 5120) under fsdp on 256 fake CPU devices: "
              f"scanned {scanned:.0f} s, unrolled {unrolled:.0f} s "
              f"({unrolled / scanned:.1f}x)."]
    return "\n".join(lines)


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", metavar="NAME",
                    help="run only this case (repeatable); cases: " +
                         ", ".join(c.name for c in CASES))
    ap.add_argument("--fake", action="store_true",
                    help="compile every case on fake CPU devices instead of for its target")
    ap.add_argument("--attention", choices=("fused", "plain"), default="fused",
                    help="fused (default): the attention core timed as a causal flash kernel, as "
                         "the published runs used; plain: its score traffic and whole square "
                         "counted, as the compiled program does it")
    ap.add_argument("--depth", action="store_true", help="only the compile-time-vs-depth table")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per compile")
    args = ap.parse_args()
    if args.depth:
        print(depth_table(args.timeout))
        return 0
    cases = CASES
    if args.only:
        unknown = [n for n in args.only if n not in {c.name for c in CASES}]
        if unknown:
            ap.error(f"unknown case {unknown[0]!r}; cases: {', '.join(c.name for c in CASES)}")
        cases = [c for c in CASES if c.name in args.only]
    cases = [replace(c, params={**c.params, "attention": args.attention}) for c in cases]
    preds = []
    for i, case in enumerate(cases, 1):
        where = ("fake CPU devices" if args.fake else case.topology if case.topology
                 else f"{case.target}, XLA's GPU compiler")
        log(f"[{i}/{len(cases)}] {case.name}: compiling on {case.mesh} ({where})")
        p = predict(case, args.fake, args.timeout)
        log(f"[{i}/{len(cases)}] {case.name}: published {case.published_s:.2f} s, predicted "
            f"{_s(p.trace_s)} s ({_pct(p.error())}), {p.compile_s:.0f} s")
        preds.append(p)
    print(sources(cases))
    print()
    print(table(preds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
