"""The app on the user's own program: a function of TensorSpecs (explore) and a Flax NNX module
(explore_module). Functions and models are defined here and traced in this process, as
a notebook's are. Edits compile at once (no event loop)."""

import inspect
from dataclasses import replace
from html import unescape

import jax
import jax.numpy as jnp
import pytest

pytest.importorskip("ipywidgets")

from explorer import CompilerWarning, RuleError, TensorSpec  # noqa: E402
from explorer._src.ui.app import TAB_TITLES  # noqa: E402
from explorer.ui import explore, explore_module  # noqa: E402

T = TensorSpec
MEGATRON = {"^w1$": "None,model", "^w2$": "model,None"}


def mlp_forward(x, w1, w2):
    h = jax.nn.relu(x @ w1)
    return h @ w2


def show(app, title):
    app.tabs.selected_index = TAB_TITLES.index(title)


@pytest.fixture
def app():
    a = explore(mlp_forward, T("x", (256, 1024), spec="data,None"), T("w1", (1024, 4096)),
                T("w2", (4096, 1024)), mesh="data=2,model=4", specs=MEGATRON, debounce=None)
    yield a
    a.close()


def test_explore_opens_the_app_on_the_function(app):
    # Megatron MLP: partial sums of the [256/2, 1024] output block, all-reduced over model.
    assert [(c.kind, c.axes, c.bytes) for c in app.report.collectives] == [
        ("all-reduce", ("model",), 128 * 1024 * 4)]
    # The sidebar names the function and its inputs instead of a workload and its params.
    head = unescape(app.source.sidebar.children[0].value)
    assert "function</b> <code>mlp_forward</code>" in head
    line = inspect.getsourcelines(mlp_forward)[1]
    assert f"test_explore.py:{line}" in head
    assert "<code>w1</code> float32[1024,4096]" in head
    assert not hasattr(app, "workload_w") and app.preset_w.layout.display == "none"
    assert app.rules_w.layout.display == "none"
    assert "carries no logical dimension names" in unescape(app.rules_note.value)
    # The patterns placed w1 and w2; the pickers show it, and the report says what was run.
    assert app.spec_rows["w1"].spec == (None, "model")
    assert app.report.workload.name == "mlp_forward()"
    assert app.report.workload.specs == {"x": "data,None", "w1": "None,model",
                                         "w2": "model,None"}


@pytest.mark.slow
def test_editing_a_picker_recompiles_the_function(app):
    app.spec_rows["w1"].pickers[1].value = []
    app.spec_rows["w2"].pickers[0].value = []
    assert app.report.collectives == ()          # data parallel: no collective at all
    assert {"w1", "w2"} <= app.pinned
    # A spec that does not divide is shown on its row, naming the tensor and the axes.
    app.mesh_editor.row("model").size_w.value = 3
    app.spec_rows["w1"].pickers[1].value = ["model"]
    assert "not divisible by model=3" in app.spec_rows["w1"].error.value
    assert "explorer-stale" in app.tabs._dom_classes


def test_a_plain_function_takes_no_rules():
    with pytest.raises(RuleError, match="TensorSpecs of a plain function carry none"):
        explore(mlp_forward, T("x", (8, 8)), T("w1", (8, 8)), T("w2", (8, 8)),
                rules="batch=data", debounce=None)


def test_bad_inputs_are_refused_naming_the_value():
    from explorer import ExplorerError, RankError, TensorError

    with pytest.raises(ExplorerError, match="'mlp' is not a function"):
        explore("mlp", T("x", (8, 8)))
    # A string is held fixed, as a closure would hold it; the function then fails to trace,
    # and the app says so.
    app = explore(mlp_forward, "x", T("w1", (8, 8)), T("w2", (8, 8)), debounce=None)
    assert app.report is None and "'mlp_forward' raised while it was traced" in app.error
    app.close()
    with pytest.raises(TensorError, match="two inputs are named 'w'"):
        explore(mlp_forward, T("x", (8, 8)), T("w", (8, 8)), T("w", (8, 8)), debounce=None)
    with pytest.raises(RankError, match=r"pattern 'w' gives 'None,model,None' \(3 entries\)"):
        explore(mlp_forward, T("x", (8, 8)), T("w1", (8, 8)), T("w2", (8, 8)),
                specs={"w": "None,model,None"}, debounce=None)


def residual_stack(params, x):
    for layer in params["layers"]:
        x = x + jax.nn.relu(x @ layer["w1"]) @ layer["w2"]
    return x


def stack_params(layers):
    return {"layers": [{"w1": T(f"layers.{i}.w1", (64, 256)),
                        "w2": T(f"layers.{i}.w2", (256, 64))} for i in range(layers)]}


@pytest.mark.slow
def test_a_pytree_of_many_tensors_is_grouped_and_same_as_places_every_layer():
    app = explore(residual_stack, stack_params(12), T("x", (32, 64), spec="data,None"),
                  mesh="data=2,model=4", debounce=None)
    try:
        assert app.report.collectives == ()       # replicated weights: data parallel
        ed = app.specs_editor
        acc = ed.body.children[0]
        # Sections by the function's argument names, then by layer.
        assert list(acc.titles) == ["params (24)", "x (1)"]
        assert ed.rows == {}                       # nothing built until opened
        app.spec_rows["layers.0.w1"].pickers[1].value = ["model"]
        app.spec_rows["layers.0.w2"].pickers[0].value = ["model"]
        ed.same_from.value, ed.same_to.value = "layers.0.w1", r"\.w1$"
        ed.same_apply.click()                       # as the user does it
        assert "set 11 tensors to <code>None,model</code>" in ed.same_note.value
        ed.same_as("layers.0.w2", r"\.w2$")
        # Megatron in every layer: one all-reduce over model per layer, of the [32/2, 64] f32
        # block of the layer's output.
        assert [(c.kind, c.axes, c.bytes) for c in app.report.collectives] == [
            ("all-reduce", ("model",), 16 * 64 * 4)] * 12
        assert app.report.tensor("layers.11.w2").spec == ("model", None)
    finally:
        app.close()


def test_warnings_and_notes_show_as_a_badge_with_their_list(app):
    assert app.warnings_w.value == ""                            # this program has none
    warning = CompilerWarning("Involuntary full rematerialization of %copy.3", "copy.3",
                              "model.py:7")
    noisy = replace(app.report, warnings=(warning,),
                    notes=("an unreadable sharding was skipped",))
    app._show(replace(app.result, report=noisy), app.request)
    badge = unescape(app.warnings_w.value)
    assert "⚠ 1 warning · 1 note" in badge
    assert ("<li><b>XLA</b>: Involuntary full rematerialization of %copy.3 (at model.py:7)</li>"
            in badge)
    assert "title='XLA: Involuntary" in badge                    # the list on hover too


def test_the_memory_tab_says_a_function_is_not_split_by_kind(app):
    show(app, "Memory")
    assert app.report.memory.kinds is None
    assert "every byte counts as other" in app.memory.text.value


# ---------------------------------------------------------------------------- Flax NNX

nnx = pytest.importorskip("flax.nnx")


class Block(nnx.Module):
    def __init__(self, d, f, rngs):
        # `up` is annotated with logical names (mapped by rules), `down` with mesh axes.
        self.up = nnx.Linear(d, f, rngs=rngs, kernel_init=nnx.with_partitioning(
            nnx.initializers.lecun_normal(), ("embed", "mlp")))
        self.down = nnx.Linear(f, d, rngs=rngs, kernel_init=nnx.with_partitioning(
            nnx.initializers.lecun_normal(), ("model", None)))
        self.drop = nnx.Dropout(0.1, rngs=rngs)

    def __call__(self, x):
        return x + self.drop(self.down(jax.nn.relu(self.up(x))))


class Stack(nnx.Module):
    def __init__(self, layers, d, f, rngs):
        self.layers = nnx.List([Block(d, f, rngs) for _ in range(layers)])

    def __call__(self, x):
        for block in self.layers:
            x = block(x)
        return x


def abstract_stack(layers=2, d=64, f=256):
    with nnx.use_eager_sharding(False):
        return nnx.eval_shape(lambda: Stack(layers, d, f, nnx.Rngs(0)))


@pytest.mark.slow
def test_explore_module_names_params_by_path_and_reads_their_partitioning():
    model = abstract_stack()
    app = explore_module(model, T("x", (32, 64), spec="data,None"), mesh="data=2,model=4",
                         rules="mlp=model", debounce=None)
    try:
        ed = app.specs_editor
        assert [n for n in ed.tensors if ed.tensors[n].group == "parameters"] == [
            f"layers.{i}.{m}.{p}" for i in range(2) for m in ("down", "up")
            for p in ("bias", "kernel")]
        # down.kernel's metadata names mesh axes: its spec; up.kernel's names are logical,
        # and the rule mlp=model maps them.
        assert ed.spec("layers.0.down.kernel") == ("model", None)
        assert ed.spec("layers.1.up.kernel") == (None, "model")
        # Megatron in both blocks: an all-reduce over model of the [32/2, 64] f32 block.
        assert [(c.kind, c.axes, c.bytes) for c in app.report.collectives] == [
            ("all-reduce", ("model",), 16 * 64 * 4)] * 2
        # Its line is the model's, not flax's Linear.
        lines, first = inspect.getsourcelines(Block.__call__)
        line = first + next(i for i, t in enumerate(lines) if "self.down(" in t)
        assert all(c.source.endswith(f"test_explore.py:{line}")
                   for c in app.report.collectives)
        # The output is the model's, as plain jax computes it.
        expected = jax.eval_shape(lambda m, x: m(x), model,
                                  jax.ShapeDtypeStruct((32, 64), jnp.float32))
        [out] = [t for t in app.report.tensors if t.kind == "output"]
        assert out.shape == expected.shape
        # Params per device: per block, up.kernel [64, 256/4] + up.bias [256] +
        # down.kernel [256/4, 64] + down.bias [64], float32.
        per_block = 64 * 64 + 256 + 64 * 64 + 64
        assert app.report.memory.by_kind["params"] == 2 * per_block * 4
        assert app.report.memory.by_kind["grads"] == 0           # a forward pass
        head = unescape(app.source.sidebar.children[0].value)
        assert "model</b> <code>Stack</code>" in head
        assert "RNG key(s) are made inside the program" in head
        # The Placement tab opens on the data, not on the first parameter (a bias).
        assert app.placement.tensor.value == "x"
        # A new rule re-places the logical names.
        app.rules_w.value = "embed=model"
        assert ed.spec("layers.1.up.kernel") == ("model", None)
    finally:
        app.close()


def test_explore_module_specs_patterns_place_what_the_metadata_leaves_to_rules():
    # up.kernel's metadata names logical axes (left to rules): the pattern places it with no
    # rules; down.kernel's names mesh axes, ("model", None): that spec, given with the
    # parameter, wins over the pattern's.
    app = explore_module(abstract_stack(), T("x", (32, 64), spec="data,None"),
                         mesh="data=2,model=4",
                         specs=[(r"up/kernel", "None,model"), (r"down.*kernel", "None,model")],
                         debounce=None)
    try:
        ed = app.specs_editor
        assert ed.spec("layers.0.up.kernel") == (None, "model")     # no rules needed
        assert app.report.tensor("layers.1.down.kernel").spec == ("model", None)
        assert app.report.memory.by_kind["params"] == 2 * (64 * 64 + 256 + 64 * 64 + 64) * 4
    finally:
        app.close()


def two_layers(x, params):
    for layer in params:
        x = jnp.tanh(x @ layer["w_up"]) @ layer["w_down"]
    return x


TWO_LAYERS = [{"w_up": T(f"l{k}.w_up", (128, 512), spec="None,model"),
               "w_down": T(f"l{k}.w_down", (512, 128), spec="model,None")} for k in range(2)]


@pytest.mark.slow
def test_a_renamed_mesh_axis_carries_into_the_specs_the_function_gave():
    # Issue 22: renaming `model` relabelled the pickers, but the TensorSpecs' own specs still
    # named `model`, and the error that followed pointed at no widget.
    app = explore(two_layers, T("x", (64, 128), spec="data,None"), TWO_LAYERS,
                  mesh="data=2,model=4", debounce=None)
    try:
        rename = app.mesh_editor.rows[1].name_w
        rename.value = "tp"
        assert app.error is None and "●" in app.status.value
        # Each layer's down projection contracts a tp-split dimension: one all-reduce over tp.
        assert [(c.kind, c.axes) for c in app.report.collectives] == [("all-reduce", ("tp",))] * 2
        assert {app.spec_rows[n].spec for n in ("l0.w_down", "l1.w_down")} == {("tp", None)}
        # A bad size is an error on the rows it breaks, and goes when the size is fixed.
        app.mesh_editor.rows[1].size_w.value = 3
        assert "not divisible by tp=3" in app.spec_rows["l0.w_down"].error.value
        assert "fix the highlighted input" in app.status.value
        app.mesh_editor.rows[1].size_w.value = 4
        assert app.error is None and app.spec_rows["l0.w_down"].error.value == ""
        # Removing the axis leaves the specs that named it unsplit there.
        app.mesh_editor.rows[1].remove.click()
        assert app.report.collectives == () and app.spec_rows["l0.w_up"].spec == (None, None)
    finally:
        app.close()


def test_a_given_spec_naming_an_axis_the_mesh_lacks_is_an_error_on_its_row():
    app = explore(two_layers, T("x", (64, 128), spec="expert,None"), TWO_LAYERS,
                  mesh="data=2,model=4", debounce=None)
    try:
        assert "names mesh axis 'expert'" in unescape(app.spec_rows["x"].error.value)
        assert "fix the highlighted input" in app.status.value
        app.spec_rows["x"].pickers[0].value = ["data"]          # the fix, in that row
        assert app.error is None and app.spec_rows["x"].error.value == ""
    finally:
        app.close()


def test_explore_pins_the_outputs_and_takes_a_time_limit_as_analyze_does():
    import explorer

    args = (T("x", (256, 1024), spec="data,None"), T("w1", (1024, 4096)), T("w2", (4096, 1024)))
    pinned = "None,model"       # the result split by columns, as a next layer would take it
    a = explore(mlp_forward, *args, mesh="data=2,model=4", specs=MEGATRON, debounce=None,
                out_specs=pinned, timeout=77)
    try:
        plain = explorer.analyze(mlp_forward, *args, mesh="data=2,model=4", specs=MEGATRON,
                                 out_specs=pinned)
        free = explorer.analyze(mlp_forward, *args, mesh="data=2,model=4", specs=MEGATRON)
        shown = [(c.kind, c.axes, c.bytes) for c in a.report.collectives]
        assert shown == [(c.kind, c.axes, c.bytes) for c in plain.collectives]
        assert shown != [(c.kind, c.axes, c.bytes) for c in free.collectives]
        assert a.sidebar.timeout_w.value == "77" and a.request.timeout == 77
        # A mesh edit that drops the pinned axis is refused with the axis named.
        a.mesh_editor.row("model").name_w.value = "tensor"
        assert a.error is not None and "axis 'model' in out_specs" in a.error
    finally:
        a.close()


@pytest.mark.slow
def test_a_pick_over_a_modules_rules_is_offered_back_as_the_rules_place_it():
    # The rule mlp=model places up.kernel (logical names embed, mlp) as (None, "model"); a
    # hand-set ("model", None) keeps it from the rule, which the sidebar says and can undo.
    app = explore_module(abstract_stack(layers=1), T("x", (32, 64), spec="data,None"),
                         mesh="data=2,model=4", rules="mlp=model", debounce=None)
    try:
        assert app.kept_picks.kept == {}
        app.spec_rows["layers.0.up.kernel"].pickers[0].value = ["model"]
        app.spec_rows["layers.0.up.kernel"].pickers[1].value = []
        assert app.kept_picks.kept == {
            "layers.0.up.kernel": (("model", None), (None, "model"))}
    finally:
        app.close()
