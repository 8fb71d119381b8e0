"""The Suggest tab's Pareto plot: predicted step time against memory per device, one point per
timed candidate (an estimated one open), in the colours below."""

from __future__ import annotations

import html

import plotly.graph_objects as go

from explorer._src.layout_search.result import (
    Candidate,
    CandidateStatus,
    CompiledBy,
    SearchResult,
    basis,
    basis_count,
)
from explorer._src.ui.figure import FigureWidget, keep_state
from explorer._src.ui.memory import binary_ticks
from explorer._src.units import format_bytes, format_seconds

CANDIDATE_COLOUR = "#94a3b8"   # slate-400: a compiled candidate
FRONT_COLOUR = "#2563eb"       # blue-600: the Pareto front
WINNER_COLOUR = "#f59e0b"      # amber-500: the winner
NO_FIT_COLOUR = "#dc2626"      # red-600: does not fit the chip's memory


def pareto_figure(result: SearchResult) -> go.FigureWidget:
    """Predicted step time against memory per device, one point per timed candidate; the
    Pareto front joined, the winner starred, candidates that do not fit crossed."""
    timed = [c for c in result.candidates
             if c.seconds is not None and c.memory_bytes is not None]
    front = [c for c in result.pareto if c.memory_bytes is not None]
    best = result.best
    fig = FigureWidget()

    def add(cands, name, colour, symbol, size, mode="markers"):
        if not cands:
            return
        # Candidates of the same time and memory (often one program on mirrored mesh shapes,
        # 2x4 and 4x2) are one point, whose hover names them all.
        same: dict[tuple, list[Candidate]] = {}
        for c in cands:
            same.setdefault((c.seconds, c.memory_bytes), []).append(c)
        cands = [group[0] for group in same.values()]
        labels = ["<br>".join(html.escape(x.label) for x in group) for group in same.values()]
        fig.add_scatter(
            x=[c.seconds for c in cands], y=[c.memory_bytes for c in cands], name=name,
            mode=mode, marker=dict(color=colour, symbol=symbol, size=size,
                                   line=dict(color="#1f2937", width=1)),
            line=dict(color=colour, width=2),
            customdata=[[label, format_seconds(c.seconds), format_bytes(c.memory_bytes),
                         format_bytes(c.collective_bytes)] for c, label in zip(cands, labels,
                                                                             strict=True)],
            hovertemplate=("<b>%{customdata[0]}</b><br>predicted step %{customdata[1]}<br>"
                           "memory per device %{customdata[2]}<br>collectives per device "
                           "%{customdata[3]}<extra>" + name + "</extra>"))

    on_front = {id(c) for c in front}
    fits = [c for c in timed if c.status is not CandidateStatus.DOES_NOT_FIT]
    others = [c for c in fits if id(c) not in on_front]
    # An estimated point is not a compiled one (its memory is a lower bound): open circles.
    add([c for c in others if c.compiled_by is not CompiledBy.ESTIMATE], "other candidates",
        CANDIDATE_COLOUR, "circle", 8)
    add([c for c in others if c.compiled_by is CompiledBy.ESTIMATE],
        "other candidates, estimated (memory ≥)", CANDIDATE_COLOUR, "circle-open", 8)
    add([c for c in timed if c.status is CandidateStatus.DOES_NOT_FIT],
        "does not fit the chip's memory", NO_FIT_COLOUR, "x", 9)
    # The front is taken among the candidates of one basis (ranking.basis); the legend says
    # which, with the count the summary gives.
    ranked = list(result.candidates)
    on = basis(ranked)
    among = (f" among {basis_count(ranked, on):,} "
             f"{'estimated' if on is CompiledBy.ESTIMATE else 'compiled'}" if on else "")
    add(sorted(front, key=lambda c: c.seconds), f"Pareto front{among} (nothing of them is both "
        "faster and smaller)", FRONT_COLOUR,
        "circle-open" if on is CompiledBy.ESTIMATE else "circle", 10, mode="lines+markers")
    if best is not None and best.memory_bytes is not None:
        add([best], "winner (fastest that fits)", WINNER_COLOUR, "star", 18)
    times = [c.seconds for c in timed if c.seconds > 0]
    log_x = bool(times) and max(times) / min(times) > 20
    top = max([c.memory_bytes for c in timed] or [1]) * 1.1
    ticks = binary_ticks(top)
    # The counts the result gives (SearchStats.evaluated_text), written as the page writes
    # them (1,080), under a short title: a long one is clipped at the figure's width.
    estimated = sum(c.compiled_by is CompiledBy.ESTIMATE for c in timed)
    points = (f"{len(timed):,} compiled candidate{'s' if len(timed) != 1 else ''}"
              if not estimated else
              f"{len(timed):,} candidates: {len(timed) - estimated:,} compiled, "
              f"{estimated:,} estimated")
    fig.update_layout(
        title=dict(text=f"predicted step time against memory per device on "
                        f"{html.escape(result.target)}<br><sup>{points} · lower left is "
                        "better</sup>", x=0.01, xanchor="left"),
        height=470, width=820, margin=dict(l=90, r=20, t=70, b=90),
        xaxis=dict(title="predicted step time" + (" (log scale)" if log_x else ""),
                   type="log" if log_x else "linear", exponentformat="SI", ticksuffix="s",
                   rangemode="tozero" if not log_x else "normal"),
        yaxis=dict(title="memory per device", range=[0, top], tickvals=ticks,
                   ticktext=[format_bytes(t) if t else "0" for t in ticks]),
        legend=dict(orientation="h", x=0, y=-0.2, yanchor="top", font=dict(size=11)))
    keep_state(fig)
    return fig
