"""Messages that make a compile worker crash or hang, for the tests of crash and time-limit
recovery and of busy workers. They are no part of the protocol (explorer/_src/compile/protocol.py):
a worker answers them only where this module is its test hook (explorer/_src/compile/worker.py,
HOOK_VARIABLE), which `answer_faults` sets for the workers a test starts. They travel pickled,
as any message does; the worker imports this module by the name the test imported it under,
from its PYTHONPATH, which the pool makes of the test process's sys.path."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from explorer._src.compile.protocol import Pong


@dataclass(frozen=True)
class Crash:
    """The worker exits at once with `exit_code`."""

    exit_code: int = 3


@dataclass(frozen=True)
class Sleep:
    """The worker sleeps, then answers a Pong: a long compile, or a worker kept busy."""

    seconds: float


def answer(message) -> Pong | None:
    """The hook: the worker's answer to a Crash or a Sleep; None for any other message."""
    if isinstance(message, Crash):
        os._exit(message.exit_code)
    if isinstance(message, Sleep):
        import jax

        time.sleep(message.seconds)
        return Pong(devices=len(jax.devices()), pid=os.getpid())
    return None


def answer_faults(monkeypatch) -> None:
    """Have the workers the test starts from now on answer Crash and Sleep (those started
    before it answer them with a Failure)."""
    from explorer._src.compile.worker import HOOK_VARIABLE

    monkeypatch.setenv(HOOK_VARIABLE, __name__)
