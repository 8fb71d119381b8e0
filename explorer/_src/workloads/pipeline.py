"""The `pipeline` workload: a pipeline-parallel training step, and its schedule as data.

L layers are split into S stages over the mesh axis `stage`; a batch is split into M
microbatches, and each stage passes activations to the next (and gradients to the previous)
with `jax.lax.ppermute` inside a `jax.shard_map`. Two schedules:

- GPipe (Huang et al. 2019, "GPipe: Efficient Training of Giant Neural Networks using Pipeline
  Parallelism", §2.3 and Fig. 2c): every stage runs all M forwards, then all M backwards.
- 1F1B, the PipeDream-Flush schedule (Narayanan et al. 2021, "Efficient Large-Scale Language
  Model Training on GPU Clusters Using Megatron-LM", §2.2.1 and Fig. 4 top): stage s runs
  min(S-1-s, M) warm-up forwards, then alternates one forward and one backward, then drains
  the remaining backwards. Its bubble is the same as GPipe's, (S-1)/(M+S-1), but stage s keeps
  at most S-s microbatches' activations in flight instead of M.

Time convention of the schedule data: one unit is the forward of one stage holding an even
share (L/S) of the layers, and a backward takes as long as a forward (`backward=1`, as GPipe's
Fig. 2c draws it; Megatron's figures draw it twice as long, `backward=2`; the bubble fraction is
(S-1)/(M+S-1) either way, the tests check both). A stage with c layers takes c·S/L units per
forward, so uneven cut points stretch the busy stages and lengthen everyone's idle time. Each op
starts as soon as its stage is free and its input has arrived: the forward of microbatch m on
stage s needs that forward on stage s-1; its backward needs the backward on stage s+1 (on the
last stage, its own forward).

The compiled program executes exactly this schedule, with every op one tick long (the even,
backward=1 table): at tick t, each stage looks up its op in a table indexed by
`axis_index('stage')` and runs it in a `lax.switch` over the branches some stage takes at that
tick (idle / forward / backward); then one `ppermute` carries the activations of the stages that
just ran a forward to the next stage, and another carries the gradients of the stages that just
ran a backward to the previous one. Each permute's source-target pairs are only the stages that
send at that tick, so the optimized HLO holds one `collective-permute` per tick and direction
with a sender, each moving one microbatch activation [batch/M, d_model]: 2(M+S-2) of them under
GPipe, more under 1F1B (its sends spread over more ticks), and 2·M·(S-1) sends in all under
both. The loop is unrolled in Python (the pairs must be static), so the program grows with the
number of ticks, 2(M+S-1).

The shard_map is manual over `stage` only; other mesh axes stay with the partitioner. Microbatch
m is rows m, m+M, m+2M, ... of x, so a batch split over e.g. `data` stays split inside every
microbatch (the permutes then move batch/M/|data| rows). The partitioner then all-reduces each
backward's weight gradient over `data` inside that tick's branch, not once after accumulation
(what jax 0.10.2 does; a hand-written pipeline would reduce once).

A backward recomputes its stage's forward from the stashed stage input (jax.vjp), as GPipe's
re-materialization does, so each stage keeps one [batch/M, d_model] input per microbatch in
flight: M slots under GPipe, S under 1F1B. memory_analysis shows 1F1B's temporaries flat in M and
GPipe's growing with M (by more than the stash alone: XLA's buffers for the unrolled branches).
The loss is mean(y**2) over the whole batch, and the step returns the SGD-updated w (laid out
like w, over `stage`).

Uneven cuts: w is stored evenly, layers/S per device on the `stage` axis (so S must divide L),
while the cuts choose which layers each stage computes. For uneven cuts the program gathers w
into per-stage blocks padded to the largest stage (padded layers are skipped by a mask), and
scatters the update back; the partitioner moves the weights that live on another stage (on
jax 0.10.2: an all-gather of the whole w over `stage`, and an all-reduce on the way back), and
those collectives are part of the report. Even cuts need no such move.

Layer: h <- tanh(h @ w[l]).
"""

from __future__ import annotations

import functools
from fractions import Fraction

from explorer._src.errors import WorkloadError, choices
from explorer._src.spec.mesh import MeshSpec
from explorer._src.workloads.base import (
    BATCH,
    D_MODEL,
    DONATE_OPTIONS,
    DONATE_STATE,
    LAYERS,
    LR,
    Range,
    Workload,
)

SCHEDULES = ("gpipe", "1f1b")
AXIS = "stage"

# ---------------------------------------------------------------------------------------------
# The schedule as data: pure Python, no jax.


def stage_orders(stages: int, microbatches: int, kind: str) -> list[list[tuple[str, int]]]:
    """For each stage, its ops in the order it runs them: ("F" | "B", microbatch)."""
    if kind not in SCHEDULES:
        raise WorkloadError(f"schedule {kind!r} is unknown; choose one of {choices(SCHEDULES)}")
    orders = []
    for s in range(stages):
        forwards = [("F", m) for m in range(microbatches)]
        backwards = [("B", m) for m in range(microbatches)]
        if kind == "gpipe":
            orders.append(forwards + backwards)
            continue
        warmup = min(stages - 1 - s, microbatches)
        ops = forwards[:warmup]
        for f, b in zip(forwards[warmup:], backwards, strict=False):
            ops += [f, b]
        ops += backwards[microbatches - warmup:]
        orders.append(ops)
    return orders


def _number(x: Fraction) -> int | float:
    return int(x) if x.denominator == 1 else float(x)


def _simulate(stages, microbatches, kind, durations) -> dict[tuple[str, int, int], tuple]:
    """(phase, stage, microbatch) -> (start, end) as Fractions; each op starts as soon as its
    stage is free and its input is ready. durations[s] = (forward, backward) of stage s."""
    orders = stage_orders(stages, microbatches, kind)
    times: dict[tuple[str, int, int], tuple[Fraction, Fraction]] = {}
    free = [Fraction(0)] * stages
    nxt = [0] * stages
    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for s in range(stages):
            while nxt[s] < len(orders[s]):
                phase, m = orders[s][nxt[s]]
                if phase == "F":
                    dep = ("F", s - 1, m) if s > 0 else None
                else:
                    dep = ("B", s + 1, m) if s < stages - 1 else ("F", s, m)
                if dep is not None and dep not in times:
                    break
                ready = times[dep][1] if dep is not None else Fraction(0)
                start = max(free[s], ready)
                end = start + durations[s][0 if phase == "F" else 1]
                times[(phase, s, m)] = (start, end)
                free[s] = end
                nxt[s] += 1
                remaining -= 1
                progressed = True
        if not progressed:  # cannot happen for the two schedules; guards a future third one
            raise RuntimeError(f"schedule {kind!r} deadlocks at S={stages}, M={microbatches}")
    return times


def schedule(stages: int, microbatches: int, kind: str = "gpipe",
             layer_counts: tuple[int, ...] | list[int] | None = None,
             backward: int | float = 1) -> list[dict]:
    """The pipeline schedule as data: one dict per (stage, microbatch, phase), with its start
    and end time, sorted by start then stage.

    Time unit: the forward of a stage holding an even share of the layers. `layer_counts` (the
    layers of each stage; default even) stretches a stage's ops in proportion to its layers;
    `backward` is the backward/forward time ratio. Times are ints where they are whole numbers.
    """
    if stages < 1 or microbatches < 1:
        raise WorkloadError(f"stages={stages} and microbatches={microbatches} must be >= 1")
    counts = list(layer_counts) if layer_counts is not None else [1] * stages
    if len(counts) != stages:
        raise WorkloadError(f"layer_counts {counts} has {len(counts)} entries; give one per "
                            f"stage ({stages})")
    ratio = Fraction(backward).limit_denominator(1000)
    even = Fraction(sum(counts), stages)
    durations = [(Fraction(c) / even, Fraction(c) / even * ratio) for c in counts]
    times = _simulate(stages, microbatches, kind, durations)
    entries = [{"stage": s, "microbatch": m, "phase": phase, "start": _number(a),
                "end": _number(b)} for (phase, s, m), (a, b) in times.items()]
    entries.sort(key=lambda e: (e["start"], e["stage"]))
    return entries


def bubble_fraction(entries: list[dict]) -> float:
    """Idle time over total time, summed over all stages, from the first start to the last end."""
    stages = 1 + max(e["stage"] for e in entries)
    t0 = min(Fraction(e["start"]) for e in entries)
    t1 = max(Fraction(e["end"]) for e in entries)
    busy = sum(Fraction(e["end"]) - Fraction(e["start"]) for e in entries)
    total = stages * (t1 - t0)
    return float((total - busy) / total)


def in_flight(entries: list[dict]) -> list[int]:
    """Per stage, the peak number of microbatches whose forward has started there and whose
    backward has not yet ended: the activations that stage must keep."""
    stages = 1 + max(e["stage"] for e in entries)
    events: list[list[tuple[Fraction, int]]] = [[] for _ in range(stages)]
    for e in entries:
        if e["phase"] == "F":
            events[e["stage"]].append((Fraction(e["start"]), +1))
        else:
            events[e["stage"]].append((Fraction(e["end"]), -1))
    peaks = []
    for ev in events:
        live = peak = 0
        for _, step in sorted(ev):  # at equal times a release (-1) sorts before an arrival
            live += step
            peak = max(peak, live)
        peaks.append(peak)
    return peaks


# ---------------------------------------------------------------------------------------------
# Params: cut points and checks.


def parse_cuts(cuts, layers: int, stages: int) -> tuple[int, ...]:
    """The first layer of stages 1..S-1, from text like "1,3" ("" = even split)."""
    text = str(cuts).strip().strip("[]()").strip()
    if not text:
        return tuple(s * layers // stages for s in range(1, stages))
    parts = [p.strip() for p in text.split(",") if p.strip()]
    try:
        points = tuple(int(p) for p in parts)
    except ValueError:
        raise WorkloadError(f"cuts={cuts!r} is not a comma-separated list of layer indices; "
                            f"write the first layer of each stage after the first, e.g. "
                            f"'{_even_text(layers, stages)}', or '' for an even split") from None
    if len(points) != stages - 1:
        raise WorkloadError(f"cuts={cuts!r} has {len(points)} cut points; {stages} stages need "
                            f"{stages - 1} (the first layer of stages 1..{stages - 1}), e.g. "
                            f"'{_even_text(layers, stages)}'")
    bounds = (0, *points, layers)
    for a, b in zip(bounds, bounds[1:], strict=False):
        if not a < b:
            raise WorkloadError(f"cuts={cuts!r} must be strictly increasing layer indices "
                                f"between 1 and layers-1={layers - 1}, so that every stage has "
                                f"at least one layer; e.g. '{_even_text(layers, stages)}'")
    return points


def _even_text(layers: int, stages: int) -> str:
    return ",".join(str(s * layers // stages) for s in range(1, stages))


def layer_counts(params: dict) -> tuple[int, ...]:
    bounds = (0, *parse_cuts(params["cuts"], params["layers"], params["stages"]),
              params["layers"])
    return tuple(b - a for a, b in zip(bounds, bounds[1:], strict=False))


def _check_params(p: dict) -> None:
    """The checks that need no mesh; build() runs them too, for callers that skip check()."""
    if p["layers"] % p["stages"]:
        raise WorkloadError(
            f"layers={p['layers']} is not divisible by stages={p['stages']}: the stacked "
            f"weights w [layers, d_model, d_model] are stored layers/stages per device on mesh "
            f"axis {AXIS!r}; choose layers a multiple of {p['stages']} "
            f"(e.g. {-(-p['layers'] // p['stages']) * p['stages']}) or a stages count that "
            f"divides {p['layers']}")
    if p["batch"] % p["microbatches"]:
        batch, m = p["batch"], p["microbatches"]
        lower, upper = batch // m * m, (batch // m + 1) * m
        multiples = f"{lower} or {upper}" if lower else f"{upper}"
        raise WorkloadError(
            f"microbatches={m} does not divide batch={batch}: each microbatch is "
            f"batch/microbatches rows; choose microbatches dividing {batch} (e.g. "
            f"{_near_divisor(batch, m)}) or a batch that is a multiple of {m} (e.g. "
            f"{multiples})")
    if p["schedule"] not in SCHEDULES:
        raise WorkloadError(f"schedule={p['schedule']!r} is unknown; choose one of "
                            f"{choices(SCHEDULES)}")
    parse_cuts(p["cuts"], p["layers"], p["stages"])


def _near_divisor(batch: int, m: int) -> int:
    """The divisor of `batch` nearest `m` (the smaller on a tie), among the microbatch counts
    the bounds allow: at most MICROBATCHES.high tries, however large the batch."""
    top = min(batch, MICROBATCHES.high)
    return min((d for d in range(1, top + 1) if batch % d == 0), key=lambda d: (abs(d - m), d))


def check(p: dict, mesh: MeshSpec) -> None:
    _check_params(p)
    if AXIS not in mesh.names:
        raise WorkloadError(
            f"mesh {mesh.text()!r} has no axis {AXIS!r} (its axes: {choices(mesh.names)}); the "
            f"pipeline runs its stages over mesh axis {AXIS!r}: add it, e.g. mesh "
            f"'{AXIS}={p['stages']}' or '{AXIS}={p['stages']},{mesh.text()}'")
    if mesh.size(AXIS) != p["stages"]:
        raise WorkloadError(
            f"stages={p['stages']} but mesh axis {AXIS!r} has size {mesh.size(AXIS)}: one stage "
            f"runs per position on that axis; set stages={mesh.size(AXIS)} or make the mesh "
            f"'{AXIS}={p['stages']}'")


# ---------------------------------------------------------------------------------------------
# The compiled program.


def _ticks(stages: int, microbatches: int, kind: str) -> list[list[tuple[str, int] | None]]:
    """The even, unit-time schedule as a table: tick -> stage -> op or None (idle)."""
    times = _simulate(stages, microbatches, kind, [(Fraction(1), Fraction(1))] * stages)
    n = int(max(end for _, end in times.values()))
    table: list[list[tuple[str, int] | None]] = [[None] * stages for _ in range(n)]
    for (phase, s, m), (start, _) in times.items():
        table[int(start)][s] = (phase, m)
    return table


def _peak_live(intervals: list[tuple[int, int]]) -> int:
    """Peak number of half-open [a, b) intervals alive at once (at least 1)."""
    peak = 1
    for t in {a for a, _ in intervals}:
        peak = max(peak, sum(a <= t < b for a, b in intervals))
    return peak


def _buffer_slots(table, stages: int, microbatches: int) -> tuple[int, int]:
    """Slots each stage needs for received activations and gradients, from arrival to use.

    An activation for microbatch m arrives at stage s when stage s-1's forward ends (stage 0
    reads x) and is kept until s's backward of m ends (the backward recomputes the forward).
    A gradient arrives when stage s+1's backward ends and is used by s's backward. Both arrive
    and leave in microbatch order, so slot m % slots never overwrites a live one.
    """
    at = {op + (s,): t for t, row in enumerate(table) for s, op in enumerate(row) if op}
    acts, grads = [], []
    for s in range(stages):
        for m in range(microbatches):
            arrive = at[("F", m, s)] if s == 0 else at[("F", m, s - 1)] + 1
            acts.append((s, arrive, at[("B", m, s)] + 1))
            if s < stages - 1:
                grads.append((s, at[("B", m, s + 1)] + 1, at[("B", m, s)] + 1))
    k_act = max(_peak_live([(a, b) for st, a, b in acts if st == s]) for s in range(stages))
    k_grad = max([_peak_live([(a, b) for st, a, b in grads if st == s])
                  for s in range(stages - 1)] or [1])
    return k_act, k_grad


def _layer(h, w):
    import jax.numpy as jnp

    return jnp.tanh(h @ w)


def _stage_forward(w_block, h, count):
    """The layers of one stage; `count` (traced, per stage) masks padding when cuts are uneven."""
    import jax.numpy as jnp

    for j in range(w_block.shape[0]):
        out = _layer(h, w_block[j])
        h = out if count is None else jnp.where(j < count, out, h)
    return h


def _stage_program(x, w_block, *, stages, microbatches, schedule_kind, counts, lr):
    """One device's part of the step, inside shard_map over `stage` (manual on that axis)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    S, M = stages, microbatches
    batch, d_model = x.shape
    mb = batch // M
    # Microbatch m is rows m, m+M, m+2M, ...: a batch split over another mesh axis (data
    # parallelism) then stays split inside every microbatch instead of being gathered.
    xs = x.reshape(mb, M, d_model)
    s = lax.axis_index(AXIS)
    even = len(set(counts)) == 1
    count = None if even else jnp.asarray(counts)[s]
    table = _ticks(S, M, schedule_kind)
    k_act, k_grad = _buffer_slots(table, S, M)

    def stage_fn(w, h):
        return _stage_forward(w, h, count)

    def varying(shape):  # a per-stage value, as every branch of the switch must return
        return lax.pcast(jnp.zeros(shape, x.dtype), AXIS, to="varying")

    zeros = varying((mb, d_model))
    state = (varying((k_act, mb, d_model)),    # stage inputs, by microbatch
             varying((k_grad, mb, d_model)),   # gradients received from s+1
             varying(w_block.shape))           # accumulated weight gradient

    def idle(state, m):
        return state, zeros, zeros

    def forward(state, m):
        acts, grads, dw = state
        slot = m % k_act
        h = jnp.where(s == 0, xs[:, m], acts[slot])
        acts = lax.dynamic_update_index_in_dim(acts, h, slot, 0)
        return (acts, grads, dw), stage_fn(w_block, h), zeros

    def backward(state, m):
        acts, grads, dw = state
        y, pull = jax.vjp(stage_fn, w_block, acts[m % k_act])
        # d mean(y**2) / dy over the whole batch, on the last stage; else what s+1 sent.
        ct = jnp.where(s == S - 1, 2 * y / (batch * d_model), grads[m % k_grad])
        dw_m, dh = pull(ct.astype(y.dtype))
        return (acts, grads, dw + dw_m), zeros, dh

    def receive(buf, slots, value, senders, row, step):
        # Stage r takes what r - step sent (a senders entry) into the slot of its microbatch;
        # a stage nothing was sent to gets zeros from the permute and keeps its buffer.
        takes = [0 <= r - step < S and r - step in senders for r in range(S)]
        mbs = [row[r - step][1] if takes[r] else 0 for r in range(S)]
        take, m = jnp.asarray(takes)[s], jnp.asarray(mbs)[s]
        slot = m % slots
        old = lax.dynamic_index_in_dim(buf, slot, 0, keepdims=False)
        return lax.dynamic_update_index_in_dim(buf, jnp.where(take, value, old), slot, 0)

    for row in table:
        kinds = [0 if op is None else 1 if op[0] == "F" else 2 for op in row]
        mbs = [0 if op is None else op[1] for op in row]
        # Only the branches some stage takes at this tick, so that e.g. a GPipe forward tick
        # holds no backward code (nor the collectives the partitioner would put in it).
        used = sorted(set(kinds))
        branches = [(idle, forward, backward)[k] for k in used]
        index = jnp.asarray([used.index(k) for k in kinds])[s]
        state, f_out, b_out = lax.switch(index, branches, state, jnp.asarray(mbs)[s])
        acts, grads, dw = state
        f_senders = [r for r in range(S - 1) if kinds[r] == 1]
        if f_senders:
            got = lax.ppermute(f_out, AXIS, [(r, r + 1) for r in f_senders])
            acts = receive(acts, k_act, got, f_senders, row, +1)
        b_senders = [r for r in range(1, S) if kinds[r] == 2]
        if b_senders:
            got = lax.ppermute(b_out, AXIS, [(r, r - 1) for r in b_senders])
            grads = receive(grads, k_grad, got, b_senders, row, -1)
        state = (acts, grads, dw)
    return w_block - lr * state[2]


def pipeline_step(x, w, *, stages, microbatches, schedule, counts, lr):
    """One SGD step of the pipelined layer stack on mean(y**2); returns the new w.

    Runs under the ambient mesh (jax.set_mesh), manual over axis `stage` only, so other mesh
    axes stay with the partitioner.
    """
    import jax
    import numpy as np
    from jax.sharding import PartitionSpec as P

    layers = w.shape[0]
    per = max(counts)
    even = len(set(counts)) == 1
    if even:
        blocks = w
    else:
        starts = np.cumsum((0, *counts[:-1]))
        # Stage s's block: its layers, padded with copies of its last one (masked off).
        index = np.array([starts[s] + min(j, c - 1) for s, c in enumerate(counts)
                          for j in range(per)])
        blocks = w[index]
    body = functools.partial(_stage_program, stages=stages, microbatches=microbatches,
                             schedule_kind=schedule, counts=counts, lr=lr)
    new_blocks = jax.shard_map(body, in_specs=(P(), P(AXIS)), out_specs=P(AXIS),
                               axis_names={AXIS})(x, blocks)
    if even:
        return new_blocks
    back = np.array([s * per + (layer - starts[s]) for s, c in enumerate(counts)
                     for layer in range(starts[s], starts[s] + c)])
    assert len(back) == layers
    # Return w in its own layout (layers/S per stage), not replicated.
    return jax.lax.with_sharding_constraint(new_blocks[back], P(AXIS))


# ---------------------------------------------------------------------------------------------
# The workload.

DEFAULTS = {"layers": 4, "stages": 4, "microbatches": 8, "batch": 64, "d_model": 256,
            "schedule": "gpipe", "cuts": "", "lr": 0.1, "dtype": "float32", **DONATE_STATE}
# The program unrolls 2(M+S-1) ticks and every layer, so these bound the program's size: stages
# up to the most layers; microbatches up to 1024 (Megatron-LM's 1T-parameter run, Narayanan et
# al. 2021 Table 1, puts a batch of 3072 on 6 data-parallel pipelines: 512 microbatches each at
# a microbatch size of 1).
STAGES = Range(1, LAYERS.high)
MICROBATCHES = Range(1, 1024)
BOUNDS = {"layers": LAYERS, "stages": STAGES, "microbatches": MICROBATCHES, "batch": BATCH,
          "d_model": D_MODEL, "lr": LR}


def _shapes(p: dict) -> dict[str, tuple[int, ...]]:
    return {"x": (p["batch"], p["d_model"]), "w": (p["layers"], p["d_model"], p["d_model"])}


def _logical(p: dict) -> dict[str, tuple[str | None, ...]]:
    return {"x": ("batch", "embed"), "w": ("layers", "embed", "mlp")}


def _build(p: dict):
    _check_params(p)
    return functools.partial(pipeline_step, stages=p["stages"], microbatches=p["microbatches"],
                             schedule=p["schedule"], counts=layer_counts(p), lr=p["lr"])


def _info(p: dict) -> dict:
    _check_params(p)
    counts = layer_counts(p)
    entries = schedule(p["stages"], p["microbatches"], p["schedule"], counts)
    starts = (0, *parse_cuts(p["cuts"], p["layers"], p["stages"]))
    return {"schedule": entries,
            "bubble_fraction": bubble_fraction(entries),
            "in_flight_microbatches": in_flight(entries),
            "stage_layers": [[a, a + c] for a, c in zip(starts, counts, strict=True)],
            "time_unit": "forward of a stage with layers/stages layers; backward = forward"}


PIPELINE = Workload(
    "pipeline",
    "one SGD step of a stack of `layers` tanh(h @ w[l]) layers, pipelined over mesh axis "
    "'stage' (shard_map + ppermute) in `microbatches` microbatches with the GPipe or 1F1B "
    "schedule; cuts = first layer of stages 1.. ('' = even); returns the new w",
    DEFAULTS, _shapes, _build, logical=_logical, check=check, info=_info,
    bounds=BOUNDS, options={"schedule": SCHEDULES, **DONATE_OPTIONS}, donates=r"^w$",
    # Uneven cuts gather w into per-stage blocks [stages, largest stage, d_model, d_model];
    # the largest stage has at most layers - (stages - 1) layers.
    intermediates=lambda p: {"stage_blocks": (p["stages"], p["layers"] - p["stages"] + 1,
                                              p["d_model"], p["d_model"])})
