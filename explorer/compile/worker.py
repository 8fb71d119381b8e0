"""The compile worker process: `python -m explorer.compile.worker FD KEY`.

It loads jax once, then serves compile requests from its parent over the socket FD until the
parent closes it. A failing program is reported back and the worker goes on.
"""

from __future__ import annotations

import os
import sys
import traceback
from multiprocessing.connection import Connection


def _serve(conn: Connection) -> None:
    import cloudpickle
    import jax  # noqa: F401  (load jax before the first request, so "warm" means warm)

    from explorer.compile.backend import compile_request
    jax.devices()
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        try:
            if message["op"] == "ping":
                result = {"devices": len(jax.devices())}
            elif message["op"] == "crash":      # for tests of crash recovery
                os._exit(3)
            elif message["op"] == "sleep":      # for tests of the time limit
                import time
                time.sleep(message["seconds"])
                result = {}
            else:
                for path in message.get("sys_path", []):
                    if path not in sys.path:
                        sys.path.append(path)
                fn = cloudpickle.loads(message["fn"])
                result = compile_request(fn, message["args"], message["mesh"],
                                         message["partitioner"], message.get("tpu_topology"),
                                         message.get("measure", False))
            reply = {"ok": True, "result": result}
        except Exception as e:  # the program, not the worker, failed: report it and go on
            reply = {"ok": False, "error": _describe(e)}
        conn.send(reply)


def _describe(e: Exception) -> str:
    text = f"{type(e).__name__}: {e}".strip()
    if isinstance(e, TypeError | NameError | AttributeError | IndexError | KeyError):
        # Errors in the user's function: show where they happened.
        frames = traceback.extract_tb(e.__traceback__)
        user = [f for f in frames if "site-packages" not in f.filename
                and "/explorer/" not in f.filename]
        if user:
            f = user[-1]
            text += f" (at {f.filename}:{f.lineno})"
    return text


if __name__ == "__main__":
    _serve(Connection(int(sys.argv[1])))
