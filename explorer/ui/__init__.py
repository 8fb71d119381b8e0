"""The interactive explorer (ipywidgets + plotly). The only part of the package that imports
UI libraries; install them with the `app` extra.

`Explorer` opens the app on a built-in workload; `explore(fn, *args)` on the user's own
function of TensorSpecs, `explore_module(model, *inputs)` on a Flax NNX module."""

from explorer.ui.app import App as App
from explorer.ui.app import Explorer as Explorer
from explorer.ui.explore import explore as explore
from explorer.ui.explore import explore_module as explore_module

__all__ = ["App", "Explorer", "explore", "explore_module"]
