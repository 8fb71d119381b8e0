"""The Suggest tab without a browser: set the controls, click Start, wait for the search, and
check what the tab shows against explorer.search called directly (the ground truth), and what
Apply puts in the editors against explorer.analyze_workload / explorer.analyze of that
candidate. No event loop runs here, so the tab's updates are made on the search's thread and
`wait()` returns once the results are drawn."""

import re
from html import unescape

import jax
import pytest

import explorer
from explorer import TensorSpec as T

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")

from explorer._src.spec.tensor import entry_axes, normalize_spec  # noqa: E402
from explorer._src.ui.app import TAB_TITLES  # noqa: E402
from explorer._src.units import (
    format_bytes,  # noqa: E402
    format_seconds,  # noqa: E402
)
from explorer.ui import Explorer, explore  # noqa: E402

# A small MLP: every compile takes a fraction of a second on 8 fake devices.
SMALL = {"batch": 64, "d_model": 64, "d_ff": 256}
WAIT_S = 600


def open_tab(app):
    app.tabs.selected_index = TAB_TITLES.index("Suggest")
    return app.suggest


def run(view, budget="120"):
    view.budget_w.value = budget
    view.start_w.click()
    assert view.wait(WAIT_S), "the search did not end"
    assert view.message.value == "", unescape(view.message.value)


def table_rows(view) -> list[tuple[str, str]]:
    """(label, the row's text) of every row of the results table, top to bottom."""
    rows = re.findall(r"<tr class='[^']*' data-label='([^']*)'>(.*?)</tr>", view.table.value)
    return [(unescape(label), unescape(re.sub(r"<[^>]+>", " ", body))) for label, body in rows]


def marked_rows(view) -> list[int]:
    """The rows (0 = the first) marked as the sidebar's layout now."""
    classes = re.findall(r"<tr class='([^']*)' data-label=", view.table.value)
    return [i for i, cls in enumerate(classes) if "explorer-current" in cls.split()]


def collectives(report):
    return [(c.kind, c.axes, c.bytes) for c in report.collectives]


def same_program(report, direct):
    """The app's report and a direct analysis of the same request: the same collectives,
    memory per device and predicted step, and the same spec of every input."""
    assert collectives(report) == collectives(direct)
    assert report.memory.total == direct.memory.total
    assert report.estimate.step_trace_seconds == direct.estimate.step_trace_seconds
    specs = {t.name: t.spec for t in direct.tensors if t.kind == "input"}
    assert {t.name: t.spec for t in report.tensors if t.kind == "input"} == specs


@pytest.fixture
def mlp_app():
    app = Explorer(workload="mlp", mesh="data=2,model=4", target="h100-8", params=SMALL,
                   debounce=None)
    yield app
    app.close()


@pytest.mark.slow   # compile-heavy: the full suite runs it, the inner loop does not
def test_workload_search_ranks_as_the_api_and_apply_loads_the_winner(mlp_app, cpu_screen):
    app = mlp_app
    view = open_tab(app)
    # The spaces the API offers for a workload with logical names, and its names.
    assert [v for _, v in view.space_w.options] == ["rules", "specs"]
    assert list(view.chosen_w.allowed_tags) == ["batch", "embed", "mlp"]
    view.chosen_w.value = ["batch", "mlp"]
    run(view)

    expected = explorer.search("mlp", mesh="data=2,model=4", target="h100-8", params=SMALL,
                               names=["batch", "mlp"], budget_s=120)
    assert expected.stats.stopped == "complete"
    best = expected.best
    rows = table_rows(view)
    assert len(rows) == len(expected.candidates)
    assert [label for label, _ in rows] == [c.label for c in expected.candidates]
    label, text = rows[0]
    assert label == best.label
    assert format_seconds(best.seconds) in text and format_bytes(best.memory_bytes) in text
    assert "winner" in view.table.value.split("</tr>")[1]          # the first row is marked
    n = expected.stats.distinct
    assert view.bar.value == view.bar.max == n
    # The counts are the result's: compiled, estimated or failed, the pruned beside them.
    e, pruned = expected.stats.evaluated, expected.stats.pruned_bound + expected.stats.pruned_memory
    assert e + pruned == n
    assert view.progress_w.value.startswith(f"complete: evaluated {e} of {n} distinct layouts")
    assert (f", {pruned} pruned by a bound" in view.progress_w.value) == (pruned > 0)
    assert best.label in unescape(view.summary.value)
    why = unescape(view.why.value)
    assert all(line.strip() in why for line in expected.comparison.text.splitlines())
    # The sidebar's layout (nothing split: no specs, preset or rules) is marked in the table,
    # on the one row whose candidate splits no input; the front column is explained.
    marked = marked_rows(view)
    assert len(marked) == 1
    unsplit = [c.label for c in expected.candidates
               if all(not any(entry_axes(e) for e in normalize_spec(text))
                      for text in c.specs.values())]
    assert unsplit == [rows[marked[0]][0]]
    assert "no other is both faster and smaller" in unescape(view.table.value)
    # The plot: every compiled candidate once (those of the same time and memory on one point,
    # its hover naming each), the front and the winner on their own traces.
    traces = {t.name: t for t in view.fig.data}
    named = [label for name, t in traces.items() if not name.startswith("winner")
             for d in t.customdata for label in unescape(d[0]).split("<br>")]
    assert sorted(named) == sorted(c.label for c in expected.candidates)
    assert best.label in unescape(traces["winner (fastest that fits)"].customdata[0][0])
    assert view.fig.layout.xaxis.title.text.startswith("predicted step time")
    assert view.fig.layout.yaxis.title.text == "memory per device"

    # Apply the winner: its mesh and rules go into the editors, and the app's report is the
    # direct analysis of that layout.
    view.pick_w.value = 0
    view.apply_w.click()
    assert view.message.value == "" and app.error is None
    app.tabs.selected_index = TAB_TITLES.index("Suggest")       # drawn for the new result
    assert marked_rows(view) == [0]                          # the winner is the layout now
    assert app.mesh_editor.axes == list(zip(best.mesh.names, best.mesh.sizes, strict=True))
    assert app.rules_w.value == best.rules and app.preset_w.value == ""
    direct = explorer.analyze_workload("mlp", best.mesh, params=SMALL, rules=best.rules,
                                       target="h100-8")
    same_program(app.report, direct)

    # A candidate that pays a collective (mlp over an axis): the same holds.
    index, cand = next((i, c) for i, c in enumerate(view.result.candidates)
                       if "mlp=" in c.rules and c.collectives)
    view.pick_w.value = index
    view.apply_w.click()
    assert app.rules_w.value == cand.rules
    direct = explorer.analyze_workload("mlp", cand.mesh, params=SMALL, rules=cand.rules,
                                       target="h100-8")
    assert collectives(direct)
    same_program(app.report, direct)

    # Another workload is shown now: the result no longer applies, and the tab says so; the
    # rules Apply put in the rules box go with it.
    app.workload_w.value = "matmul"
    assert app.rules_w.value == ""
    view.apply_w.click()
    assert "this search was of workload 'mlp'" in unescape(view.message.value)


def layer(x, w1, w2):
    return jax.nn.relu(x @ w1) @ w2


@pytest.mark.slow   # compile-heavy: the full suite runs it, the inner loop does not
def test_search_of_a_user_function_matches_the_api_and_apply_pins_the_specs(cpu_screen):
    # w2 split on its rows (Megatron's second matmul) and w1 on its rows too, which makes x @ w1
    # a partial sum; the search looks for w1's spec with the others kept.
    x = T("x", (64, 128), spec="data,None")
    w1, w2 = T("w1", (128, 256), spec="model,None"), T("w2", (256, 128), spec="model,None")
    app = explore(layer, x, w1, w2, mesh="data=2,model=2", target="h100-4", debounce=None)
    try:
        view = open_tab(app)
        assert [v for _, v in view.space_w.options] == ["specs"]
        assert list(view.chosen_w.allowed_tags) == ["x", "w1", "w2"]
        view.chosen_w.value = ["w1"]
        view.shapes_w.value = False
        run(view)
        expected = explorer.search(layer, x, w1, w2, mesh="data=2,model=2", target="h100-4",
                                   tensors=["w1"], mesh_shapes=False, budget_s=120)
        assert expected.stats.stopped == "complete"
        best = expected.best
        rows = table_rows(view)
        assert [label for label, _ in rows] == [c.label for c in expected.candidates]
        assert format_seconds(best.seconds) in rows[0][1]
        # The winner's w1 spec, as its label writes it ("replicated" when not split).
        spec = () if best.specs["w1"] == "replicated" else normalize_spec(best.specs["w1"])
        spec = spec + (None,) * (2 - len(spec))
        assert spec != ("model", None)          # the search found a better one than the start

        view.apply_w.click()                 # the first option: the winner
        assert view.message.value == ""
        assert app.spec_rows["w1"].spec == spec and "w1" in app.pinned
        assert app.spec_rows["x"].spec == ("data", None)      # not searched: kept
        assert app.spec_rows["w2"].spec == ("model", None)
        direct = explorer.analyze(layer, x, T("w1", (128, 256), spec=spec), w2,
                                  mesh=best.mesh, target="h100-4")
        same_program(app.report, direct)
        assert app.report.workload.specs.get("w1", "replicated") == best.specs["w1"]
    finally:
        app.close()


def test_cancel_stops_the_search_before_the_end(mlp_app, cpu_screen):
    # cpu_screen: candidates that take a compile each, so that the cancel comes before the
    # end (the estimate screen settles this small space in well under a second).
    view = open_tab(mlp_app)
    view.budget_w.value = ""                   # no budget: only the cancel can stop it

    def cancel_after_two(change):
        if change["new"] >= 2:
            view.cancel_w.click()              # as the user does, seeing 2 of N

    view.bar.observe(cancel_after_two, "value")
    view.start_w.click()
    assert view.wait(WAIT_S)
    stats = view.result.stats
    assert stats.stopped == "cancelled"
    assert stats.not_evaluated > 0
    assert stats.distinct - stats.not_evaluated < stats.distinct
    assert "cancelled: evaluated" in view.progress_w.value
    assert "cancelled" in unescape(view.summary.value)
    assert "Compiled on this machine's worker pool." in unescape(view.table.value)
    assert not view.start_w.disabled and view.cancel_w.disabled


@pytest.mark.slow
def test_an_edit_during_the_search_leaves_it_on_the_request_it_started_with(mlp_app,
                                                                            cpu_screen):
    app = mlp_app
    view = open_tab(app)
    view.chosen_w.value = ["batch", "mlp"]
    view.shapes_w.value = False
    view.budget_w.value = ""
    edited = []

    def edit_once(change):
        # While the search runs: the mesh loses half its devices and x gets a spec.
        if change["new"] >= 1 and not edited:
            edited.append(True)
            app.mesh_editor.row("model").size_w.value = 2
            app.spec_rows["x"].pickers[0].value = ["data"]

    view.bar.observe(edit_once, "value")
    view.start_w.click()
    assert view.wait(WAIT_S)
    assert edited and app.report.mesh.device_count == 4        # the edit was compiled
    expected = explorer.search("mlp", mesh="data=2,model=4", target="h100-8", params=SMALL,
                               names=["batch", "mlp"], mesh_shapes=False)
    assert [c.label for c in view.result.candidates] == [c.label for c in expected.candidates]
    assert "Edits made since Start do not change this result" in view.summary.value


def refused(view, box, text: str) -> str:
    """Type `text` into `box` and press Start: no search starts; the tab's message."""
    box.value = text
    view.start_w.click()
    assert not view.running and view.job is None
    return unescape(view.message.value)


def test_bad_input_gives_one_message_in_the_tab(mlp_app):
    app = mlp_app
    view = open_tab(app)
    for text in ("soon", "-3", "0", "nan", "inf", "1e400"):
        assert refused(view, view.budget_w, text) == (
            f"budget {text!r} is not a positive number of seconds; type e.g. 60, or leave it "
            "empty for no limit")
    # An error in the sidebar: nothing is searched until it is fixed.
    view.budget_w.value = "60"
    app.mesh_editor.row("model").size_w.value = 0
    view.start_w.click()
    assert not view.running and view.job is None
    message = unescape(view.message.value)
    assert message.startswith("fix the sidebar first:") and "size 0" in message
    # No target: a search has nothing to rank by.
    app.mesh_editor.row("model").size_w.value = 4
    app.target_w.value = ""
    view.start_w.click()
    assert not view.running and view.job is None
    assert "needs a target: pick one under target in the sidebar" in unescape(
        view.message.value)
    # Apply before any search.
    view.apply_w.disabled = False
    view.apply_w.click()
    assert unescape(view.message.value) == "no candidate to apply: run a search first"


def test_a_malformed_cluster_list_offers_this_machine_and_says_what_is_wrong(mlp_app,
                                                                             monkeypatch):
    """The clusters come from the server's EXPLORER_CLUSTERS (tests/ui/test_security.py); an
    entry that is not a Ray address is named under the choice, and only this machine is
    offered."""
    for text in ("head", "head:port", "127.0.0.2:0", "127.0.0.2:70000", "two words:6379"):
        monkeypatch.setenv("EXPLORER_CLUSTERS", f"127.0.0.2:6390,{text}")
        view = open_tab(mlp_app)
        view.refresh()
        assert list(view.cluster_w.options) == [("this machine", None)]
        assert view.cluster_w.disabled
        assert unescape(view.cluster_note.value) == (
            f"<span class='explorer-note'>cluster {text!r} is not a Ray address: give "
            "'HOST:PORT', 'ray://HOST:PORT', 'auto' or 'local', or remove it from "
            "EXPLORER_CLUSTERS</span>")


def test_a_failed_candidate_is_a_row_with_its_error():
    from explorer._src.layout_search.result import (
        Candidate,
        CandidateStatus,
        SearchResult,
        SearchStats,
    )
    from explorer._src.spec.mesh import parse_mesh
    from explorer._src.ui.suggest.tables import results_html

    mesh = parse_mesh("data=2,model=4")
    ok = Candidate("data=2,model=4: batch=data", mesh, "batch=data", {}, {}, CandidateStatus.OK,
                   seconds=2e-6, time_source="trace", lower_seconds=1e-6, upper_seconds=3e-6,
                   memory_bytes=3 * 1024 * 1024, fits=True, collective_bytes=4096)
    bad = Candidate("data=2,model=4: mlp=model", mesh, "mlp=model", {}, {},
                    CandidateStatus.FAILED, error="CompileError: no memory for <this>\nmore")
    stats = SearchStats(2, 0, 0, 2, 1, 1, 0, 0, 0, 0, 1.0, "complete", True)
    page = results_html(SearchResult("mlp", "rules", "h100-8", "t", (ok, bad), (ok,), None,
                                     stats))
    rows = re.findall(r"<tr class='([^']*)' data-label='([^']*)'>(.*?)</tr>", page, re.S)
    assert [(cls, label) for cls, label, _ in rows] == [
        ("explorer-winner", "data=2,model=4: batch=data"),
        ("explorer-failed", "data=2,model=4: mlp=model")]
    ok_text = unescape(re.sub(r"<[^>]+>", " ", rows[0][2]))
    assert "2 µs" in ok_text and "bounds 1 µs – 3 µs" in ok_text
    assert "3.0 MiB" in ok_text and "4.0 KiB" in ok_text and "●" in ok_text
    # The first line of the error in the row, all of it on hover, escaped.
    assert "failed: CompileError: no memory for &lt;this&gt;</td>" in rows[1][2]
    assert "title='CompileError: no memory for &lt;this&gt;\nmore'" in rows[1][2]


def test_a_search_on_a_cluster_says_where_and_which_candidates_were_sent_again():
    from dataclasses import replace

    from explorer._src.layout_search.connect import ClusterSize
    from explorer._src.layout_search.result import (
        Candidate,
        CandidateStatus,
        SearchResult,
        SearchStats,
    )
    from explorer._src.spec.mesh import parse_mesh
    from explorer._src.ui.suggest.tables import results_html

    mesh = parse_mesh("data=2,model=4")
    once = Candidate("data=2,model=4: batch=data", mesh, "batch=data", {}, {},
                     CandidateStatus.OK, seconds=2e-6, memory_bytes=1024, fits=True)
    again = replace(once, label="data=2,model=4: mlp=model", rules="mlp=model", seconds=3e-6,
                    retries=2)
    stats = SearchStats(2, 0, 0, 2, 2, 0, 0, 0, 0, 0, 1.0, "complete", True,
                        cluster="127.0.0.1:6390", cluster_size=ClusterSize(2, 4), retried=1)
    page = results_html(SearchResult("mlp", "rules", "h100-8", "t", (once, again), (once,),
                                     None, stats))
    assert "Compiled on the Ray cluster at 127.0.0.1:6390, 2 nodes, 4 CPUs." in page
    cells = re.findall(r"<td>([^<]*)</td></tr>", page)
    assert cells == ["ok", "ok (sent again 2× after its Ray worker was lost)"]


def test_the_search_compiles_for_what_the_sidebar_compiles_for(mlp_app):
    # The sidebar's "compile on CPU devices" switch is the one explicit switch away from the
    # target's own compiler; the tab's search must follow it like every other compile.
    from explorer._src.ui.suggest.job import make_job
    for cpu, want in ((False, "target"), (True, "cpu")):
        mlp_app.cpu_w.value = cpu
        source, request = mlp_app._search_snapshot()
        job = make_job(source, request, "rules", (), False, None)
        assert job.analysis.compile_for == want


def test_the_progress_says_when_the_target_compiler_confirms_the_screens_best():
    from explorer._src.layout_search.result import Progress, SearchPhase
    from explorer._src.ui.suggest.tables import progress_text

    screening = Progress(SearchPhase.COMPILE, 3, 40, 3, 0, 0, 0.25, "data=8: batch=data",
                         "data=8: mlp=data", 12.0)
    confirming = Progress(SearchPhase.CONFIRM, 40, 40, 12, 28, 0, 0.25, "data=8: batch=data",
                          "data=8: batch=data", 30.0)
    assert "compiling <code>data=8: mlp=data</code> ·" in progress_text(screening)
    assert ("confirming <code>data=8: batch=data</code> with the target's compiler"
            in progress_text(confirming))
    # Issue 53: the panel said "evaluated" of the settled (the pruned among them) while the
    # summary counted the compiled and estimated. Now both count compiled + estimated +
    # failed, and the pruned beside: 12 compiled and 28 pruned of 40.
    assert "evaluated 12 of 40 (12 compiled), 28 pruned by a bound" in progress_text(confirming)
    estimating = Progress(SearchPhase.ESTIMATE, 900, 5000, 1, 0, 0, 0.25, "data=8: batch=data",
                          "data=8: mlp=data", 20.0, estimated=899)
    assert "evaluated 900 of 5,000 (899 estimated, 1 compiled)," in progress_text(estimating)
    assert "estimating (no compile) <code>data=8: mlp=data</code>" in progress_text(estimating)


def test_the_counts_and_the_ranking_basis_are_one_in_the_result_the_cli_and_the_panel():
    # Issue 53, the panel that disagreed with itself: "evaluated 1075 (1071 estimated)" beside
    # "1074 screened ... 4 compiled", and a compiled row at 61.2 µs ranked above an estimated
    # one at 32.6 µs with no word on why. A search that estimated 1,071 candidates and had 4
    # compiled by XLA's GPU compiler evaluated 1,071 + 4 = 1,075 of 8,620; every summary says
    # so in the same words, and the table says on what each group is ranked.
    from types import SimpleNamespace

    from explorer._src.layout_search import result as r
    from explorer._src.spec.mesh import parse_mesh
    from explorer._src.ui.suggest import tables

    Candidate, CandidateStatus, CompiledBy = r.Candidate, r.CandidateStatus, r.CompiledBy
    mesh = parse_mesh("data=2,model=4")
    compiled = Candidate("data=2,model=4: batch=data", mesh, "batch=data", {}, {},
                         CandidateStatus.OK, seconds=61.2e-6, time_source="trace",
                         memory_bytes=2 ** 20, fits=True, compiled_by=CompiledBy.GPU)
    estimated = Candidate("data=2,model=4: mlp=model", mesh, "mlp=model", {}, {},
                          CandidateStatus.ESTIMATED, seconds=32.6e-6,
                          time_source="estimate, not compiled", memory_bytes=2 ** 19,
                          compiled_by=CompiledBy.ESTIMATE)
    stats = r.SearchStats(
        space=40390, invalid=9260, equivalent=22510, distinct=8620, compiled=4, failed=0,
        does_not_fit=0, pruned_bound=0, pruned_memory=0, not_evaluated=7545, seconds=60.0,
        stopped="budget", prune=True, screened=1075, confirmed=4, confirmed_by=CompiledBy.GPU,
        screened_by=CompiledBy.ESTIMATE, estimated=1071, budget_s=60.0)
    result = r.SearchResult("transformer_train", "rules", "h100-8", "t",
                            (compiled, estimated), (compiled,), None, stats)
    words = "evaluated 1,075 of 8,620 distinct layouts (1,071 estimated, 4 compiled, 0 failed)"
    assert stats.evaluated == 1075 and result.to_dict()["stats"]["evaluated"] == 1075
    assert words in result.text()                                         # the CLI's summary
    assert words in unescape(tables.summary_html(SimpleNamespace(describe=lambda: "it"),
                                                 result))
    assert "1075 screened by their estimate" in result.text()     # the screen: the same 1,075
    basis = ("Ranked in two groups: the 1 compiled by XLA's GPU compiler first, by the "
             "compiled program's predicted step; then the 1 screened only, by their estimate")
    assert result.ranking_text().startswith(basis)
    page = tables.results_html(result)
    assert basis in unescape(page)
    rows = re.findall(r"<tr class='[^']*' data-label='([^']*)'>(.*?)</tr>", page, re.S)
    assert [label for label, _ in rows] == [compiled.label, estimated.label]
    assert "(trace, XLA's GPU compiler)" in unescape(rows[0][1])
    assert "(estimate, not compiled)" in unescape(rows[1][1])
    # The plot counts its points as the table does: one compiled, one estimated.
    from explorer._src.ui.suggest.pareto import pareto_figure
    figure = pareto_figure(result)
    assert "2 candidates: 1 compiled, 1 estimated" in figure.layout.title.text
    figure.close()
