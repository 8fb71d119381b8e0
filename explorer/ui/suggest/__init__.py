"""The Suggest tab's layout search: the widget (`view.py`), explorer.search of the app's program
on a thread, its ranked candidates and Apply. Import each name from the module that defines it;
this package re-exports nothing."""
