"""The interactive explorer (ipywidgets + plotly). The only part of the package that imports
UI libraries; install them with the `app` extra."""

from explorer.ui.app import Explorer as Explorer

__all__ = ["Explorer"]
