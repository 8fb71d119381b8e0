"""The mesh editor's axis types, one per axis (explorer/_src/ui/editors.py), and a jax Mesh given
to the app, in force while the program is traced. Edits compile at once (no event loop)."""

import sys
from pathlib import Path

import jax
import pytest
from jax.sharding import AxisType

pytest.importorskip("ipywidgets")

from explorer import TensorSpec as T  # noqa: E402
from explorer import parse_mesh  # noqa: E402
from explorer.ui import explore  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_support"))
from legacy_mesh import reads_the_legacy_mesh  # noqa: E402


def matmul(x, w):
    return x @ w


def test_the_mesh_editor_takes_a_type_per_axis():
    app = explore(matmul, T("x", (8, 16), spec="data,None"), T("w", (16, 32)),
                  mesh="data=2:explicit,model=4", debounce=None)
    try:
        assert app.mesh_editor.types == ["explicit", "auto"]
        assert app.report.mesh == parse_mesh("data=2:explicit,model=4")
        app.mesh_editor.rows[1].type_w.value = "explicit"       # model, too
        assert app.error is None
        assert app.report.mesh == parse_mesh("data=2,model=4", "explicit")
        # Undo gives the rows back their types.
        app.undo()
        assert app.mesh_editor.types == ["explicit", "auto"]
        assert app.report.mesh == parse_mesh("data=2:explicit,model=4")
    finally:
        app.close()


def test_a_jax_mesh_given_to_the_app_is_in_force_at_every_trace():
    mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(AxisType.Auto,) * 2)
    app = explore(reads_the_legacy_mesh, T("x", (8, 16)), mesh=mesh, debounce=None)
    try:
        assert app.error is None and app.report.mesh == parse_mesh("data=2,model=4")
        app.spec_rows["x"].pickers[1].value = ["model"]         # an edit traces it again
        assert app.error is None
        assert app.report.workload.specs["x"] == "None,model"
    finally:
        app.close()


def test_the_app_opens_a_saved_exploration_with_each_axis_s_type():
    from explorer import Exploration
    from explorer.ui import Explorer

    saved = Exploration(workload="mlp", mesh="data=2:explicit,model=4:auto",
                        specs={"x": "data,None"})
    app = Explorer.from_exploration(saved, debounce=None)
    try:
        assert app.mesh_editor.types == ["explicit", "auto"]
        assert app.report.mesh == parse_mesh("data=2:explicit,model=4")
    finally:
        app.close()
