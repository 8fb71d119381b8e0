"""A directive that prints the CLI's own --help text, so the CLI page can never drift from it.

    ```{cli-help}
    ```            the top-level help
    ```{cli-help} analyze
    ```            one subcommand's help
"""

from docutils import nodes
from sphinx.util.docutils import SphinxDirective


class CliHelp(SphinxDirective):
    optional_arguments = 1

    def run(self):
        from explorer._src.cli import _parser

        parser = _parser()
        if self.arguments:
            sub = next(a for a in parser._actions if a.dest == "command")
            parser = sub.choices[self.arguments[0]]
        text = parser.format_help()
        return [nodes.literal_block(text, text, language="text")]


def setup(app):
    app.add_directive("cli-help", CliHelp)
    return {"parallel_read_safe": True}
