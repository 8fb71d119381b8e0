"""Start Voila on the app notebook: what `sharding-explorer app` runs."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

# Idle kernels (each holds compile workers) are culled; a cell that hangs is stopped.
VOILA_LIMITS = [
    "--MappingKernelManager.cull_idle_timeout=1800",   # seconds without activity
    "--MappingKernelManager.cull_interval=120",
    "--VoilaExecutor.timeout=300",                     # seconds per notebook cell
    "--VoilaConfiguration.show_tracebacks=False",
]


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


def voila_command(port: int, ip: str = "127.0.0.1", notebook: Path | None = None) -> list[str]:
    """Voila serving `notebook` (the app notebook by default)."""
    return [sys.executable, "-m", "voila", str(notebook or app_notebook()), "--no-browser",
            f"--port={port}", f"--Voila.ip={ip}", *VOILA_LIMITS]


def serve(port: int | None = None, ip: str = "127.0.0.1") -> int:
    """Run Voila in the foreground until interrupted; returns its exit status."""
    port = port or free_port()
    print(f"sharding-explorer app: http://{ip}:{port}/", flush=True)
    try:
        return subprocess.call(voila_command(port, ip))
    except KeyboardInterrupt:
        return 0
