"""Explorer.load: an exploration saved from a Report opens the app on the same request, tab
and tensor; a user's function, which a file does not carry, is said so by name."""

import re

import jax
import pytest

pytest.importorskip("ipywidgets")

import explorer  # noqa: E402
from explorer import AppState, Exploration, InputError, TensorSpec  # noqa: E402
from explorer._src.ui.app import TAB_TITLES  # noqa: E402
from explorer.ui import Explorer  # noqa: E402


def two_layers(x, w1, w2):
    return jax.nn.relu(x @ w1) @ w2


@pytest.mark.slow
def test_a_saved_exploration_opens_the_app_on_the_same_request(tmp_path):
    first = Explorer(workload="mlp", mesh="data=2,model=4", params={"batch": 128},
                     specs={"w1": "None,model", "w2": "model,None"}, partitioner="gspmd",
                     debounce=None)
    try:
        path = tmp_path / "megatron.json"
        Exploration.from_report(first.report, app=AppState(tab="Memory", tensor="w2")) \
            .save(path)
        again = Explorer.load(path, debounce=None)
        try:
            assert again.request == first.request
            assert again.request.pinned == {"w1": (None, "model"), "w2": ("model", None)}
            assert again.request.params["batch"] == 128
            assert again.request.partitioner == "gspmd"
            assert TAB_TITLES[again.tabs.selected_index] == "Memory"
            assert again.placement.tensor.value == "w2"
        finally:
            again.close()
    finally:
        first.close()


@pytest.mark.slow
def test_a_functions_exploration_is_refused_naming_the_function(tmp_path):
    report = explorer.analyze(two_layers, TensorSpec("x", (8, 16), spec="data,None"),
                              TensorSpec("w1", (16, 32)), TensorSpec("w2", (32, 16)),
                              mesh="data=2")
    path = tmp_path / "mine.json"
    Exploration.from_report(report, two_layers).save(path)
    named = re.escape(f"{two_layers.__module__}:two_layers")
    with pytest.raises(InputError, match=f"this exploration is of the user's function {named}, "
                                         "which a file does not carry"):
        Explorer.load(path, debounce=None)


def test_fields_the_app_has_no_widget_for_are_refused_before_any_compile():
    e = Exploration(workload="mlp", mesh="data=2,model=4", axis_type="explicit",
                    peak=True)
    with pytest.raises(InputError, match=r"sets axis_type 'explicit', peak rates, which the "
                                         r"app does not carry"):
        Explorer.from_exploration(e, debounce=None)
