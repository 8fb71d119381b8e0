"""The predicted step against a measured one, op by op: the f32-softmax attention compiled
here by libtpu for one v5e chip (ahead of time), its prediction set beside the profile of the
same program's run on a v5e chip (benchmarks/results/tpu-v5e-2026-12-06). The chip compiled
the program to the same instruction names as the compile here does."""

from __future__ import annotations

import json
import math
import tarfile
from dataclasses import replace
from html import unescape
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

import explorer
from explorer._src.compile.device_profile import read_device_profile
from explorer._src.report.op_comparison import compare_ops, comparison_lines, signed_seconds
from explorer._src.ui.timeline import timing_html

RUN = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "tpu-v5e-2026-12-06"
B, S, H, D = 2, 8192, 8, 128


def attention(q, k, v):
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) / math.sqrt(D)
    mask = jnp.tril(jnp.ones((S, S), bool))
    probs = jax.nn.softmax(jnp.where(mask, scores, -1e9), axis=-1).astype(jnp.bfloat16)
    return jnp.einsum("bhqk,bkhd->bqhd", probs, v)


def test_signed_gaps():
    assert signed_seconds(1.5e-3) == "+1.5 ms" and signed_seconds(-4e-5) == "-40 µs"


@pytest.mark.slow
def test_no_comparison_without_a_measurement_on_a_device():
    r = explorer.analyze(lambda x: x * 2, jax.ShapeDtypeStruct((8, 8), jnp.float32),
                         mesh="data=1", target="tpu-v5e-1x1")
    assert compare_ops(r) is None and "Predicted against measured" not in timing_html(r)


@pytest.mark.slow
def test_the_uncostable_softmax_is_where_prediction_and_chip_part(chip_run):
    report, profile, chip = chip_run
    cmp = compare_ops(report)
    # Every instruction the chip ran is one the prediction names: the same compiler.
    predicted = {r.instruction for r in cmp.rows if r.predicted_s is not None}
    timed = {n for n, (ns, _) in chip["op_ns_per_call"].items() if ns > 1e3}
    assert timed <= predicted
    top = cmp.rows[0]
    assert top.instruction == "fusion.11"
    assert top.measured_s == pytest.approx(chip["op_ns_per_call"]["fusion.11"][0] * 1e-9)
    assert top.gap_s > 0.4 and top.source.endswith("test_op_comparison.py:31")
    assert cmp.measured_s == pytest.approx(chip["module_ns"] * 1e-9)
    assert cmp.error < -0.9
    text = "\n".join(comparison_lines(cmp))
    # 32 ms predicted against 449 ms measured: the line says the prediction is over 90% short.
    assert "fusion.11" in text and ": prediction -9" in text
    html = unescape(timing_html(report))
    assert "Predicted against measured" in html and "fusion.11" in html


def test_the_measured_lane_puts_overlapping_flights_on_rows_of_their_own():
    from explorer._src.compile.device_profile import MeasuredEvent
    from explorer._src.report.op_comparison import IN_FLIGHT_ROW, MEASURED_ROW, measured_rows

    M = MeasuredEvent
    events = [M("fusion.1", 0.0, 5.0), M("copy-start.1", 1.0, 4.0, True),
              M("copy-start.2", 2.0, 1.0, True), M("fusion.2", 5.0, 1.0),
              M("copy-start.3", 3.5, 1.0, True), M("copy-start.4", 5.5, 1.0, True)]
    rows = {e.instruction: row for row, e in measured_rows(events)}
    # copy-start.1 flies 1-5, copy-start.2 2-3 beside it, copy-start.3 (3.5-4.5) in the row
    # copy-start.2 left, copy-start.4 (5.5) in the first row again.
    assert rows == {"fusion.1": MEASURED_ROW, "fusion.2": MEASURED_ROW,
                    "copy-start.1": IN_FLIGHT_ROW, "copy-start.2": IN_FLIGHT_ROW + " 2",
                    "copy-start.3": IN_FLIGHT_ROW + " 2", "copy-start.4": IN_FLIGHT_ROW}


@pytest.mark.slow
def test_the_trace_and_the_timeline_show_the_chips_run_beside_the_prediction(chip_run):
    import re

    from explorer._src.report.op_comparison import MEASURED_ROW, chrome_trace
    from explorer._src.ui.timeline import trace_figure

    report, profile, chip = chip_run
    doc = json.loads(json.dumps(chrome_trace(report)))
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    processes = [e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"]
    assert processes == ["predicted step on tpu-v5e-1x1",
                         "measured on 1 tpu device(s) (the profile's median call)"]
    measured = [e for e in doc["traceEvents"] if e.get("cat") == "measured"]
    counts = {line.split(" | ")[1]: int(line.split(" | ")[2]) for line in chip["lines"]}
    assert len(measured) == (counts["XLA Ops"] + counts["Async XLA Ops"]) // 5    # one call
    softmax = [e for e in measured if e["args"]["hlo"] == "fusion.11"]
    assert len(softmax) == 1
    # The chip's 437 ms for the softmax it could not cost, beside the prediction's time for it.
    assert softmax[0]["dur"] == pytest.approx(chip["op_ns_per_call"]["fusion.11"][0] / 1e3,
                                              rel=0.02)
    assert softmax[0]["args"]["predicted_us"] == pytest.approx(
        sum(e.duration for e in report.trace.events if e.hlo == "fusion.11") * 1e6)
    assert softmax[0]["args"]["source"].endswith("test_op_comparison.py:31")
    # The format's rule: events of one thread never overlap.
    for key in names:
        row = sorted((e["ts"], e["ts"] + e["dur"]) for e in doc["traceEvents"]
                     if e["ph"] == "X" and (e["pid"], e["tid"]) == key)
        assert all(a_end <= b_start + 1e-3
                   for (_, a_end), (b_start, _) in zip(row, row[1:], strict=False))

    fig = trace_figure(report.trace, report.timing.measured_events)
    lanes = list(fig.layout.yaxis.categoryarray)
    assert lanes[:2] == ["compute", "communication"] and MEASURED_ROW in lanes
    bars = next(b for b in fig.data if b.name == "measured on the device")
    assert len(bars.y) == len(profile.call_events)
    # The measured call ends with the chip's module run, 449 ms.
    assert re.search(r"measured on the device: 449(\.\d)? ms", fig.layout.title.text)


@pytest.fixture(scope="module")
def chip_run(tmp_path_factory):
    """The attention's Report (compiled here by libtpu for one v5e chip) with the chip's run of
    it from the kept profile, the profile, and what the chip recorded of the run."""
    qkv = jax.ShapeDtypeStruct((B, S, H, D), jnp.bfloat16)
    report = explorer.analyze(attention, qkv, qkv, qkv, mesh="data=1", target="tpu-v5e-1x1")
    folder = tmp_path_factory.mktemp("profiles")
    with tarfile.open(RUN / "profiles.tar.gz") as tar:
        tar.extractall(folder, filter="data")
    profile = read_device_profile(
        str(folder / "profiles" / "causal_attention_float32_softmax" / "run.xplane.pb"), 5)
    report = report.with_timing(replace(
        report.timing, measured_s=0.451, measured_on="1 tpu device(s)",
        measured_device_s=profile.module_seconds, measured_ops=dict(profile.op_seconds),
        measured_events=profile.call_events))
    recorded = json.loads((RUN / "programs.json").read_text())
    chip = next(p for p in recorded["programs"] if p["name"] == "causal_attention_float32_softmax")
    return report, profile, chip
