"""The size bounds every request is held to, and the safe display of user values in messages.

Nothing is allocated for an analysis, but sizes still have to fit what XLA computes with: a
buffer's byte size is an int64, and a shape whose bytes overflow it kills the compiler process
("overflow in static extent product") instead of raising. The bounds are far above any real
model (a 70B LLM's largest tensor, its logits [1024, 8192, 128256], is about 2**40 elements) and
far below int64, so that a program's intermediates (a few times its inputs) still fit.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

from explorer._src.errors import InputError, MeshError

MAX_RANK = 16                 # dimensions of one tensor; real models use at most 5 or 6
MAX_ELEMENTS = 2 ** 48        # elements of one tensor: 1 PiB of float32, 2**13 under int64 bytes
MAX_TOTAL_ELEMENTS = 2 ** 50  # elements of all inputs together (a 1T-param model + Adam: 2**42)
MAX_TENSORS = 2 ** 16         # input tensors of one request (a 70B train step with Adam: 1931)
MAX_PYTREE_DEPTH = 64         # nesting of the inputs' pytree (a flax model's state: about 10)
MAX_MESH_AXES = 16            # real meshes have at most 5 or 6 axes
MAX_MESH_DEVICES = 2 ** 20    # above any machine: TPU v5p pods have 8960 chips, GPU clusters 10**5
MAX_TEXT = 4096               # characters of a text param (e.g. pipeline cut points)
# Characters of a user's text (a rules or spec text) an error message quotes: enough to show a
# real one whole, so that a 100,000-character value gives a message of a few hundred characters.
TEXT_SHOWN = 200


def power_text(n: int) -> str:
    """A bound as people read it: `2**48` for a power of two over 1024, else the number."""
    if n > 1024 and n & (n - 1) == 0:
        return f"2**{n.bit_length() - 1}"
    return str(n)


def show(value, limit: int = 80) -> str:
    """repr(value) for an error message, cut to `limit` characters.

    Never raises: Python refuses to print an int of more than 4300 digits, and a user's object
    may have a broken __repr__; a message about bad input must still come out."""
    try:
        text = repr(value)
    except Exception:  # a user's __repr__ may fail in any way
        if isinstance(value, int):
            text = f"<an int of {value.bit_length()} bits>"
        elif type(value) in (tuple, list):          # show the items around a huge int
            items = ", ".join(show(v, limit) for v in value[:limit // 2])
            text = f"({items})" if type(value) is tuple else f"[{items}]"
        else:
            text = f"<a {type(value).__name__}>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


# What a served app lets a page or a link ask for (`sharding-explorer app` and Binder set these
# in its kernels' environment; a Python user or the CLI, with none set, is held to the bounds
# above only). A link may otherwise ask for a compile limit of a day and the largest program the
# bounds allow: a 256-layer model unrolled was still compiling after 400 s, its worker at 2 GB.
SERVED_LIMITS_ENV = {"timeout_s": "EXPLORER_MAX_COMPILE_S", "tensors": "EXPLORER_MAX_TENSORS",
                     "layers": "EXPLORER_MAX_LAYERS", "devices": "EXPLORER_MAX_DEVICES"}


@dataclass(frozen=True)
class ServedLimits:
    """The most a served page or link may ask for: a compile's time limit (seconds), the
    program's input tensors, a workload's layers, the mesh's devices. `SERVED_DEFAULTS` is what
    `sharding-explorer app` sets where its operator set nothing."""

    timeout_s: float
    tensors: int
    layers: int
    devices: int

    def environment(self) -> dict[str, str]:
        """These limits as the environment variables `served_limits` reads."""
        return {env: f"{getattr(self, field):g}" for field, env in SERVED_LIMITS_ENV.items()}


# A compile of the largest workload on 2 cores and 2 GB: a TPU target's 300 s is what the app's
# time-limit box offers for GPU targets; 1024 tensors is a 40-layer model unrolled; 2048 devices
# is the largest mesh the tutorials explore.
SERVED_DEFAULTS = ServedLimits(timeout_s=300.0, tensors=1024, layers=64, devices=2048)


def served_limits(environ: Mapping[str, str] | None = None) -> ServedLimits | None:
    """The limits the server's environment sets (SERVED_LIMITS_ENV), each one not set taken
    from SERVED_DEFAULTS; None where none is set (not served: no limit beyond the bounds). A
    value that is not a positive number is an InputError naming the variable."""
    environ = os.environ if environ is None else environ
    if not any(env in environ for env in SERVED_LIMITS_ENV.values()):
        return None
    values = {}
    for field, env in SERVED_LIMITS_ENV.items():
        default = getattr(SERVED_DEFAULTS, field)
        text = environ.get(env, "").strip()
        try:
            value = float(text) if text else float(default)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise InputError(f"{env}={show(text)} is not a positive number; unset it for "
                             f"{default:g}")
        values[field] = value if field == "timeout_s" else int(value)
    return ServedLimits(**values)


def served_timeout(seconds: float | None, default: float) -> float:
    """The time limit a served compile runs under: `seconds` (None: `default`), lowered to the
    server's most. Unchanged where the app is not served."""
    limits = served_limits()
    chosen = default if seconds is None else seconds
    return chosen if limits is None else min(chosen, limits.timeout_s)


def check_served(where: str, *, tensors: int | None = None, layers: int | None = None,
                 devices: int | None = None, timeout_s: float | None = None) -> None:
    """An InputError naming the first of these sizes over the served limits, the limit and
    who sets it; nothing where the app is not served."""
    limits = served_limits()
    if limits is None:
        return
    for field, value, what in (("tensors", tensors, "input tensors"),
                               ("layers", layers, "layers"),
                               ("devices", devices, "mesh devices"),
                               ("timeout_s", timeout_s, "s of compile time")):
        most = getattr(limits, field)
        if value is not None and value > most:
            error = MeshError if field == "devices" else InputError   # shown at the mesh
            raise error(f"{where} asks for {value:g} {what}; this server allows at most "
                        f"{most:g} (its operator sets {SERVED_LIMITS_ENV[field]})")
