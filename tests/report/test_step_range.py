"""The step range end to end: a user's embedding gradient compiled by libtpu for one TPU v5e chip
(ahead of time, no chip here), its scatter-add a kind the chip ran slower than the model, and
a plain matmul, every instruction of a measured kind. The CLI summary and the Timing tab name
the line the scatter came from."""

from __future__ import annotations

import importlib.util
from html import unescape

import jax
import jax.numpy as jnp
import pytest

import explorer
from explorer._src.report.summary import summary
from explorer._src.ui.timeline import timing_html

pytestmark = [pytest.mark.tpu, pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("libtpu") is None,
                                 reason="libtpu (the tpu extra) is not installed")]


def embedding_grad(table, ids, g):
    return jnp.zeros_like(table).at[ids].add(g)   # the scatter-add


def _line(marker: str) -> int:
    with open(__file__) as f:
        return next(n for n, line in enumerate(f, 1) if marker in line and "#" in line)


def test_a_scatter_widens_the_step_and_the_cli_and_the_timeline_name_its_line():
    report = explorer.analyze(embedding_grad, jax.ShapeDtypeStruct((32000, 1024), jnp.float32),
                              jax.ShapeDtypeStruct((16384,), jnp.int32),
                              jax.ShapeDtypeStruct((16384, 1024), jnp.float32),
                              mesh="data=1", target="tpu-v5e-1x1")
    rng = report.estimate.step_range
    scatter = next(p for p in rng.parts if p.kind == "scatter")
    assert scatter.measured
    # Its high end is 4.25x its prediction (the worst scatter measured on the chip); the step's
    # is the step plus what each widening instruction may add.
    assert scatter.high_s == pytest.approx(4.25 * scatter.predicted_s)
    assert rng.high_seconds == pytest.approx(
        rng.seconds + sum(p.high_s - p.predicted_s for p in rng.parts))
    assert rng.high_seconds >= 2 * rng.seconds and rng.cautions
    where = f"test_step_range.py:{_line('the scatter-add')}"
    assert scatter.source.endswith(where)
    text = summary(report)
    assert "range    " in text and f"{where}, predicted" in text
    table = text.split("What widens the step's range on a TPU v5e", 1)[1]
    row = next(line for line in table.splitlines() if line.startswith("scatter"))
    assert "measured slower" in row and row.rstrip().endswith(where)
    html = unescape(timing_html(report))
    assert "Step range on tpu-v5e-1x1" in html and where in html


def test_a_matmul_is_one_number_in_the_cli():
    report = explorer.analyze(lambda a, b: a @ b,
                              jax.ShapeDtypeStruct((4096, 4096), jnp.bfloat16),
                              jax.ShapeDtypeStruct((4096, 4096), jnp.bfloat16),
                              mesh="data=1", target="tpu-v5e-1x1")
    rng = report.estimate.step_range
    assert rng.low_seconds == rng.seconds == rng.high_seconds and rng.cautions == ()
    # 2 * 4096^3 FLOPs at 0.97 x 197 TFLOP/s.
    assert rng.seconds == pytest.approx(2 * 4096 ** 3 / (197e12 * 0.97), rel=1e-6)
    assert "range    719 µs (every instruction of a kind measured on a TPU v5e)" \
        in summary(report)
