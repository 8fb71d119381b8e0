"""The app's compile time limit (issue 43, item 1): a sidebar box within the API's bounds, a
default that follows what compiles the program, kept in a shared exploration, said against the
running compile and offered larger when a compile is stopped at it."""

import pytest

pytest.importorskip("ipywidgets")

from explorer._src.api.exploration import Exploration, loads  # noqa: E402
from explorer._src.api.request import MAX_TIMEOUT  # noqa: E402
from explorer._src.compile.protocol import Backend  # noqa: E402
from explorer._src.errors import InputError  # noqa: E402
from explorer._src.ui.share import shown_exploration  # noqa: E402
from explorer._src.ui.sidebar.checks import default_timeout, parse_timeout  # noqa: E402
from explorer._src.ui.status import larger_limit, running_text, stopped_at_limit  # noqa: E402
from explorer.ui import Explorer  # noqa: E402

# What explorer._src.compile.pool says of a compile it stopped at its limit.
STOPPED = ("compile took longer than the 0.5 s limit on 8 devices and its worker was stopped; "
           "simplify the program, shrink the mesh or raise the timeout")


@pytest.mark.parametrize("text, seconds", [("", None), ("  ", None), ("600", 600.0),
                                           ("0.5 s", 0.5), (str(MAX_TIMEOUT), MAX_TIMEOUT)])
def test_the_box_takes_the_apis_bounds(text, seconds):
    assert parse_timeout(text) == seconds


@pytest.mark.parametrize("text", ["0", "-1", "nan", "inf", "abc", str(MAX_TIMEOUT + 1)])
def test_the_box_refuses_what_the_api_refuses(text):
    with pytest.raises(InputError, match="time limit .* seconds above 0 and at most 86400"):
        parse_timeout(text)


def test_the_default_is_longer_for_ahead_of_time_compiles():
    assert default_timeout(Backend.FAKE_CPU) == 120
    assert default_timeout(Backend.GPU_AOT) == 300
    # Above the 326 s measured for a 4-layer d_model 1024 step on tpu-v5e-2x4-2slices.
    assert default_timeout(Backend.TPU_AOT) == 600 > 326


def test_a_running_compile_is_said_against_its_limit_and_warned_near_it():
    assert running_text("compiling", 10.0, 120.0) == \
        "◌ compiling… 10.0 s of its 120 s time limit"
    near = running_text("compiling", 95.0, 120.0)
    assert near.startswith("⚠ compiling… 95.0 s of its 120 s time limit: it is stopped at 120 s")
    assert "raise the time limit in the sidebar" in near


def test_a_compile_stopped_at_its_limit_is_offered_a_larger_one():
    assert stopped_at_limit(STOPPED) == 0.5
    assert stopped_at_limit("the mesh has 3 devices") is None
    assert larger_limit(0.5, 120) == 120                  # at least the target's default
    assert larger_limit(600, 600) == 1200
    assert larger_limit(MAX_TIMEOUT, 600) == MAX_TIMEOUT  # never beyond what the API takes


def test_an_exploration_keeps_its_time_limit():
    e = Exploration(mesh="data=2,model=4", workload="mlp", timeout=900.0)
    assert e.to_dict()["compile"] == {"timeout": 900.0}
    assert loads(e.to_json()) == e
    assert "compile" not in Exploration(mesh="data=2,model=4", workload="mlp").to_dict()
    bad = e.to_json().replace("900.0", "-1")
    with pytest.raises(InputError, match="compile.timeout"):
        loads(bad)


@pytest.fixture(scope="module")
def app():
    a = Explorer(workload="mlp", mesh="data=2,model=4", debounce=None)
    yield a
    a.close()


def test_the_box_sets_the_limit_the_compile_gets_and_the_share_link_keeps_it(app):
    assert app.request.timeout == 120 and not app.request.timeout_given
    app.sidebar.timeout_w.value = "900"
    assert app.error is None
    assert app.source.analysis(app.request).timeout == 900
    assert shown_exploration(app).timeout == 900
    opened = Explorer.from_exploration(shown_exploration(app), debounce=None)
    try:
        assert opened.sidebar.timeout_w.value == "900" and opened.request.timeout == 900
    finally:
        opened.close()
    app.sidebar.timeout_w.value = ""
    assert shown_exploration(app).timeout is None      # the target's default is not carried


def test_a_bad_limit_is_shown_at_the_box(app):
    app.sidebar.timeout_w.value = "-5"
    assert "time limit" in app.sidebar.timeout_error.value
    assert "the time limit" in app.status.value
    app.sidebar.timeout_w.value = ""
    assert app.error is None and app.sidebar.timeout_error.value == ""


def test_a_tpu_target_gets_its_default(app):
    app.live_w.value = False        # checked, not compiled: no TPU compile in a fast test
    try:
        app.sidebar.target_w.value = "tpu-v5e-2x4"
        assert app._waiting.timeout == 600 and not app._waiting.timeout_given
        assert app.sidebar.timeout_w.placeholder == "600 (the default for a TPU target)"
        app.cpu_w.value = True      # compiled on CPU devices, priced on the target
        assert app._waiting.timeout == 120
        app.cpu_w.value = False
        app.sidebar.target_w.value = ""
    finally:
        app.live_w.value = True


def test_the_offer_raises_the_limit(app):
    app._show_error(STOPPED)
    assert "raise the time limit (in the sidebar)" in app.error_w.value
    offer = app.limit_offer.button
    assert offer.layout.display is None and "120 s" in offer.description
    offer.click()
    assert app.sidebar.timeout_w.value == "120" and app.error is None
    assert offer.layout.display == "none"
    app.sidebar.timeout_w.value = ""
