"""The Suggest tab's HTML: its style sheet (`_CSS`), the progress line, the search's summary, the
ranked candidates' table (at most `MAX_ROWS` rows; the app's layout now marked, the Pareto front
noted, each candidate's status and bounds), why the winner beats the runner-up, and the search
guide (docs/search.md) that opens in the tab."""

from __future__ import annotations

import html
from pathlib import Path

from explorer._src.layout_search.result import (
    Candidate,
    CandidateStatus,
    CompiledBy,
    Progress,
    SearchPhase,
    SearchResult,
    SearchStats,
    basis,
    basis_text,
    memory_text,
)
from explorer._src.ui.suggest.job import SearchJob
from explorer._src.units import format_bytes, format_seconds

MAX_ROWS = 100                 # table rows drawn; the rest are counted

_CSS = """<style>
.explorer-suggest-table .explorer-table-wrap { max-height: 330px; overflow-y: auto; }
.explorer-suggest-table .explorer-table th { position: sticky; top: 0; background: #fff; }
.explorer-suggest-table td.explorer-num { text-align: right;
  font-variant-numeric: tabular-nums; }
.explorer-suggest-table tr.explorer-winner { background: #fef3c7; }
.explorer-suggest-table td.explorer-layout { white-space: normal; overflow-wrap: anywhere;
  min-width: 200px; }
.explorer-suggest-table tr.explorer-current td { border-top: 2px solid #2563eb;
  border-bottom: 2px solid #2563eb; }
.explorer-current-badge { background: #dbeafe; color: #1e3a8a; border-radius: 8px;
  padding: 0 6px; font-size: 11px; margin-left: 6px; white-space: nowrap; }
.explorer-suggest-why ul { margin: 2px 0 0 0; padding-left: 18px; font-size: 12px; }
.explorer-suggest-why li, .explorer-suggest-why p { overflow-wrap: break-word;
  word-break: normal; }
.explorer-doc summary { cursor: pointer; color: #1d4ed8; text-decoration: underline;
  display: inline; }
.explorer-doc-body { max-height: 420px; overflow: auto; border: 1px solid #ddd;
  padding: 4px 10px; font-size: 12px; margin-top: 4px; }
.explorer-doc-body pre { white-space: pre-wrap; word-break: normal; }
.explorer-suggest-table tr.explorer-failed td { color: #b00020; }
.explorer-suggest-table tr.explorer-no-fit td { color: #9a3412; }
.explorer-suggest-progress { font-size: 12px; }
.explorer-suggest .widget-html-content { line-height: 1.35; }
.explorer-suggest-table small.explorer-bounds { color: #555; display: block; }
</style>"""


def where_text(stats: SearchStats) -> str:
    """Where a search compiled its candidates: 'on the Ray cluster at 127.0.0.1:6390, 2 nodes,
    4 CPUs', or 'on this machine's worker pool'."""
    if stats.cluster is None:
        return "on this machine's worker pool"
    size = f", {stats.cluster_size.text()}" if stats.cluster_size is not None else ""
    return f"on the Ray cluster at {stats.cluster}{size}"


def progress_text(p: Progress) -> str:
    """'evaluated k of N, best so far: <label> <time>', and what is compiling."""
    if p.phase == "enumerate":
        return "enumerating the space…"
    best = (f"best so far: <b>{html.escape(p.best)}</b> {format_seconds(p.best_seconds)}"
            if p.best_seconds is not None else "no candidate timed yet")
    # The screen's best are compiled again by the target's own compiler at the end: the search
    # is then confirming, not looking further.
    doing = {SearchPhase.CONFIRM: "confirming",
             SearchPhase.ESTIMATE: "estimating (no compile)"}.get(p.phase, "compiling")
    target = " with the target's compiler" if p.phase == SearchPhase.CONFIRM else ""
    now = (f" · {doing} <code>{html.escape(p.current)}</code>{target}"
           if p.current and p.phase != "done" else "")
    # The counts SearchStats.evaluated gives at the end (compiled, estimated or failed); the
    # pruned, settled without being evaluated, beside them.
    extra = ", ".join(part for part in (f"{p.estimated:,} estimated" if p.estimated else "",
                                        f"{p.compiled:,} compiled" if p.compiled else "",
                                        f"{p.failed:,} failed" if p.failed else "") if part)
    pruned = f", {p.pruned:,} pruned by a bound" if p.pruned else ""
    return (f"evaluated {p.evaluated:,} of {p.total:,}{f' ({extra})' if extra else ''}{pruned}, "
            f"{best}{now} · {p.elapsed_s:.1f} s")


def _status_cell(c: Candidate) -> str:
    if c.status is CandidateStatus.FAILED:
        first = c.error.splitlines()[0] if c.error else "failed"
        return (f"<td title='{html.escape(c.error, quote=True)}'>failed: "
                f"{html.escape(first[:160])}</td>")
    if c.status is CandidateStatus.DOES_NOT_FIT:
        return "<td>does not fit the chip's memory</td>"
    if c.status is CandidateStatus.ESTIMATED:
        how = ("from the traced program" if c.compiled_by is CompiledBy.ESTIMATE
               else "by the stage model")
        return f"<td title='estimated {how}, not compiled'>estimated</td>"
    if c.retries:
        return (f"<td>ok (sent again {c.retries}× after its Ray worker was lost)</td>")
    return "<td>ok</td>"


def _bounds(c: Candidate) -> str:
    """The estimate's bounds on the step: communication fully overlapped, and not at all."""
    if c.lower_seconds is None and c.upper_seconds is None:
        return ""
    return (f"<small class='explorer-bounds'>bounds {format_seconds(c.lower_seconds)} – "
            f"{format_seconds(c.upper_seconds)}</small>")


def front_basis_text(result: SearchResult) -> str:
    """Among which candidates the front and the comparison are taken ('the 1,079 estimated
    from the traced program (...)'), the counts the summary gives; "" where none is timed."""
    ranked = list(result.candidates)
    on = basis(ranked)
    return "" if on is None else basis_text(ranked, on)


def front_note(result: SearchResult) -> str:
    """What the table's ● means, and among which candidates (ranking.basis): numbers of two
    bases (a compiled program's, the estimate's) are not one measure, so the front is taken
    on one."""
    among = front_basis_text(result)
    if not result.pareto:
        return "<b>Pareto front</b>: none (no candidate that fits was timed)."
    return (f"<b>Pareto front</b> (●) among {html.escape(among)}: of those that fit, no other "
            "is both faster and smaller in memory per device; the plot below joins them.")


def results_html(result: SearchResult, current: int | None = None) -> str:
    """The candidates best first: layout, predicted step and its bounds, memory and collective
    bytes per device, whether it is on the Pareto front, and its status (a failure's error).
    Candidate number `current` (0-based) is marked as the app's layout now."""
    front = {id(c) for c in result.pareto}
    rows = []
    for i, c in enumerate(result.candidates[:MAX_ROWS], 1):
        cls = ("explorer-winner" if c is result.best and i == 1 else
               "explorer-failed" if c.status is CandidateStatus.FAILED else
               "explorer-no-fit" if c.status is CandidateStatus.DOES_NOT_FIT else "")
        badge = ""
        if current == i - 1:
            cls += " explorer-current"
            badge = "<span class='explorer-current-badge'>◀ the sidebar's layout now</span>"
        # What the row is ranked by: its compiled program's numbers (and whose), or the estimate.
        basis = ", ".join(x for x in (str(c.time_source), str(c.compiled_by)
                                      if c.compiled_by not in (CompiledBy.ESTIMATE,
                                                               CompiledBy.NOT_COMPILED) else "")
                          if x)
        source = f" <small>({html.escape(basis)})</small>" if basis else ""
        time = format_seconds(c.seconds) if c.seconds is not None else "—"
        mem = memory_text(c, missing="—")
        coll = format_bytes(c.collective_bytes) if c.collective_bytes is not None else "—"
        rows.append(
            f"<tr class='{cls}' data-label='{html.escape(c.label, quote=True)}'>"
            f"<td class='explorer-num'>{i}</td><td class='explorer-layout'><code>"
            f"{html.escape(c.label)}</code>{badge}</td>"
            f"<td class='explorer-num'>{time}{source}{_bounds(c)}</td>"
            f"<td class='explorer-num'>{mem}</td><td class='explorer-num'>{coll}</td>"
            f"<td>{'●' if id(c) in front else ''}</td>{_status_cell(c)}</tr>")
    more = len(result.candidates) - MAX_ROWS
    tail = (f"<p class='explorer-note'>… {more} more candidates, ranked after these.</p>"
            if more > 0 else "")
    if current is not None and current >= MAX_ROWS:
        tail += (f"<p class='explorer-note'>The sidebar's layout now is #{current + 1}, "
                 "beyond the rows shown.</p>")
    elif current is None:
        tail += ("<p class='explorer-note'>The sidebar's layout now is not in the table: the "
                 "search pruned it, did not reach it, or it is outside the space searched.</p>")
    where = (f"<p class='explorer-note explorer-where'>Compiled "
             f"{html.escape(where_text(result.stats))}.</p>")
    if not result.candidates:
        return f"{where}<p>No candidate was evaluated (the search stopped before the first).</p>"
    ranking = (f"<p class='explorer-note explorer-ranking'>"
               f"{html.escape(result.ranking_text())}</p>")
    return (f"{where}{ranking}<div class='explorer-table-wrap'><table class='explorer-table'>"
            "<tr><th>#</th>"
            "<th>layout (mesh: rules or specs)</th>"
            "<th title='bounds: communication fully overlapped – nothing overlapped'>"
            "predicted step</th><th>memory / device</th><th>collectives / device</th>"
            "<th title='on the Pareto front: no other candidate of its basis (below) is both "
            "faster and smaller'>"
            "Pareto front</th><th>status</th></tr>"
            f"{''.join(rows)}</table></div>"
            f"<p class='explorer-note explorer-front'>{front_note(result)}</p>{tail}")


def summary_html(job: SearchJob, result: SearchResult) -> str:
    s = result.stats
    stopped = {"budget": "the time budget ran out, so the winner is the best found, not "
                         "proven best",
               "cancelled": "cancelled, so the winner is the best found before that",
               "patience": "stopped after compiles that did not improve the best"}.get(s.stopped)
    # The result's own headline, as the CLI prints it: it names no best from a handful of
    # candidates, and says which compiler the best's numbers come from.
    head = f"<b>{html.escape(result.headline())}</b>"
    return (f"<p>{head}<br><small>Searched {html.escape(job.describe())}. Edits made since Start "
            "do not change this result.</small></p>"
            f"<p class='explorer-note'>{html.escape(s.text())}."
            f"{' <b>' + html.escape(stopped) + '</b>.' if stopped else ''} Candidates pruned "
            "by a bound (shown not to win without compiling) or not evaluated are counted here, "
            "not listed.</p>")


def winner_comparison_html(comparison, result: SearchResult | None = None) -> str:
    """Why the winner beats the runner-up (or, where the winner's compiler timed no other, why
    the first of the basis the front is taken on beats its runner-up, and among which): the
    first line as a sentence, the rest as a list (in a proportional font, wrapped at spaces
    only)."""
    if comparison is None:
        if result is not None and result.best is None:
            return "<p class='explorer-note'>No comparison: no candidate that fits was timed.</p>"
        return ("<p class='explorer-note'>No comparison: fewer than two candidates that fit were "
                "timed on one basis (a compiled program's numbers and the estimate's are not one "
                "measure).</p>")
    head, *rest = comparison.text.splitlines()
    items = "".join(f"<li>{html.escape(line.strip())}</li>" for line in rest if line.strip())
    best = result.best if result is not None else None
    title = ("Why the winner beats the runner-up" if best is None
             or best.label == comparison.winner else
             f"Why the first of {front_basis_text(result)} beats the next")
    return (f"<b>{html.escape(title)}</b><p>{html.escape(head)}</p><ul>{items}</ul>")


def doc_html(name: str = "search.md") -> str:
    """docs/`name` as a link that opens it in the tab (the page may not reach the files the
    kernel can): its markdown, where this copy of the project has it."""
    path = Path(__file__).resolve().parents[4] / "docs" / name
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return f"<code>docs/{html.escape(name)}</code> in the project's repository"
    return (f"<details class='explorer-doc'><summary>docs/{html.escape(name)}</summary>"
            f"<div class='explorer-doc-body'><pre>{html.escape(text)}</pre></div></details>")
