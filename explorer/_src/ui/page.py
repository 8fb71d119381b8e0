"""The Voila app's page (notebooks/app.ipynb): the default app at once, replaced by the
exploration its URL names (`?exploration=...`, explorer._src.api.exploration's `to_link`).

Voila runs the notebook in a preheated kernel before any page asks for it, so the notebook
cannot know the page's URL. The page builds the default app (`AppPage(...)`), so a plain page
load finds its first result ready, and a hidden `PageLocation` widget (explorer._src.ui.location)
which, once a page has drawn it, tells the kernel that page's path and query. Then, when the
query names an exploration, the page opens the app on it in the default's place. The browser
knows at once that its URL names one: it keeps the default app hidden meanwhile and shows
"Opening the exploration this link names…" (the `explorer-opening-link` class on the page's
body), so a link's page never shows the wrong app. A link that cannot be opened (bad base64,
hostile JSON, a user's function, which a link does not carry) shows the default app, working,
under one error line that says what was wrong.

The linked app is shown as soon as its sidebar is set, and its first result compiles as an
edit's does, the app's status line ticking; over it, the opening line (explorer._src.ui.opening)
says what is opened, with which compiler, under which time limit, for how long, and what runs
now. When the first compile fails, that line says so and what to do, and the exploration's
settings stay loaded for the user to change.

The page's address follows the request the app's session holds (the last edit the sidebar
accepted, its time limit included, whether or not its result is shown yet) with the visible tab
and picked tensor: after every result, tab, tensor and status change it is put in the address
(`PageLocation.shown`), the default app's own first one as no `exploration=` at all, so that a
reload or a bookmark opens what was asked last; a limit raised after a compile stopped at the old
one is kept by a reload. The opening line's limit follows that request too.
"""

from __future__ import annotations

import html
import logging
import re
import urllib.parse
from typing import Any

import ipywidgets as w

from explorer._src.api.exploration import Exploration, from_link
from explorer._src.compile.pool import default_pool
from explorer._src.errors import ExplorerError, InputError
from explorer._src.ui.app import Explorer
from explorer._src.ui.location import PageLocation
from explorer._src.ui.opening import Opening
from explorer._src.ui.share import QUERY_KEY, exploration_of, link_refusal, shown_exploration

_log = logging.getLogger(__name__)


def linked_exploration(query: str | None) -> str | None:
    """The `exploration=` value of a query string (with or without its `?`), or None when it
    names none.

    Raises:
        InputError: the query gives more than one."""
    values = urllib.parse.parse_qs((query or "").lstrip("?")).get(QUERY_KEY, [])
    if len(values) > 1:
        raise InputError(f"the URL gives {len(values)} {QUERY_KEY}= values; a link opens one")
    return values[0] if values else None


class AppPage:
    """The app's page: an error line over the app, the default `Explorer(**defaults)` until
    the page's URL (or `open_query`) names another. Display it in a cell; `app` is the app
    shown."""

    def __init__(self, **defaults: Any):
        self.defaults = defaults
        self.error = w.HTML()
        self.error.add_class("explorer-error")
        self.error.add_class("explorer-page-error")
        self.app: Explorer = Explorer(**defaults)
        self.app.widget.add_class(_DEFAULT_CLASS)
        self.location = PageLocation()
        self.location.observe(self._on_location, "query")
        self.style, self.opening = w.HTML(_PAGE_STYLE), _opening()
        self.widget = w.VBox([self.style, self.opening, self.error, self.app.widget,
                              self.location])
        # The default app's first exploration: the page's address names no other for it.
        self.default: Exploration | None = shown_exploration(self.app)
        self._follow_app(self.app)
        self.opened: Opening | None = None          # the link being opened, until it shows

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    def _on_location(self, change) -> None:
        # A second view of the page (the same kernel drawn again) sends its URL again: the
        # page opens a link once.
        if change["old"] is None:
            self.open_query(change["new"], path=self.location.path)

    def open_query(self, query: str, path: str | None = None) -> None:
        """Open the exploration `query` (a URL's query string, with or without its `?`) names
        in place of the default app, on its tab and tensor; `path`, the page's path, is where
        the Share section's links point. A link that cannot be opened leaves the default app
        and says why on the error line; a query without `exploration=` leaves the page as it
        is."""
        self.app.share.path = path
        try:
            text = linked_exploration(query)
            if text is None:
                self.widget.children = (self.style, self.error, self.app.widget, self.location)
                self.app.share.update()      # the page's path is known now
                return
            exploration = from_link(text)
            opening = Opening(exploration, (self.defaults.get("pool") or default_pool()).timeout)
            self.opening.value = opening.progress_html("")
            # Shown before its first result, which compiles as an edit's does.
            opened = Explorer.from_exploration(exploration, wait=False, **self._app_options())
        except ExplorerError as e:
            self._say(str(e))
            return
        except Exception as e:            # a bug: say so, keep the default app working
            _log.exception("explorer: the exploration link could not be opened", exc_info=e)
            self._say(f"unexpected error (a bug in the explorer; please report it): "
                      f"{type(e).__name__}: {e}")
            return
        self.app.close()
        self.app = opened
        opened.share.path = path
        self._follow_app(opened)
        opened.share.update()
        self.error.value = ""
        self._watch_opening(opened, opening)

    def _watch_opening(self, app: Explorer, opening: Opening) -> None:
        """Keep the opening line over `app` until its first result shows: what is opened,
        how and for how long, what runs now (the app's status line), or why it failed."""
        self.opened = opening

        def update(_=None):
            # The limit of the request compiling now: the link's, the target's default, or
            # one raised since (the offer under a compile stopped at its limit).
            if app.session is not None and app.session.request.timeout is not None:
                opening.limit_s = app.session.request.timeout
            if self.app is not app or self.opened is not opening:
                app.status.unobserve(update, "value")
            elif app.report is not None:          # the first result: the page is the app
                self.opened = None
                app.status.unobserve(update, "value")
                self.widget.children = (self.style, self.error, app.widget, self.location)
            elif app.error is not None:
                self.opening.value = opening.failed_html(app.error)
            else:
                self.opening.value = opening.progress_html(_text(app.status.value))

        app.status.observe(update, "value")
        self.widget.children = (self.style, self.opening, self.error, app.widget,
                                self.location)
        update()

    def _follow_app(self, app: Explorer) -> None:
        """Keep the page's address on `app`'s request: after each result, tab and tensor (the
        Share section's followers) and each status change (an edit accepted, a compile
        started), while `app` is the page's."""
        def follow(_=None):
            if self.app is not app:
                app.status.unobserve(follow, "value")
            else:
                self._follow(app)

        app.share.followers.append(follow)
        app.status.observe(follow, "value")
        self._follow(app)             # an app opened with its first compile done already

    def _follow(self, app: Explorer) -> None:
        """The page's address names the request `app`'s session holds, on its tab and tensor
        (none for the default app's first one). Only once the page has told its address: a
        preheated kernel's first result must not clear the link of the page that takes it."""
        if self.location.query is None or app.session is None:
            return
        e = exploration_of(app.session.request, app.tabs, app.placement)
        if link_refusal(e) is None:
            self.location.shown = "" if e == self.default else e.to_link()

    def _app_options(self) -> dict:
        """The defaults' options that are not the request (how the app compiles)."""
        return {k: v for k, v in self.defaults.items() if k in ("debounce", "pool")}

    def _say(self, message: str) -> None:
        self.error.value = (f"<div>⚠ This link's exploration could not be opened: "
                            f"{html.escape(message.rstrip('.'))}. Showing the default app.</div>")
        self.app.widget.remove_class(_DEFAULT_CLASS)      # shown again, under the error
        self.widget.children = (self.style, self.error, self.app.widget, self.location)
        self.app.share.update()


# The default app on a Voila page: hidden until the page's location widget has marked the body
# (explorer._src.ui.location), since the app's views may be drawn before it; then shown on a plain
# page, and kept hidden under "Opening ..." on a link's page until the link is open. Should the
# location widget never be drawn, the app shows after 5 s anyway.
_DEFAULT_CLASS = "explorer-page-default"
_OPENING = "Opening the exploration this link names…"
_PAGE_STYLE = f"""<style>
@keyframes explorer-reveal {{ to {{ visibility: visible; }} }}
body[data-voila] .{_DEFAULT_CLASS} {{ visibility: hidden;
  animation: explorer-reveal 0s 5s forwards; }}
body.explorer-plain-page .{_DEFAULT_CLASS} {{ visibility: visible; animation: none; }}
body.explorer-opening-link .{_DEFAULT_CLASS} {{ display: none; }}
.explorer-page-opening-early {{ display: none; }}
.explorer-page-opening {{ font: 14px/1.5 sans-serif; padding: 6px 12px; margin: 4px 0;
  background: #eff6ff; border-left: 4px solid #2563eb; }}
.explorer-page-opening.explorer-opening-failed {{ background: #fdecea; color: #5f2120;
  border-left-color: #b00020; }}
.explorer-opening-now {{ color: #374151; }}
body.explorer-opening-link .explorer-page-opening-early {{ display: block; }}
</style>"""


def _text(value: str) -> str:
    """The words of a widget's HTML."""
    return html.unescape(re.sub(r"<[^>]+>", "", value)).strip()


def _opening() -> w.HTML:
    """The line a link's page shows until its exploration is open (hidden on other pages)."""
    line = w.HTML(f"<div class='explorer-page-opening'>{_OPENING}</div>")
    line.add_class("explorer-page-opening-early")
    return line
