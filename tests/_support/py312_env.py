"""An environment of its own for a library that needs Python >= 3.12 (MaxText, EasyDeL): made
at the repository's root from a pinned list, installed without dependency resolution (the list
is what the library imports, jax at the explorer's version), the explorer installed into it,
and kept between runs (remade only when the list changes)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

import pytest


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


def env_python(library: str, venv: Path, requirements: Path, root: Path) -> str:
    """The interpreter of `venv`, the environment made (or brought up to `requirements`)
    first; the test is skipped where no Python 3.12 or newer is found."""
    python = python312()
    if python is None:
        pytest.skip(f"{library} needs Python >= 3.12; none found (set EXPLORER_PYTHON312)")
    venv_python = venv / "bin" / "python"
    stamp = venv / "requirements.txt"
    if not stamp.exists() or stamp.read_text() != requirements.read_text():
        if not venv_python.exists():
            subprocess.run([python, "-m", "venv", str(venv)], check=True)
        pip = [str(venv_python), "-m", "pip", "install", "-q", "--no-deps"]
        for args in (["-r", str(requirements)], ["-e", str(root)]):
            done = subprocess.run(pip + args, capture_output=True, text=True, timeout=1800)
            assert done.returncode == 0, done.stderr[-3000:]
        stamp.write_text(requirements.read_text())
    return str(venv_python)
