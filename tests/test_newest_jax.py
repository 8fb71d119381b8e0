"""The newest jax the explorer is tested on (the suite itself runs on the oldest, 0.10.2, which
Python 3.11 gets): in an environment pip makes from the explorer's own dependencies with that
jax asked for (tests/_support/newest_jax_env.py, Python >= 3.12), the compatibility set runs:
the private pieces and the module lowering against plain jax's, the differential tests of
JAX's docs' programs and of users' programs against plain jax's compile (instructions, every
input's layout, memory) on CPU devices, deviceless GPUs and deviceless TPU slices, and the HLO
readers. Each file there compares with the plain jax of that environment, so nothing here
repeats what the oldest jax's results are."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from explorer._src.compile.jax_private import NEWEST_TESTED_JAX

sys.path.insert(0, str(Path(__file__).resolve().parent / "_support"))
from newest_jax_env import newest_jax_python  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

COMPATIBILITY_SET = (
    # the one module of private jax, and the module compiled as jax.jit would compile it
    "tests/compile/test_jax_private.py",
    "tests/compile/test_module_lowering.py",
    # programs as JAX's docs write them, and users' functions, against plain jax's compile
    "tests/api/test_jax_docs_programs.py",
    "tests/api/test_traced_where_called.py",
    "tests/api/test_out_specs.py",
    "tests/compile/test_donation.py",
    "tests/report/test_origins_differential.py",
    "tests/report/test_dtype.py",
    # deviceless GPUs (XLA's GPU compiler) and TPU slices (libtpu) against plain jax's
    "tests/compile/test_gpu_compile.py",
    "tests/compile/test_multislice.py",
    "tests/compile/test_tpu_host_bounds.py",
    # the readers of the compiler's texts
    "tests/hlo",
)


@pytest.mark.slow
def test_the_compatibility_set_passes_on_the_newest_tested_jax():
    python = newest_jax_python()
    version = subprocess.run([python, "-c", "import jax; print(jax.__version__)"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert version == NEWEST_TESTED_JAX
    # The environment's own: not this process's device count or module path.
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "PYTHONPATH")}
    # The TPU tests load libtpu in their own process for plain jax's compile, while this
    # suite's other worker may hold it: libtpu lets several processes load it only when asked
    # (as the compile workers are, explorer/_src/compile/pool.py).
    env["ALLOW_MULTIPLE_LIBTPU_LOAD"] = "1"
    run = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                          "--dist", "loadfile", *COMPATIBILITY_SET],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=2400)
    tail = (run.stdout + run.stderr)[-6000:]
    assert run.returncode == 0, tail
    assert " passed" in tail and "no tests ran" not in tail, tail


@pytest.mark.slow
def test_installing_the_explorer_beside_todays_flax_changes_nothing_else():
    """The environment holds Flax of today (>= 0.12.9 needs jax >= 0.11.1) with the newest
    tested jax: pip, asked to install the explorer with its extras there again, resolves and
    would install the explorer alone, downgrading nothing."""
    python = newest_jax_python()
    flax = subprocess.run([python, "-c", "import flax, jax; print(flax.__version__, "
                           "jax.__version__)"], capture_output=True, text=True, check=True)
    flax_version, jax_version = flax.stdout.split()
    assert tuple(map(int, flax_version.split(".")[:3])) >= (0, 12, 9)
    assert jax_version == NEWEST_TESTED_JAX
    run = subprocess.run([python, "-m", "pip", "install", "--dry-run", "-e",
                          f"{ROOT}[test,tpu,gpu]"], capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    (would,) = [line for line in run.stdout.splitlines() if line.startswith("Would install")]
    assert would.split()[2:] == ["sharding-explorer-0.1.0"], would
