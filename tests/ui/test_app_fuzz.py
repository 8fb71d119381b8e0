"""The app's editors under random input (hypothesis): whatever a room of people types into the
mesh rows, the spec pickers, the params, the rules and the target, no error escapes a widget
callback, nothing that is a bug is recorded (`App.unexpected`), and once the input is put back
the app shows the right result again. No browser: widgets are set as a user's edits set them."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

w = pytest.importorskip("ipywidgets")

from explorer.ui import Explorer  # noqa: E402

pytestmark = pytest.mark.slow

MEGATRON = {"x": "data,None", "w1": "None,model", "w2": "model,None"}
AXIS_NAMES = st.one_of(st.sampled_from(["data", "model", "a b", "model=4,extra", "", "x" * 300,
                                        "1st", "data"]),
                       st.text(max_size=12))
SIZES = st.one_of(st.integers(-3, 9), st.sampled_from([2048, 4096, 10**6, 2**31 - 1]))
PARAM_TEXT = st.one_of(st.sampled_from(["nan", "inf", "-4", "1e400", "10" * 40, "", "8",
                                        "bfloat16", "float128"]),
                       st.text(max_size=10))
RULES = st.one_of(st.sampled_from(["batch=data,mlp=model", "batch=dta", "=", "mlp=model:3",
                                   "opt:embed=data", ""]), st.text(max_size=20))
# Which row, picker, param or option an edit touches: drawn the same way whatever the app's
# state, so that hypothesis can replay a case (the app itself is shared between cases).
INDEX = st.integers(0, 7)
PICKS = st.lists(st.sampled_from(["data", "model", "nope"]), max_size=3)


def _edit(app, kind: str, data) -> None:
    rows = app.mesh_editor.rows
    if kind == "name":
        rows[data.draw(INDEX) % len(rows)].name_w.value = data.draw(AXIS_NAMES)
    elif kind == "size":
        rows[data.draw(INDEX) % len(rows)].size_w.value = data.draw(SIZES)
    elif kind == "add":
        app.mesh_editor.add.click()
    elif kind == "remove":
        i = data.draw(INDEX)
        if len(rows) > 1:
            rows[i % len(rows)].remove.click()
    elif kind == "pick":
        names = sorted(app.spec_rows)
        tensor = names[data.draw(INDEX) % len(names)]
        pickers = app.spec_rows[tensor].pickers
        picker = pickers[data.draw(INDEX) % len(pickers)]
        allowed = list(picker.allowed_tags)
        picker.value = [a for a in data.draw(PICKS) if a in allowed]
    elif kind == "param":
        # What each widget's front end lets a user enter: whole numbers in an IntText (any
        # size, any sign), any float in a FloatText (nan and inf included), text elsewhere.
        params = app.params_box.children
        widget = params[data.draw(INDEX) % len(params)]
        if isinstance(widget, w.IntText):
            widget.value = data.draw(st.one_of(st.integers(-10, 10**4),
                                               st.sampled_from([10**9, 2**62, -(2**40)])))
        elif isinstance(widget, w.FloatText):
            widget.value = data.draw(st.floats(allow_nan=True, allow_infinity=True))
        elif isinstance(widget, w.Dropdown):
            options = [o[1] if isinstance(o, tuple) else o for o in widget.options]
            widget.value = options[data.draw(INDEX) % len(options)]
        else:
            widget.value = data.draw(PARAM_TEXT)
    elif kind == "rules":
        app.rules_w.value = data.draw(RULES)
    elif kind == "target":
        options = [v for _, v in app.target_w.options]
        app.target_w.value = options[data.draw(INDEX) % len(options)]


def _restore(app) -> None:
    """Put the input back as a user would: mesh rows, params, rules, target, then the specs."""
    while len(app.mesh_editor.rows) > 2:
        app.mesh_editor.rows[-1].remove.click()
    while len(app.mesh_editor.rows) < 2:
        app.mesh_editor.add.click()
    for row, (name, size) in zip(app.mesh_editor.rows, [("data", 2), ("model", 4)], strict=True):
        row.name_w.value, row.size_w.value = name, size
    for child, default in zip(app.params_box.children, (256, 1024, 4096, "float32"),
                              strict=True):
        child.value = default
    app.rules_w.value = ""
    app.target_w.value = ""
    for tensor, spec in MEGATRON.items():
        for picker, entry in zip(app.spec_rows[tensor].pickers, spec.split(","), strict=True):
            picker.value = [] if entry == "None" else [entry]


@pytest.fixture(scope="module")
def app():
    a = Explorer(workload="mlp", mesh="data=2,model=4", specs=MEGATRON, debounce=None)
    yield a
    a.close()


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_random_edits_never_escape_and_the_app_recovers(app, data):
    kinds = data.draw(st.lists(st.sampled_from(["name", "size", "add", "remove", "pick", "param",
                                                "rules", "target"]), min_size=1, max_size=6))
    for kind in kinds:
        _edit(app, kind, data)          # an exception here would be a callback that escaped
        assert app.unexpected is None, repr(app.unexpected)
    _restore(app)
    assert app.unexpected is None, repr(app.unexpected)
    assert app.error is None, app.error
    [c] = app.report.collectives
    assert (c.kind, c.axes, c.bytes) == ("all-reduce", ("model",), 128 * 1024 * 4)
