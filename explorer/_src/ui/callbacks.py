"""How the app's widget callbacks run: guarded, so that an error is shown in the app and never
raised into the kernel, and muted while the app changes its own widgets, so that a picker the
app sets is not taken for the user's edit."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from explorer._src.errors import ExplorerError


class Mute:
    """How many of the app's own widget changes are in progress. `with muted:` around a change;
    a callback that finds `muted` true (a change the app made, not the user) does nothing.
    Nested changes count, so the innermost's end does not unmute the outer."""

    def __init__(self) -> None:
        self.depth = 0

    def __bool__(self) -> bool:
        return self.depth > 0

    def __enter__(self) -> Mute:
        self.depth += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self.depth -= 1


def guarded(fn: Callable[..., Any], show_error: Callable[[str], None],
            show_bug: Callable[[BaseException], None]) -> Callable[..., Any]:
    """`fn` as a widget callback: an ExplorerError it raises goes to `show_error`, anything else
    (a bug) to `show_bug`; neither reaches ipywidgets, which would print it to the kernel log
    and leave the app half-updated."""

    @functools.wraps(fn)
    def guard(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ExplorerError as e:
            show_error(str(e))
        except Exception as e:      # a bug: said in the app, kept for a report
            show_bug(e)
        return None

    return guard
