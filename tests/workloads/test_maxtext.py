"""MaxText's own model, first try: its config, model, 12-axis mesh, logical-axis rules and AdamW
train step handed to the explorer exactly as MaxText holds them, against plain jax's compile of
the same program (examples/maxtext_model.py).

MaxText needs Python >= 3.12, so it runs in an environment of its own, made here from the pinned
list tests/_support/maxtext-requirements.txt (MaxText's wheel declares no dependencies: the list
is what it imports, jax at the explorer's version) into `.venv-maxtext/` at the repository's
root, kept between runs. Skipped where no Python 3.12 or newer is found.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_support"))
from py312_env import env_python  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.maxtext]

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = ROOT / "tests" / "_support" / "maxtext-requirements.txt"
VENV = ROOT / ".venv-maxtext"


@pytest.fixture(scope="module")
def maxtext_python() -> str:
    """The environment's interpreter, the environment made (or brought up to the pinned list)
    first."""
    return env_python("MaxText", VENV, REQUIREMENTS, ROOT)


def test_maxtexts_model_compiles_as_plain_jax_compiles_it(maxtext_python, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "PYTHONPATH")}
    done = subprocess.run([maxtext_python, str(ROOT / "examples" / "maxtext_model.py")],
                          capture_output=True, text=True, timeout=1200, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout[done.stdout.index("{"):])
    plain, explored = out["plain"], out["explorer"]
    # Every collective by kind, count and bytes; the MoE's all-to-alls among them, which only
    # MaxText's logical-axis rules (its context) put there.
    assert explored["collectives"] == plain["collectives"]
    assert plain["collectives"]["all-to-all"][0] >= 2
    # Memory: outputs, temporaries and aliased bytes equal; the arguments differ by the one
    # input the step never reads, which jax drops and the explorer keeps and names.
    assert explored["memory"][1:] == plain["memory"][1:]
    assert explored["inputs"] == plain["inputs"] + 1
    [note] = [n for n in out["notes"] if "never reads" in n]
    assert "targets_position" in note
    # targets_position: int32[8, 128], one device's shard of it (batch over fsdp=2 x expert=4).
    assert explored["memory"][0] - plain["memory"][0] == 8 * 128 * 4 // 8
    # Every input jax kept is laid out as plain jax laid it out.
    assert out["layouts_differ"] == []
    assert out["backend"] == "cpu"
