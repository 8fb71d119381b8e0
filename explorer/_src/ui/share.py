"""Share: the exploration shown (its request, its target, the visible tab and picked tensor) as a
link to the app and as a file to download, in a small section of the app's sidebar.

The link is the page's own path with `?exploration=...` (explorer._src.api.exploration's
`to_link`), which the Voila app opens (explorer._src.ui.page). The app's page learns its path from
the browser (explorer._src.ui.location); an app in another notebook served by Voila finds it in the
kernel's environment (`SCRIPT_NAME`, `PATH_INFO`); elsewhere (JupyterLab) the section shows the
query to append to the app's URL. The file is a data: URI with a `download` attribute, so it
needs no server.

A user's function and its inputs are not carried by a link: for one, the section offers the
file (its specs, and its module path where importable) and says so in a line. The section is
stamped with the id of the result it was made from, like every view, and made again for each
new result, tab and tensor (and its `followers` told, so that the page's address names the
exploration shown); while the tabs are greyed (an edit in error, or waiting for Apply)
it is greyed with them and says that it is the shown result's.
"""

from __future__ import annotations

import base64
import html
import os
import re
import urllib.parse
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

import ipywidgets as w

from explorer._src.api.exploration import APP_TABS, MAX_LINK_CHARS, AppState, Exploration
from explorer._src.ui.history import limit_text
from explorer._src.ui.views import OUTDATED, stamped

if TYPE_CHECKING:
    from explorer._src.api.analysis_request import Request
    from explorer._src.api.session import Result
    from explorer._src.report.report import Report
    from explorer._src.ui.sources import AppRequest, Source
    from explorer._src.ui.views import PlacementView

QUERY_KEY = "exploration"
STALE = "explorer-stale"          # the class the app puts on its tabs while they are greyed


class Shown(Protocol):
    """What the section reads from the app (explorer._src.ui.app.App)."""

    report: Report | None
    result: Result | None                # its Request is the one written down
    request: AppRequest | None
    source: Source
    result_id: int
    tabs: w.Tab
    placement: PlacementView


def page_path(environ: Mapping[str, str] = os.environ) -> str | None:
    """The path of the Voila page this kernel serves (`SCRIPT_NAME` and `PATH_INFO`, which
    Voila puts in the kernel's environment with `SERVER_SOFTWARE` ``voila/...``), or None
    outside Voila or before a page has taken a preheated kernel."""
    if not environ.get("SERVER_SOFTWARE", "").startswith("voila/"):
        return None
    path = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
    return path or "/"


def shown_exploration(app: Shown) -> Exploration | None:
    """The exploration of the result the app shows: the Request it answers, written down
    (`Exploration.of`), with the visible tab and the picked tensor. None before the first
    result."""
    if app.result is None:
        return None
    return exploration_of(app.result.request, app.tabs, app.placement)


def exploration_of(request: Request, tabs: w.Tab, placement: PlacementView) -> Exploration:
    """`request` as an exploration with the app's tab and tensor now (its `extrapolate`, the
    sidebar's box, with it); its time limit only where it is not the default of what compiles
    it (the sidebar's box then empty): a default follows the target where the exploration is
    opened."""
    state = AppState(APP_TABS[tabs.selected_index or 0], placement.tensor.value)
    given = bool(limit_text(request))
    return Exploration.of(request, state, default_timeout=None if given else request.timeout)


def link_refusal(e: Exploration) -> str | None:
    """Why `e` cannot be offered as a link (it carries a user's function, or it is longer than
    a link the app opens), or None. Nothing is planned: `e` was written from a Request that
    planned, so the app opens it."""
    if e.workload is None:
        return "a link does not carry a user's function"
    if len(e.to_link()) > MAX_LINK_CHARS:
        return f"its link would be longer than the {MAX_LINK_CHARS} characters a link carries"
    return None


def file_name(e: Exploration) -> str:
    """A download's file name: the workload (or function) and the mesh, in safe characters."""
    what = e.workload or (e.function.qualname if e.function is not None else "function")
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{what}-{e.mesh}").strip("-") + ".json"


def share_html(e: Exploration, path: str | None) -> str:
    """The section's HTML for exploration `e`, its link on page `path` (None: not under
    Voila, so the query to append to the app's URL is shown instead)."""
    data = base64.b64encode(e.to_json().encode()).decode()
    download = (f"<a class='explorer-share-download' download='{html.escape(file_name(e))}' "
                f"href='data:application/json;base64,{data}'>⬇ Download exploration "
                "(.json)</a>")
    if e.workload is None:
        what = (f"your function <code>{html.escape(e.function.text())}</code>"
                if e.function is not None else "your function")
        return (f"<div class='explorer-share-head'><b>Share</b> · {download}</div>"
                f"<div class='explorer-note explorer-share-function'>A link does not carry "
                f"{what} or its inputs: the file keeps their specs; open it with "
                "<code>explorer.load_exploration(path).analyze(fn, *inputs)</code>.</div>")
    # Plain text, no element of its own around a name: a page's tab or tensor is found by its
    # exact text (a tab title in <b> would be a second "Memory" on the page).
    tensor = f", with {html.escape(e.app.tensor)} picked in Placement" if e.app.tensor else ""
    extrapolated = (" <span class='explorer-share-extrapolated'>(extrapolated: estimated "
                    "from compiles of fewer layers, as here)</span>" if e.extrapolate else "")
    opens = (f"<div class='explorer-note'>Opens the app on this request and target"
             f"{extrapolated}, on its {html.escape(e.app.tab)} tab{tensor}.</div>")
    query = f"?{QUERY_KEY}={e.to_link()}"
    if path is None:
        link, text = "", query
        how = "Append to the Voila app's URL (<code>sharding-explorer app</code>):"
    else:
        text = urllib.parse.quote(path, safe="/") + query
        link = (f"<a class='explorer-share-link' href='{html.escape(text, quote=True)}' "
                "target='_blank'>Link to this exploration</a> · ")
        how = "Copy the link's address (right-click it), or this path after the server's address:"
    return (f"<div class='explorer-share-head'><b>Share</b> · {link}{download}</div>"
            f"<div class='explorer-note'>{how}</div>"
            f"<code class='explorer-share-url'>{html.escape(text)}</code>{opens}")


SHARE_STYLE = """<style>
.explorer-share { font-size: 12px; border-top: 1px solid #ddd; padding-top: 4px;
  margin-top: 4px; }
.explorer-share .widget-html-content { line-height: 1.4; }
.explorer-share a { color: #1d4ed8; text-decoration: underline; }
.explorer-share code.explorer-share-url { display: block; user-select: all; font-size: 11px;
  line-height: 1.3; word-break: break-all; max-height: 5.3em; overflow-y: auto;
  background: #f6f8fa; padding: 2px 4px; }
.explorer-share .explorer-share-stale { color: #92400e; }
</style>"""


class SharePanel:
    """The Share section of the app's sidebar, kept to the result shown."""

    def __init__(self, app: Shown, guard: Callable[[Callable], Callable]):
        self._app = app
        self.exploration: Exploration | None = None      # what the section shows now
        self.result: int | None = None                   # the result it was made from
        # The page's path as its browser told it (explorer._src.ui.page); None: Voila's request
        # environment, where a kernel that was not preheated has it (page_path).
        self.path: str | None = None
        self.widget = w.HTML()
        self.widget.add_class("explorer-share")
        # Called with each exploration a link can carry as the section is made for it: the
        # page's address follows them (explorer._src.ui.page).
        self.followers: list[Callable[[Exploration], None]] = []
        again = guard(lambda _: self.update())
        app.tabs.observe(again, "selected_index")
        app.tabs.observe(again, "_dom_classes")          # greyed and back
        app.placement.tensor.observe(again, "value")

    def outdate(self) -> None:
        """The app is about to name a new result in its status: the section, of the result
        before, is hidden until `update` makes it for the new one (on a loaded machine the
        status reached the page seconds before it, issue 53)."""
        self.widget.add_class(OUTDATED)

    def update(self) -> None:
        """Make the section again from the app's result, tab and tensor now."""
        app = self._app
        e = shown_exploration(app)
        self.exploration, self.result = e, app.result_id
        if e is None:
            self.widget.value = ""
            self.widget.remove_class(OUTDATED)
            return
        refused = link_refusal(e)
        if refused is not None and e.workload is not None:
            body = (f"<div class='explorer-error'>This exploration cannot be shared as a link: "
                    f"{html.escape(refused)}</div>")
        else:
            body = share_html(e, self.path if self.path is not None else page_path())
        if refused is None:
            for follow in self.followers:
                follow(e)
        if STALE in app.tabs._dom_classes:
            body += ("<div class='explorer-share-stale'>Of the result shown (greyed), not of "
                     "the edits since.</div>")
        self.widget.value = SHARE_STYLE + stamped(body, app.result_id)
        self.widget.remove_class(OUTDATED)       # after its new text: never the old one shown
