"""A machine loaded by a parallel job, for the tests that must hold on a busy machine: one
CPU-burning process per core, started and known to run before the test goes on, and killed and
waited for whatever happens. Each burner ends by itself should its parent (pytest) be gone, so
an interrupted run leaves no load behind."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator

BURN = ("import os, sys\nparent = int(sys.argv[1])\n"
        "while os.getppid() == parent:\n    for _ in range(1_000_000):\n        pass\n")


def cpu_ticks(pid: int) -> int:
    """The user and system clock ticks process `pid` has run (/proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])       # utime, stime (fields 14 and 15)


@contextlib.contextmanager
def burners(count: int | None = None) -> Iterator[list[subprocess.Popen]]:
    """`count` (default: one per core) CPU-burning processes, each known to have run (its CPU
    time counted: a state, not a speed) before the body starts; killed and waited for after."""
    procs: list[subprocess.Popen] = []
    try:
        for _ in range(count or os.cpu_count() or 2):
            procs.append(subprocess.Popen([sys.executable, "-c", BURN, str(os.getpid())],
                                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + 120
        while not all(p.poll() is None and cpu_ticks(p.pid) > 0 for p in procs):
            assert all(p.poll() is None for p in procs), "a burner exited at its start"
            assert time.monotonic() < deadline, "the burners never got a CPU"
            time.sleep(0.2)
        yield procs
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
