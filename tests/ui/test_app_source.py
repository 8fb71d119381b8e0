"""explorer.ui.App takes public things: a built-in workload's name opens the app on it, and a
name it does not know is refused with the choices (the private source types stay private)."""

import pytest

import explorer

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")

from explorer.ui import App  # noqa: E402

# Megatron's MLP (Shoeybi et al. 2019, section 3): w1 split by columns, w2 by rows over model,
# so the forward needs one all-reduce over model of the output: the mlp workload's defaults,
# batch 256 split over data=2 and d_model 1024, make it 128 x 1024 float32 values per device.
MEGATRON = {"x": "data,None", "w1": "None,model", "w2": "model,None"}


@pytest.mark.slow
def test_the_app_opens_on_a_workloads_name():
    app = App("mlp", "data=2,model=4", specs=MEGATRON, debounce=None)
    try:
        assert app.source.title == "mlp"
        [c] = app.report.collectives
        assert (str(c.kind), c.axes, c.bytes) == ("all-reduce", ("model",), 128 * 1024 * 4)
    finally:
        app.close()


def test_an_unknown_workload_name_is_refused_with_the_choices():
    with pytest.raises(explorer.WorkloadError, match=r"'nope' is unknown.*'mlp'"):
        App("nope")
