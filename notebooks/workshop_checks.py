"""Checks for the workshop's exercises (notebooks/00_*.ipynb ... 10_*.ipynb).

Each check works out the right answer on its own, from the formula the notebook teaches or by
compiling the program with plain jax and reading the collectives out of XLA's HLO text; it never
asks the explorer and trusts it. One exception, by design: 10's check_lean_layout asks whether a
layout is nearly as fast as the search's winner, and "fast" there is the explorer's cost model
(what the search ranks by), so it compiles the learner's layout anew with explorer.analyze.
Each check prints a verdict, with a hint when the answer is not right (yet), and returns True or
False; it never raises on a wrong or missing answer, so that a notebook always runs top to
bottom.

Plain jax needs 8 devices here: the notebooks set
XLA_FLAGS=--xla_force_host_platform_device_count=8 in their first cell, before jax is imported.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from fractions import Fraction

F32 = 4      # bytes per float32
BF16 = 2     # bytes per bfloat16


# ------------------------------------------------------------------ verdicts

def _verdict(ok: bool, right: str, hint: str) -> bool:
    print(("✓ Right: " + right) if ok else ("✗ Not yet. Hint: " + hint))
    return ok


def _stub(*args, **kwargs):
    ...


def _unwritten(fn) -> bool:
    """A function whose body is still the exercise's `...` (it compiles to the code of an
    empty function: return None)."""
    code = getattr(fn, "__code__", None)
    return code is not None and code.co_code == _stub.__code__.co_code \
        and code.co_consts in ((None,), ())


def _missing(answer) -> bool:
    if answer is None or answer is ... or _unwritten(answer):
        print("… No answer yet: replace the `...` in the cell above, run it, then run this one.")
        return True
    return False


def _number(answer) -> float | None:
    try:
        return float(answer)
    except (TypeError, ValueError):
        return None


def _close(answer, truth: float, rel: float = 1e-6) -> bool:
    value = _number(answer)
    return value is not None and math.isclose(value, truth, rel_tol=rel, abs_tol=1e-12)


def _check_number(answer, truth: float, right: str, hint: str, rel: float = 1e-6) -> bool:
    if _missing(answer):
        return False
    if _number(answer) is None:
        return _verdict(False, "", f"give a number, not {answer!r}. {hint}")
    return _verdict(_close(answer, truth, rel), right, hint)


# ------------------------------------------------------------------ plain jax

def _norm_spec(spec) -> tuple:
    """A spec as a tuple of entries (None, "axis" or a tuple of axes), from text like
    "data,None", "(data,model),None", "_,model", a tuple, or a jax PartitionSpec."""
    if spec is None:
        return ()
    if isinstance(spec, str):
        entries, depth, cur = [], 0, ""
        for ch in spec.replace(" ", ""):
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
            if ch == "," and depth == 0:
                entries.append(cur)
                cur = ""
            else:
                cur += ch
        entries.append(cur)
        out = []
        for e in entries:
            if e in ("", "None", "_"):
                out.append(None)
            elif e.startswith("("):
                axes = tuple(a for a in e.strip("()").split(",") if a)
                out.append(axes if len(axes) > 1 else (axes[0] if axes else None))
            else:
                out.append(e)
        return tuple(out) if any(e is not None for e in out) or len(out) > 1 else ()
    return tuple(spec)


def mesh(shape: Sequence[int], names: Sequence[str]):
    """A jax Mesh over the first prod(shape) devices, numbered row-major like the explorer's."""
    import jax
    import numpy as np

    n = math.prod(shape)
    return jax.sharding.Mesh(np.array(jax.devices()[:n]).reshape(tuple(shape)), tuple(names))


def sharding(m, spec):
    import jax

    return jax.sharding.NamedSharding(m, jax.sharding.PartitionSpec(*_norm_spec(spec)))


_COLLECTIVE = re.compile(r"\b(all-reduce|all-gather|reduce-scatter|all-to-all|"
                         r"collective-permute)(?:-start)?\(")


def collectives_of(fn: Callable, inputs: Sequence[tuple], mesh_shape: Sequence[int],
                   axis_names: Sequence[str]) -> list[str]:
    """The collectives XLA puts in `fn` compiled with plain jax: `inputs` is a list of
    (shape, spec) or (shape, spec, dtype); returns the kinds in program order."""
    import jax
    import jax.numpy as jnp

    m = mesh(mesh_shape, axis_names)
    args = []
    for item in inputs:
        shape, spec, dtype = (*item, jnp.float32) if len(item) == 2 else item
        args.append(jax.ShapeDtypeStruct(tuple(shape), dtype, sharding=sharding(m, spec)))
    with jax.set_mesh(m):       # so that a bare PartitionSpec in the program names this mesh
        text = jax.jit(fn).lower(*args).compile().as_text()
    return _COLLECTIVE.findall(text)


def shard_shape(shape, spec, mesh_shape, axis_names) -> tuple[int, ...]:
    return tuple(sharding(mesh(mesh_shape, axis_names), spec).shard_shape(tuple(shape)))


def device_blocks(shape, spec, mesh_shape, axis_names) -> dict[int, tuple]:
    """Device id -> its block as ((start, stop), ...) per dimension, from jax."""
    s = sharding(mesh(mesh_shape, axis_names), spec)
    out = {}
    for device, index in s.devices_indices_map(tuple(shape)).items():
        out[device.id] = tuple((sl.start or 0, shape[d] if sl.stop is None else sl.stop)
                               for d, sl in enumerate(index))
    return out


# ------------------------------------------------------------------ 00 quickstart

def check_quickstart_bytes(answer) -> bool:
    """The Megatron MLP's all-reduce: out = h @ w2 holds partial sums of [batch/|data|, d_model]
    floats on each device."""
    truth = 256 // 2 * 1024 * F32
    return _check_number(answer, truth, f"{truth} bytes: each device holds a partial sum of its "
                         "[128, 1024] float32 block of the output, and the all-reduce adds them.",
                         "the all-reduce carries the output block a device holds: batch/|data| "
                         "rows by d_model columns, 4 bytes each.")


def check_quickstart_shard(answer) -> bool:
    if _missing(answer):
        return False
    truth = shard_shape((1024, 4096), "None,model", (2, 4), ("data", "model"))
    ok = tuple(answer) == truth if isinstance(answer, Sequence) else False
    return _verdict(ok, f"{truth}: the columns are split 4 ways over `model`; the rows are "
                    "whole.", "a dimension split over an axis of size k keeps 1/k of its "
                    "length; a None dimension stays whole. Answer as a tuple (rows, cols).")


# ------------------------------------------------------------------ 01 mesh and specs

def check_shard_shape(answer, shape, spec, mesh_shape, axis_names) -> bool:
    if _missing(answer):
        return False
    truth = shard_shape(shape, spec, mesh_shape, axis_names)
    ok = isinstance(answer, Sequence) and tuple(answer) == truth
    return _verdict(ok, f"{truth}, as jax's NamedSharding.shard_shape says.",
                    "divide each dimension by the product of the sizes of the mesh axes its "
                    "spec entry names; (data,model) splits over both, data first.")


def check_replicas(answer, shape, spec, mesh_shape, axis_names) -> bool:
    if _missing(answer):
        return False
    blocks = device_blocks(shape, spec, mesh_shape, axis_names)
    counts = {}
    for block in blocks.values():
        counts[block] = counts.get(block, 0) + 1
    truth = next(iter(counts.values()))
    return _check_number(answer, truth, f"{truth}: every block is held by {truth} devices, the "
                         "devices that differ only along the mesh axes the spec does not use.",
                         "a block is repeated on every device whose coordinates differ only on "
                         "the mesh axes the spec leaves out; multiply their sizes.")


def check_device_block(answer, device, shape, spec, mesh_shape, axis_names) -> bool:
    if _missing(answer):
        return False
    truth = device_blocks(shape, spec, mesh_shape, axis_names)[device]
    try:
        given = tuple(tuple(int(v) for v in r) for r in answer)
    except (TypeError, ValueError):
        given = None
    return _verdict(given == truth, f"{truth}: jax's devices_indices_map gives the same.",
                    f"find device {device}'s coordinates on the mesh (devices are numbered "
                    "row-major over the mesh axes, the last axis fastest), then the block each "
                    "coordinate selects; answer half-open ranges ((start, stop), ...).")


# ------------------------------------------------------------------ 02 data parallel

def ring_all_reduce_bytes(v: float, n: int) -> float:
    """Bytes each device sends in a ring all-reduce of v bytes over n devices: a reduce-scatter
    and an all-gather, each n-1 steps of v/n (Patarasuk & Yuan 2009; Horovod, Sergeev & Del
    Balso 2018)."""
    return 2 * (n - 1) / n * v


def mlp_train_gradient_bytes(d_model=1024, d_ff=4096, bytes_per=F32) -> int:
    return (d_model * d_ff + d_ff * d_model) * bytes_per


def check_dp_gradient_bytes(answer) -> bool:
    truth = mlp_train_gradient_bytes()
    return _check_number(answer, truth, f"{truth} bytes: the gradients of w1 [1024,4096] and "
                         "w2 [4096,1024], float32, the same size as the weights.",
                         "data parallelism sums every weight's gradient; a gradient has its "
                         "weight's shape. Add the two weights' sizes, 4 bytes per element.")


def check_ring_bytes(answer, v: float = None, n: int = 8) -> bool:
    v = mlp_train_gradient_bytes() if v is None else v
    truth = ring_all_reduce_bytes(v, n)
    return _check_number(answer, truth, f"{truth:.0f} bytes = 2·(N−1)/N·V with N={n}: a "
                         "reduce-scatter then an all-gather, each N−1 steps of V/N.",
                         "in a ring of N devices the data is cut into N chunks; the "
                         "reduce-scatter phase takes N−1 steps and so does the all-gather "
                         "phase, each sending one chunk of V/N per step.", rel=1e-3)


def check_ring_time(answer, v: float = None, n: int = 8, bandwidth: float = 450e9) -> bool:
    v = mlp_train_gradient_bytes() if v is None else v
    truth = ring_all_reduce_bytes(v, n) / bandwidth
    return _check_number(answer, truth, f"{truth * 1e6:.1f} µs: bytes sent per device over the "
                         "link bandwidth (latency ignored).",
                         "divide the bytes each device sends (your last answer) by the "
                         "bandwidth in bytes per second.", rel=2e-2)


def check_ring_limit(answer) -> bool:
    return _check_number(answer, 2.0, "2·V: as N grows, 2(N−1)/N tends to 2, so the per-device "
                         "cost of a ring all-reduce barely depends on how many devices join.",
                         "take the limit of 2(N−1)/N as N grows; answer the factor in front of V.")


# ------------------------------------------------------------------ 03 tensor parallel

def _matmul(a, b):
    return a @ b


MATMUL_SHAPES = ((512, 1024), (1024, 2048))
MATMUL_MESH = ((4, 2), ("x", "y"))
_KIND_WORDS = {"none": "none", "nothing": "none", "": "none", "all-gather": "all-gather",
               "allgather": "all-gather", "all gather": "all-gather", "all-reduce": "all-reduce",
               "allreduce": "all-reduce", "all reduce": "all-reduce",
               "reduce-scatter": "reduce-scatter", "all-to-all": "all-to-all"}


def matmul_collectives(spec_a, spec_b) -> list[str]:
    (sa, sb), (shape, names) = MATMUL_SHAPES, MATMUL_MESH
    return collectives_of(_matmul, [(sa, spec_a), (sb, spec_b)], shape, names)


def check_matmul_case(answer, spec_a, spec_b) -> bool:
    """Which collective C = A @ B needs for these specs (or "none"), compiled with plain jax."""
    if _missing(answer):
        return False
    found = matmul_collectives(spec_a, spec_b)
    truth = found[0] if found else "none"
    given = _KIND_WORDS.get(str(answer).strip().lower())
    a, b = _norm_spec(spec_a) or (None, None), _norm_spec(spec_b) or (None, None)
    one_split = (a[1] is None) != (b[0] is None)      # J split in exactly one operand
    hints = {
        "none": "no contracting dimension is split, so every device can compute its own block "
                "of C from what it holds.",
        "all-gather": "one operand is split along J where the other is not, so it is made "
                      "whole along J (gathered) before the local matmul." if one_split else
                      "C cannot be split over the same mesh axis in two dimensions, so one "
                      "operand is gathered along its split dimension first.",
        "all-reduce": "both operands are split over the same axis along the contracted "
                      "dimension: each device computes a partial sum of C.",
    }
    right = f"{truth} ({', '.join(found) or 'no collective'} in XLA's HLO). " + hints.get(truth, "")
    return _verdict(given == truth, right,
                    "answer 'none', 'all-gather' or 'all-reduce'. Look at the contracted "
                    "dimension (A's columns, B's rows): is it split in A, in B, in both?")


def _mlp(x, w1, w2):
    import jax

    return jax.nn.gelu(x @ w1) @ w2


def check_megatron_specs(w1_spec, w2_spec) -> bool:
    """Megatron's MLP on data=2,model=4: x split over data; w1 column-parallel, w2 row-parallel:
    exactly one all-reduce (of the output) and nothing else."""
    if _missing(w1_spec) or _missing(w2_spec):
        return False
    try:
        found = collectives_of(_mlp, [((256, 1024), "data,None"), ((1024, 4096), w1_spec),
                                      ((4096, 1024), w2_spec)], (2, 4), ("data", "model"))
    except Exception as e:          # a spec jax refuses: say so, as a wrong answer
        return _verdict(False, "", f"jax refused these specs ({type(e).__name__}: {e}).")
    ok = found == ["all-reduce"]
    return _verdict(ok, "one all-reduce and nothing else: w1 split by columns (each device "
                    "computes its slice of the hidden layer, gelu needs no communication), w2 "
                    "split by rows (partial sums of the output, added once).",
                    f"these specs compile to {found or 'no collective'}. Megatron splits w1's "
                    "output dimension (columns, d_ff) and w2's input dimension (rows, d_ff) over "
                    "`model`.")


# ------------------------------------------------------------------ 04 ZeRO and FSDP

def transformer_train_param_count(vocab=256, d_model=64, heads=4, d_head=16, d_ff=256,
                                  layers=1) -> int:
    """Parameters of explorer's `transformer_train`: embedding, per layer two norm scales, q, k,
    v [D,H,K], o [H,K,D], w1 [D,F], w2 [F,D]; a final norm and the unembedding."""
    per_layer = 2 * d_model + 4 * d_model * heads * d_head + 2 * d_model * d_ff
    return vocab * d_model + layers * per_layer + d_model + d_model * vocab


def check_zero_bytes(answer, what: str, stage: str, n: int = 8) -> bool:
    """Per-device bytes of `what` ("params", "grads", "optimizer") in a train step with preset
    `stage` on data=n. The step takes the state and returns the updated state (no buffer
    donation), so params and optimizer state are held twice: old and new."""
    psi = transformer_train_param_count() * F32
    split = {"dp": set(), "zero1": {"optimizer"}, "zero2": {"optimizer", "grads"},
             "zero3": {"optimizer", "grads", "params"}, "fsdp": {"optimizer", "grads", "params"}}
    copies = {"params": 2, "grads": 1, "optimizer": 4}[what]     # m and v, each old and new
    truth = copies * psi // (n if what in split[stage] else 1)
    return _check_number(answer, truth, f"{truth} bytes = {copies}·Ψ"
                         f"{'/' + str(n) if what in split[stage] else ''} with Ψ = {psi} bytes "
                         "of parameters.",
                         f"Ψ (float32 parameter bytes) is {psi}. Under {stage}, is {what} split "
                         f"over the {n} devices? Count the copies: params old+new (2), one "
                         "gradient (1), Adam's m and v, old and new (4).")


# ------------------------------------------------------------------ 05 rules and resharding

_UNASSIGNED = object()


def logical_to_mesh(names: Sequence[str | None], rules: Sequence[tuple[str, object]]) -> tuple:
    """flax's `logical_to_mesh_axes` (flax.linen.spmd): the rules are taken in order; a rule
    gives its mesh axes to the first dimension with its name if that dimension has none yet and
    no other dimension uses those axes; dimensions no rule reaches stay None."""
    names = list(names)
    result: list = [_UNASSIGNED] * len(names)

    def axes_of(entry) -> set[str]:
        return set() if entry in (None, _UNASSIGNED) else \
            ({entry} if isinstance(entry, str) else set(entry))

    for rule_name, axes in rules:
        if rule_name in names:
            pos = names.index(rule_name)
            taken = set().union(*(axes_of(e) for e in result))
            if result[pos] is _UNASSIGNED and not axes_of(axes) & taken:
                result[pos] = axes
    return tuple(None if e is _UNASSIGNED else e for e in result)


def _parse_rules(text: str, kind: str = "param") -> list[tuple[str, object]]:
    """Rules in the explorer's text form ("batch=data,opt:embed=data"), as (name, axes) pairs;
    a rule scoped to a kind ("opt:") counts only for that kind."""
    rules = []
    for part in re.split(r",(?![^()]*\))", text.replace(" ", "")):
        if not part:
            continue
        name, _, value = part.partition("=")
        scope, _, bare = name.rpartition(":")
        if scope and scope != kind:
            continue
        name = bare
        if value in ("None", ""):
            axes = None
        elif value.startswith("("):
            axes = tuple(a for a in value.strip("()").split(",") if a)
        else:
            axes = value
        rules.append((name, axes))
    return rules


# The transformer block's weights and their logical dimension names (explorer's `transformer`).
TRANSFORMER_LOGICAL = {"wq": ("embed", "heads", "kv"), "wk": ("embed", "heads", "kv"),
                       "wv": ("embed", "heads", "kv"), "wo": ("heads", "kv", "embed"),
                       "w1": ("embed", "mlp"), "w2": ("mlp", "embed")}
MEGATRON_LAYOUT = {"wq": (None, "model", None), "wk": (None, "model", None),
                   "wv": (None, "model", None), "wo": ("model", None, None),
                   "w1": (None, "model"), "w2": ("model", None)}


def check_megatron_rules(rules_text) -> bool:
    if _missing(rules_text):
        return False
    if not isinstance(rules_text, str):
        return _verdict(False, "", "write the rules as text, e.g. 'batch=data,mlp=model'.")
    rules = _parse_rules(rules_text)
    got = {t: logical_to_mesh(names, rules) for t, names in TRANSFORMER_LOGICAL.items()}
    wrong = {t: got[t] for t in got if got[t] != MEGATRON_LAYOUT[t]}
    return _verdict(not wrong, "every weight gets Megatron's layout: heads and mlp over "
                    "`model`, embed whole.",
                    f"with these rules {', '.join(f'{t} gets {v}' for t, v in wrong.items())}; "
                    "Megatron splits the heads of wq/wk/wv/wo and the hidden (mlp) dimension of "
                    "w1/w2 over `model`.")


def check_reshard_bytes(answer, batch=8, seq=16, d_model=256, n=8, bytes_per=F32) -> bool:
    """An all-to-all from [B/n, S, D] to [B, S/n, D]: each device holds B·S·D/n elements before
    and after, and that is the buffer it exchanges."""
    truth = batch * seq * d_model * bytes_per // n
    return _check_number(answer, truth, f"{truth} bytes: B·S·D·4/{n}, the block each device "
                         "holds; an all-to-all sends (n−1)/n of it and keeps the rest.",
                         "the residual stream is [batch, seq, d_model] float32; each device "
                         "holds 1/n of it before and after the switch.")


# ------------------------------------------------------------------ 06 pipeline

def check_bubble(answer, stages=4, microbatches=8) -> bool:
    truth = Fraction(stages - 1, microbatches + stages - 1)
    return _check_number(answer, float(truth), f"{truth} ≈ {float(truth):.3f}: (S−1)/(M+S−1) "
                         "(GPipe, Huang et al. 2019, §2.3).",
                         "each stage is busy for 2M ticks out of 2(M+S−1): it waits S−1 ticks "
                         "for the first microbatch to reach it, and S−1 at the end. Idle over "
                         "total.", rel=1e-3)


def check_gpipe_permutes(answer, stages=4, microbatches=8) -> bool:
    truth = 2 * (microbatches + stages - 2)
    return _check_number(answer, truth, f"{truth}: one collective-permute per tick in which "
                         "some stage sends, forward (M+S−2 ticks) and backward (M+S−2).",
                         "the forward pass lasts M+S−1 ticks and the last tick sends nothing "
                         "onward; the backward pass is the same. One permute per sending tick.")


def check_in_flight(answer, stages=4, microbatches=8, schedule="1f1b") -> bool:
    truth = ([microbatches] * stages if schedule == "gpipe"
             else [min(stages - s, microbatches) for s in range(stages)])
    if _missing(answer):
        return False
    try:
        ok = not isinstance(answer, str) and [int(v) for v in answer] == truth
    except (TypeError, ValueError):
        ok = False
    return _verdict(ok, f"{truth}: under 1F1B stage s starts its first backward after S−s "
                    "forwards and then frees one activation per new one (Narayanan et al. "
                    "2021, §2.2.1).",
                    "GPipe keeps all M microbatches of every stage; 1F1B's stage s runs S−1−s "
                    "warm-up forwards plus one before its first backward. Answer a list, one "
                    "number per stage.")


def check_balanced_cuts(answer, layers=8, stages=4) -> bool:
    """The cuts (first layer of stages 1..S-1) that give every stage layers/S layers: the
    busiest stage sets every tick's length, so any other split makes the bubble bigger."""
    truth = ",".join(str(s * layers // stages) for s in range(1, stages))
    if _missing(answer):
        return False
    parts = answer if isinstance(answer, Sequence) and not isinstance(answer, str) \
        else str(answer).replace(" ", "").strip("()[]").split(",")
    try:
        given = ",".join(str(int(p)) for p in parts if str(p))
    except ValueError:
        given = None
    return _verdict(given == truth, f"'{truth}': {layers // stages} layers per stage.",
                    f"with {layers} layers on {stages} stages, each stage should get the same "
                    "number; write the first layer of stages 1, 2, 3, e.g. '1,2,3'.")


# ------------------------------------------------------------------ 07 MoE

def moe_capacity(seq=64, experts=8, top_k=2, capacity_factor=1.25) -> int:
    return math.ceil(capacity_factor * top_k * seq / experts)


def check_capacity(answer) -> bool:
    truth = moe_capacity()
    return _check_number(answer, truth, f"{truth} = ⌈1.25·2·64/8⌉ tokens per expert per group "
                         "(GShard's capacity).",
                         "capacity = ceil(capacity_factor · top_k · seq / experts).")


def check_all_to_all_bytes(answer, batch=8, d_model=128, n=8) -> bool:
    experts = 8
    truth = experts * batch * moe_capacity() * d_model * F32 // n
    return _check_number(answer, truth, f"{truth} bytes = E·G·C·D·4/|expert|: each device "
                         "holds 1/|expert| of the dispatched buffer [E, G, C, D].",
                         "the dispatched buffer is [experts, groups (= batch), capacity, "
                         "d_model] float32; each device exchanges the part it holds.")


# ------------------------------------------------------------------ 08 debugging

def involuntary_remat(a, b, c):
    """jax issue #21562: a constraint asks for a layout the inputs cannot reach cheaply."""
    import jax
    from jax.sharding import PartitionSpec as P

    d = a + b
    d = jax.lax.with_sharding_constraint(d, P(None, ("x", "y"), None))
    return c + d


def check_line(answer, fn: Callable, needle: str) -> bool:
    """The source line of `fn` that contains `needle` (read with inspect, not from a report)."""
    import inspect

    if _missing(answer):
        return False
    truth = next(line.strip() for line in inspect.getsource(fn).splitlines() if needle in line)
    return _verdict(str(answer).strip() == truth, f"`{truth}`.",
                    "`c.source_text` is the code of the line `c.source` points to (the "
                    "app's `code` column); copy it as written.")


def check_remat_fix(spec_a, spec_b) -> bool:
    if _missing(spec_a) or _missing(spec_b):
        return False
    try:
        found = collectives_of(involuntary_remat, [((16, 16, 16), spec_a), ((16, 16, 16), spec_b),
                                                  ((16, 16, 16), "None,(x,y),None")],
                               (4, 2), ("x", "y"))
    except Exception as e:
        return _verdict(False, "", f"jax refused these specs ({type(e).__name__}: {e}).")
    return _verdict(not found, "no collective at all: a and b arrive in the layout the "
                    "constraint asks for, so d = a + b is computed where it is needed.",
                    f"these specs still compile to {found}. Give a and b the layout that the "
                    "sharding constraint asks for d.")


def check_no_collectives(fn: Callable, inputs, mesh_shape, axis_names) -> bool:
    if _missing(fn):
        return False
    try:
        found = collectives_of(fn, inputs, mesh_shape, axis_names)
    except Exception as e:
        return _verdict(False, "", f"it does not compile ({type(e).__name__}: {e}).")
    return _verdict(not found, "no collective: each device works on its own rows.",
                    f"XLA still inserts {found}. Which line caused them, and what does its "
                    "`why` say?")


SHUFFLE_MESH = ((8,), ("dp",))


def check_shuffle_fix(fn) -> bool:
    """jax issue #20381's program, fixed: keys [2] uint32 replicated, inputs [24, 4096, 16]
    split over `dp`. Run with plain jax, it must return each row shuffled (a permutation of
    that row, not all rows left as they were), and compiled, it must need no collective."""
    import jax
    import numpy as np

    if _missing(fn):
        return False
    m = mesh(*SHUFFLE_MESH)
    x = np.arange(24 * 4096 * 16, dtype=np.float32).reshape(24, 4096, 16)
    try:
        out = jax.jit(fn)(jax.device_put(jax.random.PRNGKey(0), sharding(m, None)),
                          jax.device_put(x, sharding(m, "dp,None,None")))
        out = np.asarray(out)
    except Exception as e:
        return _verdict(False, "", f"it does not run ({type(e).__name__}: {e}).")
    if out.shape != x.shape:
        return _verdict(False, "", f"it returns shape {out.shape}, not the shuffled inputs "
                        f"{x.shape}.")
    same_rows = all(np.array_equal(np.sort(out[i], axis=0), x[i]) for i in range(len(x)))
    if not same_rows or np.array_equal(out, x):
        return _verdict(False, "", "each row of the result must be its input row, shuffled "
                        "along its first axis, as jax.random.permutation does.")
    import jax.numpy as jnp

    return check_no_collectives(fn, [((2,), None, jnp.uint32),
                                     ((24, 4096, 16), "dp,None,None")], *SHUFFLE_MESH)


# ------------------------------------------------------------------ 09 TPU

def check_tpu_gather_bytes(answer_tpu, answer_cpu, data=64, model=64, d_model=1024,
                           d_ff=4096) -> bool:
    """w1 [d_model, d_ff] split (data, model) is all-gathered over data before the matmul:
    V = d_model · d_ff/|model| elements; the TPU moves bfloat16, the CPU upcasts to float32."""
    elems = d_model * d_ff // model
    tpu, cpu = elems * BF16, elems * F32
    if _missing(answer_tpu) or _missing(answer_cpu):
        return False
    ok = _close(answer_tpu, tpu) and _close(answer_cpu, cpu)
    return _verdict(ok, f"TPU {tpu} bytes (bfloat16), CPU {cpu} bytes (the CPU backend "
                    "converts bfloat16 to float32 around collectives).",
                    "after the all-gather over `data` a device holds w1's rows whole and its "
                    f"1/{model} of the columns; count bytes per element on each backend.")


# ------------------------------------------------------------------ 10 search

MLP_TRAIN_SEARCHED = {"batch": 65536, "d_model": 64, "d_ff": 256}


def mlp_train_collective_bytes(data: int, model: int, batch: int = 65536, d_model: int = 64,
                               d_ff: int = 256, bytes_per: int = F32) -> int:
    """Bytes each device all-reduces in one SGD step of y = gelu(x @ w1) @ w2 on a mesh of
    `data` x `model` devices, with the batch split over `data` and the weights split Megatron's
    way over `model` (notebooks 02 and 03), counted as the buffer each device contributes:

    - over `model` (model > 1): the forward's partial sums of y = h @ w2, the device's block
      [batch/data, d_model] (Megatron's operator g; the backward needs no all-reduce, since x
      takes no gradient and each device already holds its columns of dh);
    - over `data` (data > 1): the gradients of the device's weight shards, 2·d_model·d_ff/model
      elements.
    """
    activations = batch // data * d_model * bytes_per if model > 1 else 0
    gradients = 2 * d_model * d_ff // model * bytes_per if data > 1 else 0
    return activations + gradients


def _mesh_pair(answer, devices: int) -> tuple[int, int] | None:
    """(data, model) from "data=8,model=1", "data=8", "model=2,data=4", "8x1" or (8, 1); None
    when the answer is none of these."""
    if isinstance(answer, str):
        text = answer.replace(" ", "").lower()
        if re.fullmatch(r"(data|model)=\d+(,(data|model)=\d+)?", text):
            sizes = {k: int(v) for k, v in re.findall(r"(data|model)=(\d+)", text)}
            if 0 in sizes.values():
                return None
            data = sizes.get("data", devices // sizes.get("model", 1))
            return (data, sizes.get("model", devices // data if data else 0))
        m = re.fullmatch(r"(\d+)x(\d+)", text)
        return (int(m[1]), int(m[2])) if m else None
    if isinstance(answer, Sequence) and len(answer) == 2:
        try:
            return (int(answer[0]), int(answer[1]))
        except (TypeError, ValueError):
            return None
    return None


def check_search_mesh(mesh_answer, bytes_answer, devices: int = 8) -> bool:
    """Which split of the devices between data and model parallelism moves the fewest bytes for
    mlp_train with batch >> weights, and what its collective carries: worked out from
    mlp_train_collective_bytes over every factorisation, not from the search."""
    if _missing(mesh_answer) or _missing(bytes_answer):
        return False
    table = {(d, devices // d): mlp_train_collective_bytes(d, devices // d, **MLP_TRAIN_SEARCHED)
             for d in range(1, devices + 1) if devices % d == 0}
    best = min(table, key=table.get)
    rows = ", ".join(f"data={d},model={m}: {v}" for (d, m), v in sorted(table.items()))
    given = _mesh_pair(mesh_answer, devices)
    if given is None:
        return _verdict(False, "", f"write the mesh as text, e.g. 'data=4,model=2', or a pair "
                        f"(data, model); not {mesh_answer!r}.")
    if given not in table:
        return _verdict(False, "", f"{given[0]} x {given[1]} is not a split of {devices} "
                        "devices; data times model must make "
                        f"{devices}.")
    if given != best:
        return _verdict(False, "", f"data={given[0]},model={given[1]} all-reduces "
                        f"{table[given]} bytes per device a step. Count both kinds: a model axis "
                        "all-reduces each device's [batch/data, d_model] block of the output "
                        f"(batch is {MLP_TRAIN_SEARCHED['batch']} rows), a data axis the "
                        "gradients of the weights it holds (2·64·256 floats in all). Which is "
                        "bigger here?")
    truth = table[best]
    return _check_number(bytes_answer, truth,
                         f"data={best[0]},model={best[1]}, all-reducing {truth} bytes per device: "
                         "only the weights' gradients, as in notebook 02. Per mesh shape "
                         f"({rows} bytes): with a batch of {MLP_TRAIN_SEARCHED['batch']} rows "
                         "and weights of 2·64·256 floats, splitting the weights saves little "
                         "and costs an all-reduce of activations far bigger than the weights.",
                         f"the mesh is right (data={best[0]},model={best[1]}); now its bytes: "
                         "data parallelism all-reduces one gradient per weight, each the size of "
                         "its weight (w1 [64, 256] and w2 [256, 64], float32).")


def _predicted_seconds(report) -> float | None:
    """The step time the search ranks by: the step trace, else the no-overlap bound, else the
    full-overlap bound (docs/search.md, "How a candidate is judged")."""
    est = report.estimate
    if est is None:
        return None
    for value in (est.step_trace_seconds, est.step_upper_seconds, est.step_lower_seconds):
        if value is not None:
            return value
    return None


def check_lean_layout(w1_spec, w2_spec, result, fn: Callable, inputs: Sequence,
                      slower: float = 1.30, memory: float = 2 / 3) -> bool:
    """A layout of w1 and w2 at most `slower` times the search's winner's predicted step and at
    most `memory` times its memory per device.

    "Faster" here is what the search ranks by, the explorer's cost model, so this check uses it
    on purpose: it compiles the learner's layout anew with explorer.analyze (the same program,
    mesh and target as the search's winner, not a lookup in the search's table) and compares.
    """
    import explorer

    if _missing(w1_spec) or _missing(w2_spec):
        return False
    if not isinstance(w1_spec, str) or not isinstance(w2_spec, str):
        return _verdict(False, "", "write each spec as text, e.g. 'None,model'.")
    best = getattr(result, "best", None)
    if best is None or best.seconds is None or not best.memory_bytes:
        return _verdict(False, "", "the search found no winner to compare with: run the search "
                        "cell above (its table must list at least one layout that fits).")
    mesh_text = best.mesh.text()
    try:
        report = explorer.analyze(fn, *inputs, mesh=mesh_text, target=result.target,
                                  specs={"^w1$": w1_spec, "^w2$": w2_spec})
    except explorer.ExplorerError as e:
        return _verdict(False, "", f"the explorer refused this layout: {e}")
    except Exception as e:          # a compile that failed for another reason: say so
        return _verdict(False, "", f"this layout did not compile ({type(e).__name__}: {e}).")
    seconds = _predicted_seconds(report)
    held = report.memory.total if report.memory is not None else None
    if seconds is None or held is None:
        return _verdict(False, "", "this layout got no predicted step or memory on "
                        f"{result.target}; try another.")
    time_ratio, memory_ratio = seconds / best.seconds, held / best.memory_bytes
    shards = {name: report.tensor(name).shard_shape for name in ("w1", "w2")}
    pays = "; ".join(f"{c.kind.value} over {','.join(c.axes)} ({c.bytes} bytes)"
                     for c in report.collectives) or "no collective"
    said = (f"your layout: {seconds * 1e6:.0f} µs ({time_ratio:.0%} of the winner's time), "
            f"{held / 2 ** 20:.0f} MiB per device ({memory_ratio:.0%} of its memory); each device "
            f"holds w1 {shards['w1']} and w2 {shards['w2']}, and pays {pays}")
    if memory_ratio > memory:
        return _verdict(False, "", f"{said}. That is more than {memory:.0%} of the winner's "
                        "memory. The weights are most of it: split each over both mesh axes, "
                        "so that every device holds an eighth of it, not a quarter.")
    if time_ratio > slower:
        return _verdict(False, "", f"{said}. That is more than {slower - 1:.0%} slower. Keep "
                        "the matmuls local as Megatron does: w1 split along its columns (d_ff), "
                        "w2 along its rows (d_ff), now over both axes, so that one all-reduce "
                        "adds the partial sums.")
    return _verdict(True, f"{said}. A point near the Pareto front: smaller weight shards for "
                    "a little more communication.", "")
