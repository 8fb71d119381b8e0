"""The Suggest tab's layout search: `job.py` says what a search of the app's program is, from the
tab's text (no widgets); `tables.py` draws its progress, summary and ranked candidates as HTML;
`pareto.py` plots step time against memory; `view.py` is the widget (`SuggestView`), which runs
explorer.search on a thread and applies a candidate to the editors. Import each name from the
module that defines it: this package re-exports nothing."""
