"""Predicted against published step times: public training measurements whose whole
configuration `transformer_train` expresses, predicted with explorer, and the error.

Run by hand (this 2-core machine: under a minute a case; TPU cases compile ahead of time for
the real topology through libtpu):

    .venv/bin/python benchmarks/published.py                  # every case, a markdown table
    .venv/bin/python benchmarks/published.py --only maxtext-v5p-32b
    .venv/bin/python benchmarks/published.py --fake           # every case on fake CPU devices
    .venv/bin/python benchmarks/published.py --attention plain   # no flash-kernel timing
    .venv/bin/python benchmarks/published.py --depth          # compile time against depth
    .venv/bin/python benchmarks/published.py --only CASE --save DIR    # keep each Report
    .venv/bin/python benchmarks/published.py --load DIR       # the tables of the cases kept

Progress goes to stderr, the tables to stdout (docs/performance.md, "Predicted against
published step times"). Nothing is fitted: the prediction is explorer's estimate with the
catalog's sourced peaks and link speeds, and the published step time is derived from the
published figure by the arithmetic printed beside it.
"""

from __future__ import annotations

import argparse
import math
import os
import pickle
import statistics
import sys
import time
from dataclasses import dataclass, field, replace

import explorer
from explorer._src.cost.catalog.names import get_target
from explorer._src.cost.compute import roofline_seconds
from explorer._src.cost.gemm_rates import gemm_table
from explorer._src.hlo.schedule import MATH_KINDS, StepKind, read_schedule
from explorer._src.report.predict import with_target
from explorer._src.report.provenance import compiled_by
from explorer._src.units import format_bytes
from explorer._src.workloads.models import TRANSFORMER_TRAIN

MAXTEXT_COMMIT = "76bd53b0f"   # AI-Hypercomputer/maxtext, 2023-12-15: the tables and configs
MAXTEXT = f"https://github.com/AI-Hypercomputer/maxtext/blob/{MAXTEXT_COMMIT}/MaxText/configs"
TORCHTITAN_COMMIT = "395a52627"    # pytorch/torchtitan, 2024-04-18: docs/performance.md
TORCHTITAN3_COMMIT = "1ea476e9f"   # 2024-04-24: the Llama 3 rows added
TORCHTITAN = "https://github.com/pytorch/torchtitan/blob/{}/docs/performance.md"
JAX_TOOLBOX_COMMIT = "db0968810"   # NVIDIA/JAX-Toolbox, 2024-05-01: the MaxText README's table
JAX_TOOLBOX = ("https://github.com/NVIDIA/JAX-Toolbox/blob/"
               f"{JAX_TOOLBOX_COMMIT}/rosetta/rosetta/projects/maxtext")
MAXTEXT_A3_COMMIT = "efb6d9e4a"    # AI-Hypercomputer/maxtext, 2024-04-09: the A3 README, 1vm.sh
MAXTEXT_A3 = ("https://github.com/AI-Hypercomputer/maxtext/blob/"
              f"{MAXTEXT_A3_COMMIT}/MaxText/configs/a3/llama_2_7b")
LLM_FOUNDRY_COMMIT = "b2a43a147"   # mosaicml/llm-foundry, 2023-10-19: the H100 80GB BF16 table
LLM_FOUNDRY = f"https://github.com/mosaicml/llm-foundry/blob/{LLM_FOUNDRY_COMMIT}/scripts/train"

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


def maxtext_flops(params: dict, per_device_batch: int) -> tuple[float, str]:
    """The FLOPs of one step on one device as MaxText counts them for its TFLOP/s/device
    (calculate_tflops_training_per_device, the same at 76bd53b0f and efb6d9e4a; PaLM,
    arXiv:2204.02311, App. B): 6·N·S·b for the weights plus 12·H·L·d_head·S²·b/2 for causal
    attention; and that sum written out with the case's numbers."""
    n, s, b = param_count(params), params["seq"], per_device_batch
    h, layers, d_head = params["heads"], params["layers"], params["d_head"]
    flops = 6 * n * s * b + 6 * h * layers * d_head * s * s * b
    return flops, (f"(6·{n / 1e9:.2f}e9·{s}·{b} + 6·{h}·{layers}·{d_head}·{s}²·{b})")


def maxtext_case(gen: str, scale: int, slice_name: str, chips: int, per_device_batch: int,
                 remat: str, fsdp: int, tensor: int, mfu: float, tflops: int, topology: str,
                 target: str, script: str) -> Case:
    dims = maxtext_dims(scale)
    params = {**MAXTEXT_MODEL, **dims, "batch": per_device_batch * chips, "remat": remat}
    b = per_device_batch
    flops, written = maxtext_flops(params, b)
    step = flops / (mfu * PEAK[gen])
    mesh = f"data={fsdp}" if tensor == 1 else f"data={fsdp},model={tensor}"
    table = (f"{MAXTEXT}/{gen}/README.md" if gen == "v5p" else f"{MAXTEXT}/v5e/README.md")
    return Case(
        f"maxtext-{gen}-{scale}b", f"{table} (`{scale}B model`, `1x {slice_name}` row)",
        f"{MAXTEXT}/{gen}/{script}",
        f"{tflops} TFLOP/s/chip, MFU {mfu:.2%}", params, mesh,
        "fsdp" if tensor == 1 else "2d", target, topology, step,
        f"(6·N·S·b + 6·H·L·d_head·S²·b) / (MFU·peak) = {written} / "
        f"({mfu:.4f}·{PEAK[gen] / 1e12:.0f}e12) = {step:.3f} s",
        notes=(f"per_device_batch_size={b}, remat_policy={remat}, ici_fsdp={fsdp}, "
               f"ici_tensor={tensor}, attention=flash",))


# --- torchtitan, April 2024: Llama on 64 A100 80GB with FSDP2 -----------------------------------

# torchtitan's Llama (torchtitan/models/llama at 395a52627/1ea476e9f): RMSNorm, SwiGLU with
# ffn = multiple_of·ceil(ffn_dim_multiplier·(8/3)·dim / multiple_of), untied output; FSDP2
# MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32): float32 params gathered
# and computed in bfloat16, AdamW state float32. Attention is SDPA's flash kernel: fused.
# PyTorch runs each layer as a module of its own, FSDP prefetching the next one's all-gather
# while this one computes: an unrolled program (scan_layers=false), whose collectives XLA's
# scheduler can overlap with the neighbouring layers. In a scanned loop XLA's GPU defaults
# leave each layer's all-gather in front of its matmuls.
PYTORCH_LAYERS = {"scan_layers": "false"}
TORCHTITAN_MODEL = {"mlp": "swiglu", "dtype": "float32", "compute_dtype": "bfloat16",
                    **PYTORCH_LAYERS, "attention": "fused"}
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


# --- MaxText on 8 H100s, 2024: Llama 2 7B with FSDP (NVIDIA's JAX-Toolbox and MaxText's A3) ---

# MaxText's llama2-7b (configs/models/llama2-7b.yml at efb6d9e4a): decoder_block llama2 (RMSNorm,
# attention, RMSNorm, MLP), mlp_activations ["silu", "linear"] (SwiGLU), logits_via_embedding
# False (an untied output), base.yml's float32 weights cast to dtype bfloat16 and AdamW state in
# float32. Both runs set use_iota_embed=true (a one-hot matmul, as transformer_train embeds),
# scan_layers=false, max_target_length=4096, attention=cudnn_flash_te (cuDNN's flash kernel:
# attention=fused) and remat_policy=minimal_flash: minimal (checkpoint_dots_with_no_batch_dims,
# transformer_train's remat=minimal) plus the flash output 'context' saved.
LLAMA2_7B = {"vocab": 32000, "d_model": 4096, "heads": 32, "d_head": 128, "d_ff": 11008,
             "layers": 32}
MAXTEXT_GPU_MODEL = {**LLAMA2_7B, "seq": 4096, "mlp": "swiglu", "dtype": "float32",
                     "compute_dtype": "bfloat16", "scan_layers": "false", "attention": "fused",
                     "remat": "minimal"}
MAXTEXT_GPU_NOTES = ("model_name=llama2-7b, remat_policy=minimal_flash, "
                     "attention=cudnn_flash_te, use_iota_embed=true, scan_layers=false, "
                     "ici_fsdp 8 (one node of 8 H100 80GB SXM on NVLink)")


def jax_toolbox_case() -> Case:
    """NVIDIA's MaxText table: the step time is printed."""
    gpus, b, step = 8, 2, 0.721
    return Case(
        "jaxtoolbox-maxtext-llama2-7b",
        f"{JAX_TOOLBOX}/README.md (LLaMA table, `7B | H100 80G SXM | BF16 | 4096 | 8 | 2` row)",
        f"{JAX_TOOLBOX}/scripts/example_slurm.sub",
        "Step Time (s) 0.721, Sequences/Sec 22.19", {**MAXTEXT_GPU_MODEL, "batch": b * gpus},
        f"data={gpus}", "fsdp", "h100-8", None, step,
        f"the step time as printed: {step} s (GBS 16 / {step} s = 22.19 sequences/s, the "
        "table's last column)",
        notes=(f"per_device_batch_size={b}, {MAXTEXT_GPU_NOTES}",))


def maxtext_a3_case() -> Case:
    """MaxText's A3 table: TFLOP/s per chip, as train.py counts them."""
    gpus, b, tflops = 8, 4, 492
    params = {**MAXTEXT_GPU_MODEL, "batch": b * gpus}
    flops, written = maxtext_flops(params, b)
    step = flops / (tflops * 1e12)
    return Case(
        "maxtext-a3-llama2-7b", f"{MAXTEXT_A3}/README.md (`1x A3 (h100-80gb-8)` row)",
        f"{MAXTEXT_A3}/1vm.sh", f"{tflops} TFLOP/sec/chip", params, f"data={gpus}", "fsdp",
        "h100-8", None, step,
        f"(6·N·S·b + 6·H·L·d_head·S²·b) / (TFLOP/s) = {written} / {tflops}e12 = {step:.3f} s",
        notes=(f"per_device_batch_size={b}, {MAXTEXT_GPU_NOTES}",))


# --- MosaicML's MPT on H100 80GB, October 2023 (llm-foundry's benchmark table) ----------------

# MPT (llm-foundry v0.3.0, the branch submit_benchmarks.py installs): d_head 128, expansion_ratio
# 4 (a GELU MLP of 4·d_model), vocab 50368, logits through the embedding (tied), attn_impl triton
# (a flash kernel: attention=fused). precision amp_bf16 with FSDP mixed_precision DEFAULT:
# float32 params computed in bfloat16; decoupled_adamw, float32 state. Only the rows with
# GradAccum 1 (one micro-batch a step, as transformer_train steps) and activation checkpointing
# False. Not expressed: MPT's learned position embedding (max_seq_len·d_model params) and
# biases (0.1% of the params), LayerNorm (RMSNorm here), and nn.Embedding's gather (the one-hot
# matmul here adds 4·vocab·d_model FLOPs a token: 1.3 to 2% of 6·N).
MPT_MODEL = {"seq": 2048, "vocab": 50368, "mlp": "gelu", "tied_embed": "true",
             "dtype": "float32", "compute_dtype": "bfloat16", **PYTORCH_LAYERS,
             "attention": "fused", "remat": "none"}
MPT_SIZES = {"7b": (4096, 32, 32), "13b": (5120, 40, 40)}   # d_model, n_heads, n_layers


def mpt_case(size: str, gpus: int, micro_batch: int, tokens_per_gpu: int, row: str) -> Case:
    d_model, heads, layers = MPT_SIZES[size]
    params = {**MPT_MODEL, "d_model": d_model, "heads": heads, "d_head": d_model // heads,
              "d_ff": 4 * d_model, "layers": layers, "batch": micro_batch * gpus}
    seq = params["seq"]
    # Throughput (T/s/GPU) is tokens a second over the GPUs; with GradAccum 1 a step is one
    # micro-batch of micro_batch·seq tokens on each GPU.
    step = micro_batch * seq / tokens_per_gpu
    network = () if gpus == 8 else (
        f"{gpus // 8} nodes of 8: the source does not name the network between them; priced on "
        "the catalog's DGX H100 (400 Gb/s InfiniBand per GPU)",)
    return Case(
        f"mpt-{size}-{gpus}xh100", f"{LLM_FOUNDRY}/benchmarking/README.md (H100 80GB BF16 table, "
        f"`{row}` row)", f"{LLM_FOUNDRY}/yamls/pretrain/mpt-{size}.yaml, "
        f"{LLM_FOUNDRY}/benchmarking/submit_benchmarks.py",
        f"{tokens_per_gpu} T/s/GPU", params, f"data={gpus}", "fsdp",
        "h100-8" if gpus == 8 else f"h100-8x{gpus // 8}", None, step,
        f"MicroBatchSize·SeqLen / (T/s/GPU) = {micro_batch}·{seq} / {tokens_per_gpu} = "
        f"{step:.3f} s",
        notes=(f"MicroBatchSize {micro_batch}, GradAccum 1, FULL_SHARD over {gpus} GPUs, "
               "activation checkpointing False, amp_bf16, attn_impl triton", *network))


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
    jax_toolbox_case(),
    maxtext_a3_case(),
    mpt_case("7b", 8, 6, 10643, "7b | 2048 | 8 | h100_80gb | 46.44"),
    mpt_case("13b", 8, 2, 4792, "13b | 2048 | 8 | h100_80gb | 39.79"),
    mpt_case("13b", 64, 2, 4800, "13b | 2048 | 64 | h100_80gb | 39.86"),
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
    compile_s: float                # wall time of analyze_workload: lower, compile, report
    compiled_on: str                # the Report's provenance, e.g. "compiled for 8 × NVIDIA ..."
    fits: bool | None               # the memory verdict: does one device's program fit its chip
    memory: str                     # that verdict in words, with the bytes
    aliased: int | None             # bytes of the donated state the new state was written into
    parts: dict[str, float]         # compute seconds by kind, see compute_parts
    # The matmuls' FLOPs over their time (each at its roofline), of the chip's nominal peak
    matmul_fraction: float | None
    kernel_rate: float | None = None    # FLOP/s of the flash kernel's code, as timed

    def implied_matmul_fraction(self) -> float | None:
        """The fraction of the chip's nominal peak the matmuls would have to run at for the
        prediction to equal the published step, the rest of the prediction (attention, other
        compute, exposed communication) kept; None where the rest alone exceeds it."""
        if self.trace_s is None or not self.parts["matmul"] or self.matmul_fraction is None:
            return None
        matmul_s = self.case.published_s - (self.trace_s - self.parts["matmul"])
        return self.matmul_fraction * self.parts["matmul"] / matmul_s if matmul_s > 0 else None

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


def memory_verdict(report, refused: str = "") -> tuple[bool | None, str]:
    """Whether the compiled program fits one chip of the case's target, and why, in words, each
    side in its compiler's own terms (the train step's state donated, as a training loop
    donates it; every published run fit, so the verdict is right where it says it fits):

    - a TPU compile: libtpu's own memory check, which refuses a program over its available HBM
      (`refused`, or the Report's memory verdict where it stopped there) and passes one under
      it. The bytes of XLA's memory analysis (Memory.total) are shown beside it: they count the
      temporaries' whole allocation and can exceed what libtpu accepted (`live` is the most
      bytes live at one step, from the buffer assignment's live ranges);
    - a GPU compile: Memory.total, the bytes XLA allocates, against the bytes CUDA gives a
      program (`Chip.capacity`); XLA's GPU compiler checks nothing ahead of time."""
    verdict = report.memory_verdict
    if refused or (verdict is not None and not verdict.fits):
        message = refused or verdict.message.split("RESOURCE_EXHAUSTED: ")[-1]
        return False, f"does not fit: the compiler refused it ({message.rstrip('.')})"
    fit = report.estimate.memory
    if fit is None:
        return None, "no memory figure"
    shown = (f"{format_bytes(fit.bytes)} of {format_bytes(fit.capacity)} "
             f"({fit.fraction:.0%})")
    if report.ahead_of_time and report.backend.startswith("tpu"):
        timeline = report.memory_timeline
        live = (f", {format_bytes(timeline.peak.bytes)} live at the peak"
                if timeline is not None else "")
        return True, f"fits: libtpu's memory check passed it; memory analysis {shown}{live}"
    return fit.fits, f"{shown}: {'fits' if fit.fits else 'does not fit'}"


def compile_case(case: Case, fake: bool, timeout: float) -> tuple[object, float, str]:
    """The case's Report priced on its target, the wall time of its compile, and libtpu's
    refusal where the TPU compile refused it ("" otherwise)."""
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
        # fit. Its time is then read from the CPU's program.
        fallback = str(e).split("RESOURCE_EXHAUSTED: ")[-1].rstrip(".")
        log(f"{case.name}: the TPU compile failed ({fallback}); compiling on fake CPU devices")
        report = explorer.analyze_workload("transformer_train", case.mesh, preset=case.preset,
                                           params=case.params, timeout=timeout,
                                           use_cache=False, compile_for="cpu")
    compile_s = time.perf_counter() - start
    # The matmuls run in compute_dtype; analyze_workload's target would take the dtype of the
    # largest input (the float32 params), whose peak an A100 quotes at 19.5 TFLOP/s.
    return with_target(report, case.target, dtype=case.params["compute_dtype"]), compile_s, fallback


def saved_case(folder: str, case: Case) -> tuple[object, float, str] | None:
    """What `--save` kept of the case in `folder`: (report, compile seconds, refusal), or None."""
    path = os.path.join(folder, f"{case.name}.pickle")
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        return pickle.load(f)


def predict(case: Case, fake: bool, timeout: float, save: str | None = None,
            load: str | None = None) -> Prediction:
    kept = saved_case(load, case) if load else None
    report, compile_s, fallback = kept or compile_case(case, fake, timeout)
    if kept is not None:    # priced again: the cost model may have changed since it was kept
        report = with_target(report, case.target, dtype=case.params["compute_dtype"])
    if save and kept is None:
        os.makedirs(save, exist_ok=True)
        with open(os.path.join(save, f"{case.name}.pickle"), "wb") as f:
            pickle.dump((report, compile_s, fallback), f)
    est = report.estimate
    for note in est.notes:
        if "trip count could not be read" in note or "could not be timed" in note:
            log(f"{case.name}: {note}")
    compiled_on = compiled_by(report)
    if fallback:
        compiled_on += f" (the TPU {case.topology} compile refused it)"
    verdict = report.memory_verdict
    if verdict is not None and not verdict.fits:
        # The compiler stopped at its memory check; the schedule read is the one it had then,
        # after rematerialising what it could to fit.
        compiled_on += "; timed on the schedule the compiler stopped with at its memory check"
    fits, memory = memory_verdict(report, fallback)
    aliased = report.memory.aliased if report.memory is not None else None
    nominal = get_target(case.target).chip.peak_flops.get(est.compute.peak_dtype)
    parts = compute_parts(report, case)
    matmul_flops = parts.pop("matmul_flops")
    kernel_flops, kernel_s = parts.pop("kernel_flops"), parts.pop("kernel_seconds")
    rate = matmul_flops / parts["matmul"] if parts["matmul"] else None
    return Prediction(case, est.step_lower_seconds, est.step_upper_seconds,
                      est.step_trace_seconds, est.compute_seconds, est.comm_seconds, compile_s,
                      compiled_on, fits, memory, aliased, parts,
                      rate / nominal if nominal and rate else None,
                      kernel_flops / kernel_s if kernel_s else None)


def compute_parts(report, case: Case) -> dict[str, float]:
    """The estimate's compute time split by what the instructions do, each at its roofline
    max(FLOPs / peak, bytes / HBM bandwidth) as the estimate sums them: `attention` is the flash
    kernel's code (attention=fused: no bytes, the causal half of the FLOPs) or touches the
    [.., seq, seq] scores (an array of rank 4 or more ending in seq, seq); `matmul` is the other
    instructions with FLOPs; `other` the rest (elementwise, norms, the optimizer, copies). A
    TPU fusion that fuses a projection's matmul with kernel code is timed as kernel code (no
    bytes); its time is split between the two by their FLOPs. `matmul_flops`: the FLOPs of
    `matmul`'s instructions; `kernel_flops`, `kernel_seconds`: the flash kernel's code's."""
    # The rates the estimate used: measured achievable fractions of the peaks (not --peak), and
    # XLA's measured GEMM rates per shape on the GPUs XLA measured.
    peak = report.estimate.compute.peak_flops
    bandwidth = report.estimate.compute.memory_bandwidth
    table = gemm_table(report.estimate.compute.gemm_table)
    seq = case.params["seq"]
    names = read_schedule(report.optimized_hlo)
    by_name = names.module.by_name()
    parts = {"matmul": 0.0, "attention": 0.0, "other": 0.0, "matmul_flops": 0.0,
             "kernel_flops": 0.0, "kernel_seconds": 0.0}

    def scores(instr) -> bool:
        arrays = list(instr.arrays) + [a for o in instr.operands if o in by_name
                                       for a in by_name[o].arrays]
        return any(len(a.dims) >= 4 and tuple(a.dims[-2:]) == (seq, seq) for a in arrays)

    def walk(steps, runs):
        for s in steps:
            if s.kind is StepKind.LOOP:
                walk(s.body, runs * (s.trips or 1))
            elif s.kind in MATH_KINDS and (s.flops or s.bytes):
                seconds = runs * roofline_seconds(s.flops, s.bytes, peak, bandwidth, s.dots,
                                                  table)
                if s.fused_kernel and s.flops:
                    share = min(1.0, s.kernel_flops / s.flops)
                    parts["attention"] += share * seconds
                    parts["kernel_flops"] += share * runs * s.flops
                    parts["kernel_seconds"] += share * seconds
                    parts["matmul"] += (1 - share) * seconds
                    parts["matmul_flops"] += (1 - share) * runs * s.flops
                    continue
                kind = ("attention" if s.fused_kernel or scores(s.instr)
                        else "matmul" if s.flops else "other")
                parts[kind] += seconds
                if kind == "matmul":
                    parts["matmul_flops"] += runs * s.flops

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


# Issue 19's target for the trace: median absolute error, the largest one, and the memory
# verdict right on every case (each published run fit its chips).
TARGET_MEDIAN, TARGET_MAX = 0.12, 0.25


def target_check(preds: list[Prediction]) -> list[str]:
    """Whether the predicted traces meet the target, one line each: the median and the largest
    absolute error, and on how many cases the memory verdict is right (says it fits)."""
    errors = [abs(e) for e in (p.error() for p in preds) if e is not None]
    if not errors:
        return ["- target: no case has a predicted trace"]
    median, worst = statistics.median(errors), max(errors)
    beyond = [p.case.name for p in preds if p.error() is not None
              and abs(p.error()) > TARGET_MAX]
    wrong = [p.case.name for p in preds if p.fits is not True]

    def met(ok: bool) -> str:
        return "met" if ok else "**not met**"

    return [
        f"- target median absolute error <= {TARGET_MEDIAN:.0%}: {median:.1%} over "
        f"{len(errors)} of {len(preds)} cases, {met(median <= TARGET_MEDIAN)}",
        f"- target no case beyond {TARGET_MAX:.0%}: largest {worst:.1%}, "
        f"{met(not beyond)}" + (f" ({', '.join(f'`{n}`' for n in beyond)})" if beyond else ""),
        f"- target memory verdict right on every case (each run fit): right on "
        f"{len(preds) - len(wrong)} of {len(preds)}, {met(not wrong)}"
        + (f" (wrong: {', '.join(f'`{n}`' for n in wrong)})" if wrong else "")]


def table(preds: list[Prediction]) -> str:
    lines = ["| case | published | published step (s) | predicted step, trace (s) | "
             "error | full overlap .. none (s) | compute / comm (s) | compiled on | wall (s) "
             "| memory per device, state donated (the run fit) | state held once (aliased) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in preds:
        c = p.case
        lines.append(
            f"| `{c.name}` | {c.quoted} | {c.published_s:.2f} | {_s(p.trace_s)} | "
            f"{_pct(p.error())} | {_s(p.lower_s)} .. {_s(p.upper_s)} | "
            f"{_s(p.compute_s)} / {_s(p.comm_s)} | {p.compiled_on} | {p.compile_s:.0f} | "
            f"{p.memory} | "
            f"{'—' if p.aliased is None else format_bytes(p.aliased)} |")
    lines += ["", "Where the predicted step goes (seconds; compute split as `compute_parts` says, "
              "`exposed comm` = trace - compute):", "",
              "| case | published | matmul | attention kernel or scores (the kernel's rate) "
              "| other compute "
              "| exposed comm | trace | matmul alone vs published | matmuls timed at, "
              "would have to run at (of peak) |",
              "|---|---|---|---|---|---|---|---|---|"]
    for p in preds:
        exposed = (p.trace_s - p.compute_s) if p.trace_s and p.compute_s else None
        implied = p.implied_matmul_fraction()
        kernel = f" ({p.kernel_rate / 1e12:.0f} TFLOP/s)" if p.kernel_rate else ""
        lines.append(
            f"| `{p.case.name}` | {p.case.published_s:.2f} | {p.parts['matmul']:.2f} | "
            f"{p.parts['attention']:.2f}{kernel} | {p.parts['other']:.2f} | {_s(exposed)} | "
            f"{_s(p.trace_s)} | {p.parts['matmul'] / p.case.published_s - 1:+.0%} | "
            f"{'?' if p.matmul_fraction is None else f'{p.matmul_fraction:.0%}'}, "
            f"{'—' if implied is None else f'{implied:.0%}'} |")
    lines += ["", *target_check(preds), ""]
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
    ap.add_argument("--save", metavar="DIR",
                    help="pickle each case's Report to DIR/<case>.pickle, to read its buffers "
                         "(top_buffers, memory_timeline) afterwards without compiling again")
    ap.add_argument("--load", metavar="DIR",
                    help="take each case's Report from what --save wrote to DIR where it is "
                         "there, compiling only the others: the tables of runs made apart")
    ap.add_argument("--partial", metavar="FILE",
                    help="after each case, write the tables of the cases so far to FILE (a "
                         "long run on a loaded machine keeps what it finished)")
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
        p = predict(case, args.fake, args.timeout, save=args.save, load=args.load)
        log(f"[{i}/{len(cases)}] {case.name}: published {case.published_s:.2f} s, predicted "
            f"{_s(p.trace_s)} s ({_pct(p.error())}), {p.compile_s:.0f} s")
        preds.append(p)
        if args.partial:
            with open(args.partial, "w") as f:
                f.write(f"{sources(cases[:i])}\n\n{table(preds)}\n")
    print(sources(cases))
    print()
    print(table(preds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
