"""The explorer's implementation: private, free to change between releases. The public
faces are `explorer` (the analysis API and every type a Report holds), `explorer.ui` (the app)
and `explorer.cli` (the command line)."""
