"""The CLI's help: every option says what it does, and the time limits say their defaults
(issue 53)."""

import argparse

from explorer._src.cli import _DEFAULT_TIMEOUT, _parser
from explorer._src.compile.pool import DEFAULT_TIMEOUT_S
from explorer._src.units import format_seconds


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_every_option_of_every_command_has_help():
    missing = [f"{name} {' '.join(action.option_strings)}"
               for name, parser in _subcommands().items() for action in parser._actions
               if action.option_strings and action.help in (None, "")]
    assert missing == []


def test_the_time_limits_state_their_defaults():
    # The default written in the help is the pool's, which analyze(timeout=None) uses.
    assert _DEFAULT_TIMEOUT == format_seconds(DEFAULT_TIMEOUT_S) == "120 s"
    commands = _subcommands()
    def help_of(command: str, option: str) -> str:
        return next(a.help for a in commands[command]._actions if option in a.option_strings)

    for name in ("analyze", "search", "capacity"):
        assert help_of(name, "--timeout").endswith(f"(default {_DEFAULT_TIMEOUT})")
    assert "(default: none, the search runs to its end)" in help_of("search", "--budget-s")
