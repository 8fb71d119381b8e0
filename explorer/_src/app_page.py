"""What a page of the app shows when its cell fails: the explorer's own message, saying what
failed and what to do, in place of Voila's generic "There was an error when executing cell
[1]" (the app is served with tracebacks hidden, so that line would be all a visitor saw).

It sits outside explorer._src.ui and imports nothing beyond the standard library until the page is
built, so that it can report a page whose own imports fail: a missing or broken package of the
app extra, or a jax that cannot load. The notebook's cell is `app_page(...)`, displayed.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Callable
from typing import Any, TypeVar

_log = logging.getLogger(__name__)

T = TypeVar("T")

APP_EXTRA = "pip install 'sharding-explorer[app]'"


class FailedPage:
    """A page that could not be built: displays `message` (what failed and what to do) as
    the page's one line, styled as the app's own errors."""

    def __init__(self, message: str):
        self.message = message

    def _repr_html_(self) -> str:
        return ("<div class='explorer-error explorer-page-failed' style='color:#b00020;"
                "font-family:sans-serif;font-size:15px;padding:12px;max-width:60em'>⚠ "
                f"{html.escape(self.message)}</div>")

    def __repr__(self) -> str:
        return f"⚠ {self.message}"


def failure_message(e: BaseException) -> str:
    """What to tell the visitor of a page whose cell raised `e`: the explorer's own message
    for an ExplorerError, the install command for a missing module, and for anything else
    that it is a bug, with the exception, the traceback going to the server's log."""
    from explorer._src.errors import ExplorerError

    if isinstance(e, ExplorerError):
        return (f"The app could not open: {str(e).rstrip('.')}. Fix that value where the page "
                "is defined (its notebook cell), then reload this page.")
    if isinstance(e, ImportError):
        missing = getattr(e, "name", None) or str(e)
        return (f"The app could not start: it needs the Python package {missing!r}, which "
                f"could not be imported ({e}). Install the app extra ({APP_EXTRA}) in the "
                "environment that serves this page, then restart sharding-explorer.")
    return (f"The app could not start because of an unexpected error (a bug in the explorer; "
            f"please report it): {type(e).__name__}: {e}. The full traceback is in the log "
            "of the server that serves this page.")


def page_or_failure(build: Callable[[], T]) -> T | FailedPage:
    """`build()`, or a FailedPage saying why it raised (logged with its traceback)."""
    try:
        return build()
    except Exception as e:
        _log.exception("explorer: the page could not be built", exc_info=e)
        return FailedPage(failure_message(e))


def app_page(**defaults: Any):
    """The app's page (explorer._src.ui.page.AppPage) opened on `defaults`, or a FailedPage that
    says what failed and what to do: the one call of the app notebook's cell."""

    def build():
        from explorer._src.ui.kernel_watch import watch_kernel
        from explorer._src.ui.page import AppPage

        watch_kernel()   # under Voila: a banner with a Reload button if the kernel dies
        return AppPage(**defaults)

    return page_or_failure(build)
