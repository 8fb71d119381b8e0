"""The tokenizer shared by the spec and the rules parsers: user text is read, never evaluated."""

from __future__ import annotations

import re

_WORDS = r"\s*(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*)|'(?P<sq>[^']*)'|\"(?P<dq>[^\"]*)\""
_TOKEN = re.compile(_WORDS + r"|(?P<punct>[(),=:]))")
# Rules also read `[` and `]`: a list of pairs as Python or MaxText's YAML writes it.
_BRACKETED = re.compile(_WORDS + r"|(?P<punct>[(),=:\[\]]))")


def tokenize(text: str, on_error, brackets: bool = False) -> list[tuple[str, str]]:
    """(kind, text) pairs: "name" (an identifier), "quoted" (a quoted string, always a name, even
    'None') or "punct" (one of `( ) , = :`, and `[ ]` with `brackets`). `on_error(rest)` raises
    for unreadable text."""
    pattern = _BRACKETED if brackets else _TOKEN
    pos, out, text = 0, [], text.rstrip()
    while pos < len(text):
        m = pattern.match(text, pos)
        if not m:
            on_error(text[pos:].strip())
        pos = m.end()
        if m["punct"]:
            out.append(("punct", m["punct"]))
        elif m["name"] is not None:
            out.append(("name", m["name"]))
        else:
            out.append(("quoted", m["sq"] if m["sq"] is not None else m["dq"]))
    return out
