"""The spec editor for many tensors: sections by kind and layer, built when opened; the filter;
"same as"; errors in closed sections. Widget logic only, no compile."""

from html import unescape

import pytest

pytest.importorskip("ipywidgets")

from explorer._src.errors import SpecError  # noqa: E402
from explorer._src.ui.sources import InputTensor  # noqa: E402
from explorer._src.ui.specs import (  # noqa: E402
    SpecsEditor,
    carried_renames,
    layer_prefix,
    names_matching,
    renamed_spec,
    sections,
)


def model_tensors(layers=12):
    """A transformer's names: embed, then per layer four weights and a norm, then Adam's m."""
    out = [InputTensor("embed", (256, 64), "float32", "parameters")]
    for i in range(layers):
        out += [InputTensor(f"layers.{i}.attn.q.kernel", (64, 64), "float32", "parameters"),
                InputTensor(f"layers.{i}.attn.o.kernel", (64, 64), "float32", "parameters"),
                InputTensor(f"layers.{i}.up.kernel", (64, 256), "float32", "parameters"),
                InputTensor(f"layers.{i}.down.kernel", (256, 64), "float32", "parameters"),
                InputTensor(f"layers.{i}.norm.scale", (64,), "float32", "parameters")]
    out += [InputTensor(f"m.l{i}.w", (64, 64), "float32", "optimizer state")
            for i in range(layers)]
    out.append(InputTensor("x", (32, 64), "float32", "inputs"))
    return out


def test_layer_prefix_is_the_name_up_to_its_layer_index():
    assert layer_prefix("layers.3.attn.q.kernel") == "layers.3"
    assert layer_prefix("m.l10.wq") == "m.l10"
    assert layer_prefix("blocks_2.up") == "blocks_2"
    assert layer_prefix("w1") is None                  # a leaf name is not a layer
    assert layer_prefix("up.kernel") is None
    assert layer_prefix("embed") is None


def test_sections_by_kind_then_layer_in_numeric_order():
    secs = sections(model_tensors(12), group_at=16)
    assert [s.title for s in secs] == ["parameters (61)", "optimizer state (12)", "inputs (1)"]
    params = secs[0]
    # embed is in no layer and comes first; then layers 0..11 numerically (not 0, 1, 10, 11).
    assert [p.title for p in params.parts] == (
        ["not in a layer (1)"] + [f"layers.{i} (5)" for i in range(12)])
    assert params.parts[3].names == tuple(f"layers.2.{n}" for n in (
        "attn.q.kernel", "attn.o.kernel", "up.kernel", "down.kernel", "norm.scale"))
    # 12 optimizer tensors are not more than 16: one flat section.
    assert secs[1].parts == ()


def test_rows_are_built_only_for_opened_sections():
    ed = SpecsEditor(lambda name: None)
    ed.set_tensors(model_tensors(12), ("data", "model"))
    assert ed.grouped and ed.rows == {}                 # 74 tensors, nothing built yet
    acc = ed.body.children[0]
    assert list(acc.titles) == ["parameters (61)", "optimizer state (12)", "inputs (1)"]
    acc.selected_index = 0                              # open "parameters": its layers
    inner = acc.children[0].children[0]
    assert ed.rows == {} and inner.titles[1] == "layers.0 (5)"
    inner.selected_index = 1                            # open layers.0: its five rows
    assert sorted(ed.rows) == sorted(f"layers.0.{n}" for n in (
        "attn.q.kernel", "attn.o.kernel", "up.kernel", "down.kernel", "norm.scale"))
    # open() finds a row anywhere, opening its sections.
    row = ed.open("layers.7.up.kernel")
    assert row.shape == (64, 256) and inner.selected_index == 8


def test_filter_lists_the_matches():
    ed = SpecsEditor(lambda name: None)
    ed.set_tensors(model_tensors(12), ("data", "model"))
    ed.filter_w.value = r"layers\.1[01]\.up"
    listed = [c for c in ed.body.children if hasattr(c, "_dom_classes")
              and any(k.startswith("explorer-spec-") for k in c._dom_classes)]
    assert [r for r in ed.rows] == ["layers.10.up.kernel", "layers.11.up.kernel"]
    assert len(listed) == 2 and "2 of 74 tensors match" in ed.body.children[0].value
    assert names_matching(["a(b", "ab"], "a(") == ["a(b"]     # not a regex: matched literally


def test_same_as_copies_a_spec_to_matching_names_of_the_same_rank():
    picked = []
    ed = SpecsEditor(picked.append)
    ed.set_tensors(model_tensors(4), ("data", "model"))
    ed.pick("layers.0.up.kernel", (None, "model"))
    assert picked == ["layers.0.up.kernel"]
    done, skipped = ed.same_as("layers.0.up.kernel", r"layers\.\d+\.up|norm")
    assert done == [f"layers.{i}.up.kernel" for i in range(1, 4)]
    assert skipped == [f"layers.{i}.norm.scale" for i in range(4)]      # rank 1, not 2
    assert all(ed.spec(n) == (None, "model") for n in done)
    assert set(done) <= ed.pinned
    assert picked[-1] is None                                          # one edit for all
    assert "set 3 tensors to" in ed.same_note.value and "skipped 4" in ed.same_note.value
    with pytest.raises(SpecError, match="not an input"):
        ed.same_as("nope", "up")
    with pytest.raises(SpecError, match="not a regular expression"):
        ed.same_as("embed", "(")


def test_errors_in_closed_sections_are_summarised_and_counted_on_titles():
    ed = SpecsEditor(lambda name: None)
    ed.set_tensors(model_tensors(12), ("data", "model"))
    ed.show_error("layers.3.up.kernel", "dimension 1 (size 256) is not divisible by model=3")
    assert unescape(ed.error_summary.value).startswith("layers.3.up.kernel: dimension 1")
    acc = ed.body.children[0]
    assert acc.titles[0] == "parameters (61) ⚠ 1"
    ed.open("layers.3.up.kernel")                       # now on screen: no summary needed
    assert ed.error_summary.value == ""
    assert "not divisible" in ed.rows["layers.3.up.kernel"].error.value
    ed.clear_errors()
    assert acc.titles[0] == "parameters (61)"


def test_specs_follow_a_renamed_or_removed_mesh_axis_in_unbuilt_rows():
    assert renamed_spec(("data", ("model", "x")), ("dp", "model"), {"data": "dp"}) == \
        ("dp", "model")
    ed = SpecsEditor(lambda name: None)
    ed.set_tensors(model_tensors(12), ("data", "model"), {"embed": ("data", "model")})
    ed.set_axes(("dp",), {"data": "dp"})                # model removed, data renamed
    assert ed.spec("embed") == ("dp", None)
    assert ed.open("embed").spec == ("dp", None)


def test_carried_renames_follow_each_axis_from_its_first_name():
    # model renamed tp, then tp renamed mp: model's specs now say mp.
    step1 = carried_renames({}, ("data", "model"), ("data", "tp"), {"model": "tp"})
    assert step1 == {"model": "tp"}
    step2 = carried_renames(step1, ("data", "tp"), ("data", "mp"), {"tp": "mp"})
    assert step2 == {"model": "mp"}
    # data removed; then mp renamed back to model: only the removal is left to carry.
    step3 = carried_renames(step2, ("data", "mp"), ("mp",), {})
    assert step3 == {"model": "mp", "data": None}
    assert carried_renames(step3, ("mp",), ("model",), {"mp": "model"}) == {"data": None}
    # An axis added under a removed axis's name is that axis again.
    assert carried_renames({"data": None}, ("model",), ("model", "data"), {}) == {}
    # Two axes swapping names in one edit.
    assert carried_renames({}, ("a", "b"), ("b", "a"), {"a": "b", "b": "a"}) == \
        {"a": "b", "b": "a"}


def test_a_spec_given_from_outside_the_editor_keeps_an_axis_the_mesh_never_had():
    spec = ("model", ("data", "expert"))
    assert renamed_spec(spec, ("data", "tp"), {"model": "tp"}) == ("tp", "data")
    assert renamed_spec(spec, ("data", "tp"), {"model": "tp"}, dropped=set()) == \
        ("tp", ("data", "expert"))
    assert renamed_spec(spec, ("tp",), {"model": "tp"}, dropped={"data"}) == ("tp", "expert")


def test_a_rank_3_row_puts_its_label_and_three_pickers_on_one_line():
    from explorer._src.ui.editors import SpecRow

    row = SpecRow("layers.w1", (12, 256, 1024), ("data", "model"), (None, "data", "model"),
                  lambda: None)
    line, _error = row.widget.children
    label, *pickers = line.children
    assert pickers == row.pickers and "layers.w1" in label.value
    # Label and pickers within the accordion's 400 px: 90 + 3 x 100.
    widths = [int(w.layout.width.removesuffix("px")) for w in line.children]
    assert widths == [90, 100, 100, 100] and sum(widths) <= 400
    # A rank-4 tensor keeps its own line for the label.
    row4 = SpecRow("layers.wq", (12, 256, 4, 16), ("data", "model"), (), lambda: None)
    assert len(row4.widget.children) == 3
