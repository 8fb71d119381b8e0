"""The size bounds every request is held to, and the safe display of user values in messages.

Nothing is allocated for an analysis, but sizes still have to fit what XLA computes with: a
buffer's byte size is an int64, and a shape whose bytes overflow it kills the compiler process
("overflow in static extent product") instead of raising. The bounds are far above any real
model (a 70B LLM's largest tensor, its logits [1024, 8192, 128256], is about 2**40 elements) and
far below int64, so that a program's intermediates (a few times its inputs) still fit.
"""

from __future__ import annotations

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
SHOWN = 200


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
