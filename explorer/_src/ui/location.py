"""The browser page's own address (path and query), told to the kernel by a hidden widget.

A Voila page's kernel is preheated: it runs the app notebook before any page asks for it, so
the notebook cannot know which URL will take it. Voila's own way to get the query
(`voila.utils.get_query_string`) blocks the cell that asks until a page takes the kernel; a
preheated kernel then sits in that cell, under the executor's per-cell time limit, and a page
that takes it while the notebook still runs waits behind it. This widget asks the page
instead: when its view is drawn (a page has taken the kernel and drawn its widgets), it sends
`window.location`'s path and query, and the kernel acts on them then (explorer._src.ui.page).
Nothing waits, and a preheated kernel has finished the notebook when a page takes it.

The other way, the page's address follows the exploration shown: the kernel sets `shown` (the
Share link's `exploration=` text, or "" for the page's default app) and the view puts it in the
address with `history.replaceState` (no navigation, no history entry; other query parameters,
such as a token, are kept), so that a reload or a bookmark opens the same exploration.

Outside Voila (JupyterLab, whose own URL is not the app's) the view sends nothing and changes
no address.
"""

from __future__ import annotations

import anywidget
import ipywidgets as w
import traitlets

_ESM = """
export default {
  render({ model }) {
    if (document.body.dataset.voila === undefined) return;   // JupyterLab: not the app's URL
    // Whether the default app may show (explorer._src.ui.page keeps it hidden on a Voila page until
    // this is known): on a link's page it stays hidden, under "Opening ...", until the kernel
    // has opened the link, rather than showing the wrong app for seconds.
    const link = new URLSearchParams(window.location.search).has("exploration");
    document.body.classList.add(link ? "explorer-opening-link" : "explorer-plain-page");
    model.set("path", window.location.pathname);
    model.set("query", window.location.search);
    model.save_changes();
    const follow = () => {
      const shown = model.get("shown");
      if (shown === null) return;
      const params = new URLSearchParams(window.location.search);
      if (shown) params.set("exploration", shown); else params.delete("exploration");
      const query = params.toString();
      const url = window.location.pathname + (query ? "?" + query : "") + window.location.hash;
      if (url !== window.location.pathname + window.location.search + window.location.hash)
        window.history.replaceState(window.history.state, "", url);
    };
    model.on("change:shown", follow);
    follow();
  },
};
"""


class PageLocation(anywidget.AnyWidget):
    """Hidden; `path` and `query` are None until a Voila page has drawn it, then that page's
    `window.location.pathname` and `.search` (with its `?`, or "" for none). Observe `query`:
    the two arrive in one message, so `path` is set when `query`'s observers run. `shown`:
    what the page's address should name, set by the kernel (None: leave it as it is; "": no
    exploration, the default app; else an `exploration=` link text)."""

    _esm = _ESM
    path = traitlets.Unicode(None, allow_none=True).tag(sync=True)
    query = traitlets.Unicode(None, allow_none=True).tag(sync=True)
    shown = traitlets.Unicode(None, allow_none=True).tag(sync=True)

    def __init__(self, **kwargs):
        super().__init__(layout=w.Layout(display="none"), **kwargs)
