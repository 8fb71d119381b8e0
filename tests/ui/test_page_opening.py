"""Issue 43 items 8 and 9: a page opening the exploration its URL names says what it opens,
with which compiler, under which limit and for how long, and on an error what to do, the
exploration's settings left loaded; the page's address follows the exploration shown, so that a
reload opens it again."""

import html
import re

import pytest

pytest.importorskip("ipywidgets")

from explorer._src.api.exploration import AppState, Exploration, from_link  # noqa: E402
from explorer._src.api.targeting import CompilePlan  # noqa: E402
from explorer._src.compile.gpu import GpuTopology  # noqa: E402
from explorer._src.compile.protocol import WorkerKey  # noqa: E402
from explorer._src.ui.opening import Opening, compiler_words, exploration_words  # noqa: E402
from explorer._src.ui.page import AppPage  # noqa: E402

DEFAULT = dict(workload="mlp", mesh="data=2,model=4", params={"batch": 64, "d_model": 64,
                                                               "d_ff": 256},
               specs={"x": "data,None", "w1": "None,model", "w2": "model,None"},
               debounce=None)


def words(value: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", value)).split())


@pytest.mark.parametrize("plan, target, devices, said", [
    (CompilePlan(WorkerKey.gpu(), gpu=GpuTopology("h100-8", "h100", 1, 8, "")), "h100-8", 8,
     "XLA's GPU compiler for 8 H100s (no GPU needed)"),
    (CompilePlan(WorkerKey.gpu(), gpu=GpuTopology("h100-8x8", "h100", 8, 8, "")), "h100-8x8",
     64, "XLA's GPU compiler for 64 H100s (8 nodes of 8) (no GPU needed)"),
    (CompilePlan(WorkerKey.tpu(), tpu_topology="v5e:4x4"), "tpu-v5e-4x4", 16,
     "libtpu, the TPU compiler, for a v5e 4x4 slice (no TPU needed)"),
    (CompilePlan(WorkerKey.tpu(), tpu_topology="v5e:8x16", slices_per_axis=(2,)),
     "tpu-v5e-8x16-2slices", 256, "libtpu, the TPU compiler, for 2 v5e 8x16 slices"),
    (CompilePlan(WorkerKey.fake_cpu(8)), None, 8, "XLA's CPU compiler on 8 fake CPU devices"),
    (CompilePlan(WorkerKey.fake_cpu(8), approximate="compile_for='cpu' was asked"), "h100-8",
     8, "on 8 fake CPU devices, priced on h100-8 (approximate: compile_for='cpu' was asked)"),
])
def test_the_opening_line_names_the_compiler_in_words(plan, target, devices, said):
    assert said in compiler_words(plan, target, devices)


def test_the_opening_line_says_what_how_since_when_and_the_limit():
    e = Exploration(mesh="data=4,model=2", workload="transformer_train",
                    params={"layers": 2}, preset="fsdp_tp", target="h100-8")
    opening = Opening(e, limit_s=120, started=0.0)
    text = words(opening.progress_html("◌ compiling… 3.2 s"))
    assert exploration_words(e) in text
    assert "transformer_train (layers=2) · mesh data=4,model=2 · preset fsdp_tp · target " \
        "h100-8" in text
    assert re.search(r"Compiling with XLA's (GPU|CPU) compiler", text)     # gpu extra or not
    assert re.search(r"\d+\.\d s since the page asked · compile time limit 120 s", text)
    assert "◌ compiling… 3.2 s" in text
    # The link's own limit wins over the pool's.
    assert Opening(Exploration(mesh="data=8", workload="mlp", timeout=600), 120).limit_s == 600
    # A mesh the app will refuse: no compiler named, the app says why.
    assert "Checking its settings" in Opening(Exploration(mesh="data=", workload="mlp"),
                                              120).progress_html("")


@pytest.fixture
def page():
    page = AppPage(**DEFAULT)
    yield page
    page.app.close()


@pytest.mark.slow
def test_a_link_whose_first_compile_fails_says_so_with_its_settings_left_loaded(page):
    # A compile limit no compile meets: the linked exploration fails, not the page.
    params = {"batch": 64, "d_model": 64, "d_ff": 512}
    bad = Exploration(mesh="data=4,model=2", workload="mlp", params=params, timeout=0.01)
    page.open_query(f"?exploration={bad.to_link()}")
    app = page.app
    assert app.report is None and "0.01 s limit" in app.error
    assert page.widget.children == (page.style, page.opening, page.error, app.widget,
                                    page.location)
    assert page.error.value == ""
    said = words(page.opening.value)
    assert said.startswith("⚠ This link's exploration could not be shown (mlp (batch=64, "
                           "d_model=64, d_ff=512) · mesh data=4,model=2 · no target, after ")
    assert "compile took longer than the 0.01 s limit" in said
    assert "Its settings are loaded below: change them" in said
    # Loaded: the linked mesh and params are in the sidebar, for the user to change.
    assert app.mesh_editor.axes == [("data", 4), ("model", 2)]
    assert {k: app.params[k] for k in params} == params


@pytest.mark.slow
def test_the_pages_address_follows_the_exploration_shown(page):
    assert page.location.shown is None           # no page has taken the kernel yet
    page.location.set_state({"path": "/", "query": ""})
    assert page.location.shown == ""             # the default app: no exploration= at all
    app = page.app
    app.partitioner_w.value = "gspmd"
    shown = from_link(page.location.shown)
    assert shown.partitioner == "gspmd" and shown.mesh == "data=2,model=4"
    app.tabs.selected_index = 2
    assert from_link(page.location.shown).app.tab == "Memory"
    app.tabs.selected_index = 0
    app.partitioner_w.value = "shardy"
    assert page.location.shown == ""             # the default's again


@pytest.mark.slow
def test_a_reloaded_address_opens_the_exploration_it_names(page):
    page.location.set_state({"path": "/", "query": ""})
    page.app.partitioner_w.value = "gspmd"
    address = page.location.shown
    again = AppPage(**DEFAULT)
    try:
        again.location.set_state({"path": "/", "query": f"?exploration={address}"})
        assert again.app.report is not None and again.app.request.partitioner == "gspmd"
        assert again.widget.children == (again.style, again.error, again.app.widget,
                                         again.location)
        assert again.location.shown == address
        assert from_link(address).app == AppState("Placement", from_link(address).app.tensor)
    finally:
        again.app.close()
