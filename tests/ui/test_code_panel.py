"""Copy as code in the HLO tab: the box shows the result's plain-JAX code, which compiles as
Python, follows the next result, and puts back what the user types into it."""

import pytest

pytest.importorskip("ipywidgets")

from explorer._src.ui.app import TAB_TITLES  # noqa: E402
from explorer.ui import Explorer  # noqa: E402


@pytest.mark.slow
def test_copy_as_code_shows_the_reports_code_and_follows_the_next_result():
    app = Explorer(workload="mlp", mesh="data=2,model=4",
                   specs={"w1": "None,model", "w2": "model,None"}, debounce=None)
    try:
        app.tabs.selected_index = TAB_TITLES.index("HLO")
        assert not app.code.is_open and app.code.box.value == ""
        app.code.button.click()
        text = app.code.box.value
        assert text == app.report.to_code()
        compile(text, "<code>", "exec")
        # The code names the layout shown: w1's columns split over model.
        assert "'model'" in text and "w1" in text
        app.code.box.value = "edited"
        assert app.code.box.value == text             # read-only in effect
        app.spec_rows["w1"].pickers[1].value = []     # w1 replicated: new code, shown at once
        assert app.code.box.value == app.report.to_code() != text
    finally:
        app.close()
