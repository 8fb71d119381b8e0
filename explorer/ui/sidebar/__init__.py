"""The app's sidebar: `widgets.py` builds and lays out its editors (`Sidebar`). Import each name
from the module that defines it: this package re-exports nothing."""
