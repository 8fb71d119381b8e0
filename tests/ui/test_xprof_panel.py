"""Open in XProf in the HLO tab: the shown result is written as a run of the log folder typed
in, and the panel says the command, the run's folder and the notes; a folder that cannot be
written is said on the panel. The function is defined here (traced in this process)."""

import html
import os

import jax
import pytest

pytest.importorskip("ipywidgets")

from explorer import TensorSpec  # noqa: E402
from explorer.ui import explore  # noqa: E402

T = TensorSpec


def two_layers(x, w1, w2):
    h = jax.nn.relu(x @ w1)
    return h @ w2


@pytest.mark.slow
def test_open_in_xprof_writes_the_run_and_says_how_to_open_it(tmp_path):
    app = explore(two_layers, T("x", (256, 1024), spec="data,None"),
                  T("w1", (1024, 4096), spec="None,model"),
                  T("w2", (4096, 1024), spec="model,None"), mesh="data=2,model=4",
                  debounce=None)
    try:
        logdir = tmp_path / "logs"
        app.xprof.logdir.value = str(logdir)
        app.xprof.button.click()
        run = app.xprof.run
        shown = html.unescape(app.xprof.result.value)
        assert run.folder == str(logdir / "plugins" / "profile" / run.run)
        assert f"xprof --logdir {logdir}" in shown and run.folder in shown
        assert all(note in shown for note in run.notes)
        # No target was picked: no predicted step to write, and the notes say so.
        assert run.notes and app.xprof.error.value == ""
        assert sorted(os.listdir(run.folder)) == sorted(run.files)

        a_file = tmp_path / "not-a-folder"
        a_file.write_text("")
        app.xprof.logdir.value = str(a_file)
        app.xprof.button.click()
        assert app.xprof.run is None and app.xprof.result.value == ""
        assert html.unescape(app.xprof.error.value).startswith(
            f"XProf log folder {str(a_file)!r} could not be written")
    finally:
        app.close()
