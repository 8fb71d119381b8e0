"""A page served by Voila says, in words, when its Python kernel has gone.

Each Voila page runs the app in its own kernel. When that kernel dies (the machine's
out-of-memory killer, a crash), the page's widgets stop answering and nothing on the page says
why. Jupyter's server restarts a dead kernel and tells the page ("restarting", or "dead" when
the restart fails) over the kernel's websocket; Voila 0.5's page keeps that connection in its
widget manager (`window.jupyterapp.widgetManagerPromise`, resolved to a manager whose `kernel`
is a @jupyterlab/services KernelConnection) but shows none of it. The script below listens to
that connection's status and puts a banner over the page. A restarted kernel is a new, empty
one (the app's state is gone), so the only way on is a reload, which gets a fresh kernel that
runs the app again.

The script is an HTML output with a `<script>`, which Voila renders trusted (it runs the
notebook itself). It does nothing outside Voila (JupyterLab shows a kernel's death itself).
"""

from __future__ import annotations

import json

# What the banner says: for a workshop participant, not for someone who knows what a kernel is.
KERNEL_STOPPED = ("The app's Python kernel stopped (it may have run out of memory). "
                  "Reload the page to start again.")
CONNECTION_LOST = ("The page lost its connection to the app's Python kernel (the app's "
                   "server may have stopped). Reload the page to start again.")
# The banner's class, for tests and styles.
BANNER_CLASS = "explorer-kernel-lost"

# Kernel statuses (KernelConnection.status) that mean the kernel the page's widgets live in is
# gone: the server restarted it ("restarting", "autorestarting") or could not ("dead").
_GONE = ("restarting", "autorestarting", "dead")

_SCRIPT = """
(function () {
  if (window.__explorerKernelWatch || document.body.dataset.voila === undefined) return;
  window.__explorerKernelWatch = true;
  const text = %(text)s, gone = %(gone)s, banner = %(banner)s;
  function say(words) {
    if (document.querySelector("." + banner)) return;
    const box = document.createElement("div");
    box.className = banner;
    box.setAttribute("role", "alert");
    box.style.cssText = "position:fixed;top:0;left:0;right:0;z-index:10000;"
      + "padding:12px 18px;background:#fdecea;color:#5f2120;font:16px/1.4 sans-serif;"
      + "border-bottom:2px solid #d32f2f;box-shadow:0 2px 6px rgba(0,0,0,.2)";
    const words_ = document.createElement("span");
    words_.textContent = words + " ";
    const reload = document.createElement("button");
    reload.textContent = "Reload";
    reload.onclick = () => window.location.reload();
    box.append(words_, reload);
    document.body.appendChild(box);
    document.body.style.paddingTop = box.offsetHeight + "px";   // the page's top stays in view
    // The app's widgets no longer answer: grey them, so that nobody edits into the void, and
    // hide the broken-link mark ipywidgets puts on every widget of a lost kernel (the banner
    // says it once).
    const style = document.createElement("style");
    style.textContent = ".jupyter-widgets-disconnected::before { display: none !important; }";
    document.head.appendChild(style);
    for (const app of document.querySelectorAll(".explorer-app")) {
      app.style.opacity = "0.45";
      app.style.pointerEvents = "none";
    }
  }
  function watch(kernel) {
    if (gone.includes(kernel.status)) say(text.stopped);
    kernel.statusChanged.connect((_, status) => {
      if (gone.includes(status)) say(text.stopped);
    });
    kernel.connectionStatusChanged.connect((_, status) => {
      if (status === "disconnected") say(text.lost);
    });
  }
  // Voila sets window.jupyterapp once its plugins have started, which may be after this
  // output is rendered: look for it every 200 ms, for up to 10 minutes.
  (function find(tries) {
    const app = window.jupyterapp;
    if (app && app.widgetManagerPromise) {
      app.widgetManagerPromise.promise.then((m) => { if (m && m.kernel) watch(m.kernel); });
    } else if (tries > 0) {
      setTimeout(() => find(tries - 1), 200);
    }
  })(3000);
})();
"""


def page_script() -> str:
    """The `<script>` element that watches the page's kernel (see the module's docstring)."""
    return "<script>" + _SCRIPT % {
        "text": json.dumps({"stopped": KERNEL_STOPPED, "lost": CONNECTION_LOST}),
        "gone": json.dumps(list(_GONE)), "banner": json.dumps(BANNER_CLASS)} + "</script>"


def watch_kernel() -> None:
    """Display the script in the current cell's output: under Voila, the page then says so when
    its kernel dies or its connection is lost, with a Reload button. Call it once per page, in
    the cell that shows the app (a second call does nothing more)."""
    from IPython.display import HTML, display

    display(HTML(page_script()))
