"""What-if fixes that hold across layers: a confirmed change to one layer's tensor, made to every
layer's copy of it (`layers.*.w_up`) in one compile, and offered beside the one-input change
where it removes the collective from every layer. The layered functions are defined here and
traced in this process."""

from html import unescape

import jax
import pytest

pytest.importorskip("ipywidgets")

import explorer  # noqa: E402
from explorer import TensorSpec, analyze  # noqa: E402
from explorer._src.report.dataflow import layer_pattern, matching  # noqa: E402
from explorer._src.report.report import TensorRole  # noqa: E402
from explorer._src.ui.app import TAB_TITLES  # noqa: E402
from explorer._src.ui.why import across_layers, candidates, confirm, repeats  # noqa: E402
from explorer.ui import explore  # noqa: E402

T = TensorSpec
MESH = "data=2,model=4"
# Per device: x's rows over data, [128, 512] f32; the MLP's hidden activation [128, 2048] f32.
UP_BYTES = 128 * 2048 * 4            # 1 MiB: the all-reduce of x @ w_up's partial sums
DOWN_BYTES = 128 * 512 * 4           # 256 KiB: the all-reduce of h @ w_down's


def mlp_layers(x, layers):
    # Layer 0 reads a value computed here as every later layer does (reading the input x
    # itself, Shardy would reshard x there, an all-to-all, rather than all-reduce).
    x = jax.numpy.tanh(x)
    for layer in layers:
        h = jax.nn.relu(x @ layer["w_up"])
        x = h @ layer["w_down"]
    return x


def layer_inputs(n: int) -> tuple[TensorSpec, list[dict]]:
    """x, and `n` layers whose w_up is split over model on its contracting dimension (so each
    layer's x @ w_up is a partial sum, all-reduced) and w_down likewise (Megatron's row split)."""
    return T("x", (256, 512), spec="data,None"), [
        {"w_up": T(f"layers.{i}.w_up", (512, 2048), spec="model,None"),
         "w_down": T(f"layers.{i}.w_down", (2048, 512), spec="model,None")} for i in range(n)]


def inputs_of(report):
    ins = [t for t in report.tensors if t.kind == TensorRole.INPUT]
    return {t.name: t.spec for t in ins}, {t.name: t.shape for t in ins}


def test_a_layer_index_in_a_name_becomes_the_pattern_of_that_tensor_in_every_layer():
    assert layer_pattern("layers.0.w_up") == "layers.*.w_up"
    assert layer_pattern("l3.w1") == "l*.w1"                 # the leaf's 1 is no layer
    assert layer_pattern("m.l3.wq") == "m.l*.wq"             # Adam's moment keeps its prefix
    assert layer_pattern("layers[10].w_up") == "layers[*].w_up"
    assert layer_pattern("w1") is None and layer_pattern("layers.wq") is None   # no layer
    names = ["l0.w1", "l1.w1", "l11.w1", "m.l0.w1", "l0.w2", "lx.w1", "l0.w1.bias"]
    assert matching("l*.w1", names) == ["l0.w1", "l1.w1", "l11.w1"]


@pytest.fixture
def app():
    x, layers = layer_inputs(2)
    a = explore(mlp_layers, x, layers, mesh=MESH, debounce=None)
    a.tabs.selected_index = TAB_TITLES.index("Collectives")
    yield a
    a.close()


@pytest.mark.slow
def test_the_fix_on_one_layers_w_up_is_offered_for_every_layer_and_removes_both_all_reduces(
        app):
    report = app.report
    # By hand, before: per layer a 1 MiB all-reduce (x @ w_up) and a 256 KiB one (h @ w_down).
    assert report.cost.collective_bytes == 2 * (UP_BYTES + DOWN_BYTES)
    index = next(i for i, c in enumerate(report.collectives)
                 if c.why is not None and "`layers.0.w_up`" in c.why.text)
    app.collectives.pick.value = index
    offers = app.why.candidates
    singles = [c for c in offers if not c.pattern]
    wide = [c for c in offers if c.pattern]
    # The one-input change stays offered: layer 1's all-reduce on the same line is left.
    assert singles and all(c.tensors == {"layers.0.w_up"} for c in singles)
    assert all((c.line_before, c.line_after) == (2 * UP_BYTES, UP_BYTES) for c in singles)
    # The pattern: the same change to both layers' w_up, and neither all-reduce is left; what
    # is left is each layer's h @ w_down all-reduce, 2 x 256 KiB.
    assert wide and wide[0].pattern == "layers.*.w_up"
    assert wide[0].tensors == {"layers.0.w_up", "layers.1.w_up"}
    assert (wide[0].repeats_before, wide[0].repeats_after) == (2, 0)
    assert wide[0].total_after == 2 * DOWN_BYTES
    assert offers[0].pattern                    # best first: the fewest bytes in all
    row = unescape(app.why.offers.children[0].children[1].value)
    assert "layers.*.w_up" in row and "2 of the 2 all-reduces over model on them gone" in row
    assert "2.5 MiB → 512.0 KiB" in row
    # One click applies both picks and compiles once; the result is the one confirmed.
    app.why.offers.children[0].children[0].click()
    assert {n: app.spec_rows[n].spec for n in wide[0].tensors} == wide[0].specs
    assert app.report.cost.collective_bytes == 2 * DOWN_BYTES
    assert "Applied</b>: " in unescape(app.why.comparison.value)


@pytest.mark.slow
def test_twelve_layers_confirm_the_pattern_with_one_compile():
    x, layers = layer_inputs(12)
    report = analyze(mlp_layers, x, layers, mesh=MESH)
    specs, shapes = inputs_of(report)
    index = next(i for i, c in enumerate(report.collectives)
                 if c.why is not None and "`layers.0.w_up`" in c.why.text)
    single = next(c for c in candidates(report, index, specs, shapes, report.mesh)
                  if c.tensor == "layers.0.w_up")
    wide = across_layers(single, report, index, specs, shapes)
    assert wide.tensors == {f"layers.{i}.w_up" for i in range(12)}
    assert wide.repeats_before == 12
    changed = [{k: T(t.name, t.shape, spec=wide.specs.get(t.name, t.spec))
                for k, t in layer.items()} for layer in layers]
    result = analyze(mlp_layers, x, changed, mesh=MESH)          # the one compile
    done = confirm(wide, report, index, result)
    # By hand: 12 x (1 MiB + 256 KiB) before; only the 12 h @ w_down all-reduces after.
    assert (done.total_before, done.total_after) == (12 * (UP_BYTES + DOWN_BYTES),
                                                     12 * DOWN_BYTES)
    assert (done.repeats_before, done.repeats_after) == (12, 0)


@pytest.mark.slow
def test_on_the_built_in_train_step_the_pattern_matches_every_layers_tensor_of_that_role():
    report = explorer.analyze_workload("transformer_train", MESH, preset="fsdp_tp",
                                       params={"layers": 3, "scan_layers": "false"})
    specs, shapes = inputs_of(report)
    # fsdp_tp splits each layer's w1 over data: an all-gather per layer, each naming its w1.
    index = next(i for i, c in enumerate(report.collectives)
                 if c.kind == "all-gather" and c.why is not None and "`l0.w1`" in c.why.text)
    assert len(repeats(report, report.collectives[index], ["l0.w1", "l1.w1", "l2.w1"])) == 3
    single = next(c for c in candidates(report, index, specs, shapes, report.mesh)
                  if c.tensor == "l0.w1")
    wide = across_layers(single, report, index, specs, shapes)
    # Every layer's w1, and not Adam's moments of it (m.l0.w1: another role) nor w2.
    assert wide.pattern == "l*.w1"
    assert wide.tensors == {"l0.w1", "l1.w1", "l2.w1"}
    assert wide.repeats_before == 3
    assert all(spec == single.spec for spec in wide.specs.values())
