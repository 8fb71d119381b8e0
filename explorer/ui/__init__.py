"""The interactive explorer (ipywidgets + plotly), the app's public face; install its
libraries with the `app` extra.

`Explorer` opens the app on a built-in workload; `explore(fn, *args)` on the user's own
function of TensorSpecs, `explore_module(model, *inputs)` on a Flax NNX module;
`watch_kernel()` shows, in a notebook, when its kernel stopped."""

from explorer._src.ui.app import App, Explorer
from explorer._src.ui.explore import explore, explore_module
from explorer._src.ui.kernel_watch import watch_kernel

__all__ = ["App", "Explorer", "explore", "explore_module", "watch_kernel"]
