"""Start Voila on the app notebook: what `sharding-explorer app` runs."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from jupyter_server.services.kernels.kernelmanager import AsyncMappingKernelManager

# Idle kernels (each holds compile workers) are culled; a cell that hangs is stopped.
VOILA_LIMITS = [
    "--MappingKernelManager.cull_idle_timeout=1800",   # seconds without activity
    "--MappingKernelManager.cull_interval=120",
    "--VoilaExecutor.timeout=300",                     # seconds per notebook cell
    "--VoilaConfiguration.show_tracebacks=False",
]

# The first result on a page load (docs/performance.md, "First result on a page load"):
# - one preheated kernel waits with the app notebook already executed, so a page load skips
#   the kernel start, the imports and the first result (Voila refills the pool after each use);
# - the culler spares that waiting kernel (it has no page connected, so the stock culler would
#   stop it after cull_idle_timeout and leave the pool empty until the next load);
# - the pool is refilled 5 s after a page takes its kernel, not 1 s: the refill (a kernel start
#   and a run of the notebook) then no longer competes for the CPU with the page drawing its
#   first figures (measured: 1 s of the 4 s to the first heatmap on 2 cores);
# - the page loads no JupyterLab extension it does not use: the app draws plotly figures as
#   widgets (explorer.ui.figure), so the 4.8 MB jupyterlab-plotly renderer is left out.
VOILA_PREHEAT = [
    "--preheat_kernel=True",
    "--pool_size=1",
    "--VoilaConfiguration.multi_kernel_manager_class="
    "explorer.ui.serve.PoolSparingKernelManager",
    "--VoilaKernelManager.fill_delay=5",      # the class Voila's factory builds on the above
]
VOILA_PAGE = ["--VoilaConfiguration.extension_denylist=jupyterlab-plotly"]   # a list, item by item


class PoolSparingKernelManager(AsyncMappingKernelManager):
    """The stock kernel manager, except that the culler leaves Voila's preheated kernels
    (`_pools`, added by Voila's kernel manager factory on top of this class) alone."""

    async def cull_kernel_if_idle(self, kernel_id):
        for pool in getattr(self, "_pools", {}).values():
            for task in pool:
                if task.done() and not task.cancelled() and task.exception() is None \
                        and task.result().get("kernel_id") == kernel_id:
                    return None
        return await super().cull_kernel_if_idle(kernel_id)


def app_notebook() -> Path:
    """notebooks/app.ipynb of a source checkout, or the copy shipped inside the wheel."""
    here = Path(__file__).resolve()
    for candidate in (here.parents[2] / "notebooks" / "app.ipynb", here.parent / "app.ipynb"):
        if candidate.exists():
            return candidate
    raise FileNotFoundError("the app notebook is missing from this installation")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def voila_command(port: int, ip: str = "127.0.0.1", preheat: bool = True) -> list[str]:
    """Voila on the app notebook; `preheat=False` leaves out the preheated kernel (each page
    load then starts its own, as Voila's server extension on Binder does)."""
    return [sys.executable, "-m", "voila", str(app_notebook()), "--no-browser",
            f"--port={port}", f"--Voila.ip={ip}", *VOILA_LIMITS, *VOILA_PAGE,
            *(VOILA_PREHEAT if preheat else [])]


def serve(port: int | None = None, ip: str = "127.0.0.1") -> int:
    """Run Voila in the foreground until interrupted; returns its exit status."""
    port = port or free_port()
    print(f"sharding-explorer app: http://{ip}:{port}/", flush=True)
    try:
        return subprocess.call(voila_command(port, ip))
    except KeyboardInterrupt:
        return 0
