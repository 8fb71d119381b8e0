"""A documentation page read as a test reads it: its code blocks by language (the ```python
blocks concatenated are the script a reader would run), and its tables as rows of cells."""

from __future__ import annotations

import re
from pathlib import Path

_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def code_blocks(page: Path, language: str) -> list[str]:
    """The page's fenced blocks of `language`, in order, each as written."""
    return [body for lang, body in _BLOCK.findall(page.read_text()) if lang == language]


def script(page: Path) -> str:
    """The page's ```python blocks, one after the other: what a reader copying them runs."""
    return "\n".join(code_blocks(page, "python"))


def tables(page: Path) -> list[list[list[str]]]:
    """Every table of the page outside code blocks: its rows (the header's included, the
    separator's not) as lists of stripped cells."""
    text = _BLOCK.sub("", page.read_text())
    found: list[list[list[str]]] = []
    rows: list[list[str]] = []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(re.fullmatch(r":?-+:?", c) for c in cells):
                rows.append(cells)
        elif rows:
            found.append(rows)
            rows = []
    return found


def printed(output: str, separator: str = ": ") -> dict[str, str]:
    """Lines `label: value` of a run's output, by label (other lines are left out)."""
    found = {}
    for line in output.splitlines():
        label, sep, value = line.partition(separator)
        if sep and label and not label.startswith(" "):
            found[label.strip()] = value.strip()
    return found
