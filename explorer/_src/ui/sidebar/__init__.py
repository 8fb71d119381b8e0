"""The app's sidebar: `widgets.py` builds and lays out its editors (`Sidebar`); `checks.py` turns
what they hold into a checked request at the edge, each error shown next to the widget at fault
(`SidebarChecks`, which `Sidebar` extends; the time limit's default, the app's words for an
error, the targets a mesh fits). Import each name from the module that defines it: this package
re-exports nothing."""
