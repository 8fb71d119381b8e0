"""What the Suggest tab's two searches share: work on a thread whose results are posted back to
the kernel's event loop, and every error shown in the tab's message line, never raised into the
kernel (an explorer error as it is, anything else as a bug)."""

from __future__ import annotations

import asyncio
import html
import logging
import threading
from collections.abc import Callable

import ipywidgets as w

from explorer._src.errors import ExplorerError

_log = logging.getLogger(__name__)


def running_loop():
    """The event loop of the calling thread (the kernel's, where a widget callback runs), or
    None in a script."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class BackgroundTab:
    """A tab that runs one job at a time on a thread. `what` names it in the log; `message` is
    the tab's error line; `error` the last message shown there."""

    what = "a background job"

    def __init__(self) -> None:
        self.error: str | None = None
        self.message = w.HTML()
        self.message.add_class("explorer-error")
        self._thread: threading.Thread | None = None
        self._loop = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _say(self, text: str) -> None:
        self.error = text or None
        self.message.value = html.escape(text)

    def _say_failure(self, e: BaseException) -> None:
        """An error in the tab: an explorer error as it is, anything else logged as a bug."""
        if isinstance(e, ExplorerError):
            self._say(str(e))
            return
        _log.exception("explorer: unexpected error in %s", self.what, exc_info=e)
        self._say(f"unexpected error (a bug in the explorer; please report it): "
                  f"{type(e).__name__}: {e}")

    def _guard(self, fn):
        """`fn` as a callback whose errors are shown in the tab, never raised into the
        kernel."""
        def guarded(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except Exception as e:
                self._say_failure(e)
            return None
        return guarded

    def _start_thread(self, target: Callable, args: tuple, name: str) -> None:
        """Run `target(*args)` on a daemon thread; what it posts runs on this thread's loop."""
        self._loop = running_loop()
        self._thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._thread.start()

    def _post(self, fn: Callable[[], None]) -> None:
        """Run `fn` on the kernel's loop (widgets are updated there), or at once, one at a
        time, where there is none."""
        guarded = self._guard(fn)
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(guarded)
        else:
            with self._lock:
                guarded()
