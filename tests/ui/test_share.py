"""Explorations shared by a link (issue 21 item 3): the app's Share section offers the result
shown as a link and a file, and the Voila page (explorer._src.ui.page.AppPage) opens the link it
made on the same request, tab and tensor; a link that cannot be opened leaves the default app
working under one error line."""

import base64
import html
import re

import jax
import pytest

pytest.importorskip("ipywidgets")

from explorer import FunctionRef, TensorSpec  # noqa: E402
from explorer._src.api.exploration import Exploration, loads  # noqa: E402
from explorer._src.ui.app import TAB_TITLES  # noqa: E402
from explorer._src.ui.page import AppPage, linked_exploration  # noqa: E402
from explorer._src.ui.share import file_name, page_path  # noqa: E402
from explorer.ui import Explorer, explore  # noqa: E402

# A small MLP as the page's default app: every compile a fraction of a second.
DEFAULT = dict(workload="mlp", mesh="data=2,model=4", params={"batch": 64, "d_model": 64,
                                                               "d_ff": 256},
               specs={"x": "data,None", "w1": "None,model", "w2": "model,None"},
               debounce=None)


def two_layers(x, w1, w2):
    return jax.nn.relu(x @ w1) @ w2


def link_in(html_text: str) -> str:
    """The `exploration=` text of the Share section's HTML, as a user copies it."""
    found = re.findall(r"\?exploration=([A-Za-z0-9_-]+)", html_text)
    assert found, html_text
    return found[0]


def page_error(page: AppPage) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.error.value))


@pytest.fixture
def page():
    page = AppPage(**DEFAULT)
    yield page
    page.app.close()


# ----------------------------------------------------------------------- the page's query


def test_the_query_names_the_exploration_with_or_without_its_question_mark():
    assert linked_exploration("?exploration=eyJh&token=abc") == "eyJh"
    assert linked_exploration("token=abc&exploration=eyJh") == "eyJh"
    assert linked_exploration("") is None and linked_exploration(None) is None
    assert linked_exploration("token=abc") is None


def test_a_query_with_two_explorations_is_refused():
    from explorer import InputError

    with pytest.raises(InputError, match="the URL gives 2 exploration= values; a link opens one"):
        linked_exploration("exploration=a&exploration=b")


def test_the_page_path_is_voilas_request_path_and_none_outside_voila():
    voila = {"SERVER_SOFTWARE": "voila/0.5.13", "SCRIPT_NAME": "/explorer-app/",
             "PATH_INFO": ""}
    assert page_path(voila) == "/explorer-app/"
    assert page_path({"SCRIPT_NAME": "/cgi/app"}) is None          # not Voila's
    assert page_path({}) is None


def test_a_download_is_named_by_the_workload_and_mesh_in_safe_characters():
    assert file_name(Exploration(mesh="data=4,model=2", workload="transformer_train")) == \
        "transformer_train-data-4-model-2.json"


# ------------------------------------------------------------------ the link round trip


@pytest.mark.slow
def test_the_apps_link_opens_the_same_workload_params_mesh_specs_preset_tab_and_tensor(
        page, monkeypatch):
    monkeypatch.setenv("SERVER_SOFTWARE", "voila/0.5.13")
    monkeypatch.setenv("SCRIPT_NAME", "/explorer-app/")
    monkeypatch.setenv("PATH_INFO", "")
    first = Explorer(workload="transformer_train", mesh="data=4,model=2", preset="fsdp_tp",
                     params={"layers": 2}, specs={"embed": "None,model"}, target="h100-8",
                     partitioner="gspmd", debounce=None)
    try:
        first.tabs.selected_index = TAB_TITLES.index("Memory")
        first.placement.tensor.value = "layers.w1"
        shown = first.share.widget.value
        assert f"data-result='{first.result_id}'" in shown
        assert "href='/explorer-app/?exploration=" in shown
        link = link_in(shown)
    finally:
        first.close()
    default = page.app
    # What the page's browser sends once it has drawn the page (explorer._src.ui.location).
    page.location.set_state({"path": "/shared/app/", "query": f"?exploration={link}"})
    opened = page.app
    assert opened is not default
    assert page.widget.children == (page.style, page.error, opened.widget, page.location)
    assert page.error.value == ""
    assert opened.workload_w.value == "transformer_train"
    assert opened.params["layers"] == 2 and opened.params["batch"] == 8    # 8: the default
    assert opened.request.mesh.text() == "data=4,model=2"
    assert opened.request.pinned == {"embed": (None, "model")}
    assert opened.preset_w.value == "fsdp_tp" and opened.rules_w.value == ""
    assert opened.target_w.value == "h100-8" and opened.request.partitioner == "gspmd"
    assert TAB_TITLES[opened.tabs.selected_index] == "Memory"
    assert opened.placement.tensor.value == "layers.w1"
    # The opened app offers the same link again (the same tab and tensor), on the page's path.
    assert link_in(opened.share.widget.value) == link
    assert "href='/shared/app/?exploration=" in opened.share.widget.value
    # A second view of the page sending its URL again opens nothing anew.
    page.location.set_state({"path": "/shared/app/", "query": f"?exploration={link}"})
    assert page.app is opened


@pytest.mark.slow
def test_the_share_section_follows_each_result_tab_and_tensor_and_is_never_stale():
    app = Explorer(**DEFAULT)
    try:
        e = app.share.exploration
        assert (e.workload, e.mesh, e.app.tab, e.app.tensor) == ("mlp", "data=2,model=4",
                                                                 "Placement", "x")
        # Only the params that differ from the workload's defaults are in the link.
        assert dict(e.params) == {"batch": 64, "d_model": 64, "d_ff": 256}
        app.tabs.selected_index = TAB_TITLES.index("Timing")
        app.placement.tensor.value = "w2"
        assert (app.share.exploration.app.tab, app.share.exploration.app.tensor) == \
            ("Timing", "w2")
        before = app.result_id
        widgets = dict(zip(app.source.workload.defaults, app.params_box.children, strict=True))
        widgets["batch"].value = 128                              # a new result
        assert app.result_id == before + 1 and app.share.result == app.result_id
        shown = app.share.widget.value
        assert f"data-result='{app.result_id}'" in shown
        linked = loads(base64.urlsafe_b64decode(link_in(shown) + "==="))
        assert linked.params["batch"] == 128 and linked.app.tab == "Timing"
        # An edit in error greys the tabs: the section says its link is the shown result's.
        app.rules_w.value = "batch=nowhere"
        assert app.error is not None and app.share.result == app.result_id
        assert "Of the result shown (greyed), not of the edits since" in app.share.widget.value
        app.rules_w.value = ""
        assert "Of the result shown" not in app.share.widget.value
    finally:
        app.close()


@pytest.mark.slow
def test_outside_voila_the_section_shows_the_query_and_a_download_of_the_file(monkeypatch):
    monkeypatch.delenv("SERVER_SOFTWARE", raising=False)
    app = Explorer(**DEFAULT)
    try:
        shown = app.share.widget.value
        assert "Append to the Voila app's URL" in shown and "href='/" not in shown
        data = re.search(r"download='([^']+)' href='data:application/json;base64,([^']+)'",
                         shown)
        assert data.group(1) == "mlp-data-2-model-4.json"
        saved = loads(base64.b64decode(data.group(2)))
        assert (saved.workload, saved.mesh, saved.target) == ("mlp", "data=2,model=4", None)
        assert dict(saved.specs) == {"x": "data,None", "w1": "None,model", "w2": "model,None"}
    finally:
        app.close()


@pytest.mark.slow
def test_for_a_users_function_the_section_says_a_link_does_not_carry_it():
    app = explore(two_layers, TensorSpec("x", (8, 16), spec="data,None"),
                  TensorSpec("w1", (16, 32), spec="None,model"), TensorSpec("w2", (32, 16)),
                  mesh="data=2,model=4", debounce=None)
    try:
        shown = app.share.widget.value
        assert "?exploration=" not in shown
        assert "A link does not carry your function" in shown and "or its inputs" in shown
        assert f"{two_layers.__module__}:two_layers" in html.unescape(shown)
        assert "Download exploration (.json)" in shown
    finally:
        app.close()


# ---------------------------------------------------------- links that cannot be opened


def _encoded(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


HEAD = '"format": "sharding-explorer exploration", "version": 1'
BAD_LINKS = {
    "bad base64": ("not*base64!", "exploration link text 'not*base64!' is not base64url"),
    "duplicate keys": (_encoded("{" + HEAD + ', "version": 1, "request": {}}'),
                       "key 'version' appears twice in one object"),
    "deep nesting": (_encoded("[" * 5000 + "]" * 5000),
                     "the exploration link is nested too deeply for an exploration"),
    "a 10^30 number": (_encoded("{" + HEAD + ', "request": {"workload": "mlp", "mesh": '
                                '"data=2", "params": {"batch": 1' + "0" * 30 + "}}}"),
                       "the number 100000000000000000000000... has more than 20 digits"),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(BAD_LINKS))
def test_a_bad_or_hostile_link_leaves_the_default_app_under_one_error_line(page, kind):
    text, reason = BAD_LINKS[kind]
    default, result = page.app, page.app.result_id
    page.open_query(f"exploration={text}")
    assert page.app is default
    assert page.widget.children == (page.style, page.error, default.widget, page.location)
    said = page_error(page)
    assert said.startswith("⚠ This link's exploration could not be opened: ")
    assert reason in said and said.endswith("Showing the default app.")
    assert said.count("⚠") == 1
    # The default app still works: its result is the one shown before, and an edit compiles.
    assert default.report is not None and default.result_id == result
    default.partitioner_w.value = "gspmd"
    assert default.request.partitioner == "gspmd" and default.result_id == result + 1


@pytest.mark.slow
def test_a_link_to_a_users_function_says_a_link_does_not_carry_it(page):
    ref = FunctionRef.of(two_layers)
    assert ref is not None                  # importable by name: the link carries its path
    link = Exploration(mesh="data=2,model=4", function=ref,
                       specs={"x": "data,None"}).to_link()
    default = page.app
    page.open_query(f"?exploration={link}")
    assert page.app is default
    said = page_error(page)
    assert f"this exploration is of the user's function {two_layers.__module__}:two_layers, " \
           "which a file does not carry (nor its inputs)" in said


@pytest.mark.slow
def test_a_page_without_a_link_keeps_its_default_app(page):
    default = page.app
    assert "Append to the Voila app's URL" in default.share.widget.value    # no path yet
    page.location.set_state({"path": "/app/", "query": "?token=abc"})
    assert page.app is default and page.error.value == ""
    assert page.widget.children == (page.style, page.error, default.widget, page.location)
    assert "href='/app/?exploration=" in default.share.widget.value        # the page's path
