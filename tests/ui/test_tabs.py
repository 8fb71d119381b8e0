"""The tab registry: one Tab class per title of AppTab (explorer/_src/api/exploration.py, the one
list of the titles), in its order, and a registry that misses a title or names one twice is
refused when it is built, not when a tab is drawn."""

import pytest

pytest.importorskip("ipywidgets")

from explorer._src.api.exploration import APP_TABS, AppTab  # noqa: E402
from explorer._src.ui.app import TAB_TITLES  # noqa: E402
from explorer._src.ui.tabs import (  # noqa: E402
    REGISTRY,
    MemoryTab,
    _in_app_order,
)


def test_the_registry_has_one_tab_per_title_in_the_apps_order():
    assert [cls.title for cls in REGISTRY] == list(AppTab)
    assert tuple(TAB_TITLES) == APP_TABS
    assert [cls.title for cls in _in_app_order(*reversed(REGISTRY))] == list(AppTab)


@pytest.mark.parametrize("tabs", [
    REGISTRY[:-1],                              # a title without its Tab class
    (*REGISTRY, MemoryTab),                     # a title twice
], ids=["missing", "twice"])
def test_a_registry_that_is_not_one_class_per_title_is_refused(tabs):
    with pytest.raises(RuntimeError, match="one Tab class per title"):
        _in_app_order(*tabs)

