"""An environment of its own for a library that needs Python >= 3.12 (MaxText, EasyDeL), made
at the repository's root by the install step its documentation page gives (the page's ```bash
block, run as written, with the Python 3.12 found here for `python3.12`): the library's own
requirements resolved together with the explorer's, as a reader following the page gets them.
Kept between runs, and made afresh when the page's install step or the explorer's
pyproject.toml changes."""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from doc_pages import code_blocks


def python312() -> str | None:
    """A Python 3.12 or newer: EXPLORER_PYTHON312, on the PATH, or one pyenv installed."""
    candidates = [os.environ.get("EXPLORER_PYTHON312"), shutil.which("python3.13"),
                  shutil.which("python3.12"),
                  *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[2-9]*/bin/python")))]
    for python in filter(None, candidates):
        out = subprocess.run([python, "-c", "import sys; print(sys.version_info >= (3, 12))"],
                             capture_output=True, text=True)
        if out.stdout.strip() == "True":
            return python
    return None


def install_step(page: Path) -> str:
    """The page's install step: its one ```bash block."""
    [block] = code_blocks(page, "bash")
    return block


def page_env(library: str, page: Path, venv: Path, root: Path) -> str:
    """The interpreter of `venv`, the environment made first (or made afresh, where the page's
    install step or pyproject.toml changed) by running the page's install step at `root`; the
    test is skipped where no Python 3.12 or newer is found."""
    python = python312()
    if python is None:
        pytest.skip(f"{library} needs Python >= 3.12; none found (set EXPLORER_PYTHON312)")
    step = install_step(page)
    assert step.startswith(f"python3.12 -m venv {venv.name}\n"), step
    venv_python = venv / "bin" / "python"
    stamp = venv / "made-by.txt"
    wanted = step + (root / "pyproject.toml").read_text()
    if not venv_python.exists() or not stamp.exists() or stamp.read_text() != wanted:
        shutil.rmtree(venv, ignore_errors=True)
        script = shlex.quote(python) + step.removeprefix("python3.12")
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=root,
                              capture_output=True, text=True, timeout=1800)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        stamp.write_text(wanted)
    return str(venv_python)


def run_in_env(python: str, args: list[str], cwd: Path) -> str:
    """The stdout of `python args` run in `cwd`, which must succeed; with the environment's own
    device count and module path, not this process's."""
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "PYTHONPATH")}
    done = subprocess.run([python, *args], capture_output=True, text=True, timeout=1200,
                          cwd=cwd, env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


def example_json(python: str, example: Path, cwd: Path) -> dict:
    """What an example printed as JSON (examples/maxtext_model.py, examples/easydel_model.py),
    after the lines the library prints of its own: from the line that is "{"."""
    out = run_in_env(python, [str(example)], cwd)
    return json.loads(out[re.search(r"^\{$", out, re.M).start():])


def table_cells(result: dict, inputs: int) -> dict[str, str]:
    """An example's numbers for one compile ({"collectives": {kind: [count, bytes]}, "memory":
    [arguments, outputs, temporaries, aliased]}) as the pages' tables write them."""
    cells = {kind: f"{n}, {size:,} B" for kind, (n, size) in result["collectives"].items()}
    parts = ("arguments", "outputs", "temporaries", "aliased")
    cells |= {part: f"{size:,} B" for part, size in zip(parts, result["memory"], strict=True)}
    cells["inputs"] = str(inputs)
    return cells
