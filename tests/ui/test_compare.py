"""The Compare tab: pin a result as A, edit, and see what changed in B, drawn as HTML. The
comparison itself is tested in tests/report/test_compare.py. No browser."""

import pytest

pytest.importorskip("ipywidgets")

from explorer._src.report.compare import compare  # noqa: E402
from explorer._src.ui.compare import CompareView, comparison_html  # noqa: E402


def test_comparison_html_colours_rows_and_indents_parts(megatron, replicated):
    page = comparison_html(compare(megatron, replicated))
    assert "class='explorer-compare'" in page
    assert "class='explorer-compare-removed' style='background:#fee2e2'" in page
    assert "explorer-compare-added" not in page
    # A part of a total is indented under it; the label is shown without the key.
    assert ("<tr data-metric='arguments'><td style='padding-left:24px;color:#555'>arguments"
            in page)
    assert "<tr data-metric='memory'><td>memory/device</td>" in page
    page = comparison_html(compare(replicated, megatron))
    assert "class='explorer-compare-added' style='background:#dcfce7'" in page


def test_view_pin_clear_update(megatron, replicated):
    app = {"report": None}
    view = CompareView(lambda: app["report"])
    assert "explorer-compare" in view.widget._dom_classes
    assert "explorer-compare-pin" in view.pin_button._dom_classes
    assert "Pin a result to compare" in view.html.value
    view.pin_button.click()                      # nothing computed yet
    assert view.pinned is None and "No result to pin yet" in view.html.value

    app["report"] = megatron
    view.pin_button.click()
    assert view.pinned is megatron and not view.clear_button.disabled
    assert view.comparison.identical_collectives
    assert "B is the pinned result itself" in view.html.value

    app["report"] = replicated                   # the user edits; the app passes B on
    view.update(replicated)
    assert view.pinned is megatron
    assert [c.kind for c in view.comparison.removed] == ["all-reduce"]
    assert "explorer-compare-removed" in view.html.value
    assert "<b>1</b> removed" in view.html.value

    view.clear_button.click()
    assert view.pinned is None and view.clear_button.disabled
    assert "Pin a result to compare" in view.html.value
    view.update(megatron)                        # updates without a pin stay empty
    assert "Pin a result to compare" in view.html.value


def test_what_changed_is_listed_before_what_did_not(megatron):
    from dataclasses import replace

    # B: Megatron's all-reduce and one more, from another line; A: Megatron alone.
    [c] = megatron.collectives
    more = replace(megatron, collectives=(c, replace(c, source="other.py:1")))
    page = comparison_html(compare(megatron, more))
    assert page.index("explorer-compare-added") < page.index("explorer-compare-unchanged")
