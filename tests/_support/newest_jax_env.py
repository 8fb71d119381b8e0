"""The environment of the newest jax the explorer is tested on: made at the repository's root by
pip from the explorer's own dependencies (its test, tpu and gpu extras) with that jax asked
for, as a user's `pip install` would make it, and kept between runs (remade only when
pyproject.toml or the version changes). jax >= 0.11 needs Python >= 3.12: the test is skipped
where none is found."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from py312_env import python312

from explorer._src.compile.jax_private import NEWEST_TESTED_JAX

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv-newest-jax"
# The extras the compatibility set needs: pytest and the test libraries, libtpu and XLA's GPU
# compiler of this jax's own release (jax's extras pin them).
EXTRAS = "test,tpu,gpu"


def install_command(python: str) -> list[str]:
    """The pip command that makes the environment: the explorer with its dependencies, and
    the newest tested jax with its tpu and cuda12 extras."""
    return [python, "-m", "pip", "install", "-q", "-e", f"{ROOT}[{EXTRAS}]",
            f"jax[tpu,cuda12]=={NEWEST_TESTED_JAX}"]


def newest_jax_python() -> str:
    """The interpreter of the environment, made (or brought up to date) first."""
    python = python312()
    if python is None:
        pytest.skip(f"jax {NEWEST_TESTED_JAX} needs Python >= 3.12; none found "
                    "(set EXPLORER_PYTHON312)")
    venv_python = VENV / "bin" / "python"
    stamp = VENV / "made-from.txt"
    wanted = f"jax {NEWEST_TESTED_JAX} [{EXTRAS}]\n" + (ROOT / "pyproject.toml").read_text()
    if not stamp.exists() or stamp.read_text() != wanted:
        if not venv_python.exists():
            subprocess.run([python, "-m", "venv", str(VENV)], check=True)
        done = subprocess.run(install_command(str(venv_python)), capture_output=True,
                              text=True, timeout=2400)
        assert done.returncode == 0, done.stderr[-3000:]
        stamp.write_text(wanted)
    return str(venv_python)
