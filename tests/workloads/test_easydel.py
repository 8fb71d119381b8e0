"""EasyDeL's own model: its Llama config and model, 5-axis mesh, partition rules, AdamW state and
its Trainer's training step handed to the explorer exactly as EasyDeL holds them, against plain
jax's compile of the same program (examples/easydel_model.py).

EasyDeL needs Python >= 3.12, so it runs in an environment of its own, made here from the pinned
list tests/_support/easydel-requirements.txt (installed without dependency resolution: the list
is what EasyDeL imports to build a model and its training step, jax at the explorer's version)
into `.venv-easydel/` at the repository's root, kept between runs. Skipped where no Python 3.12
or newer is found.
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

pytestmark = [pytest.mark.slow, pytest.mark.easydel]

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = ROOT / "tests" / "_support" / "easydel-requirements.txt"
VENV = ROOT / ".venv-easydel"


@pytest.fixture(scope="module")
def easydel_python() -> str:
    """The environment's interpreter, the environment made (or brought up to the pinned list)
    first."""
    return env_python("EasyDeL", VENV, REQUIREMENTS, ROOT)


def test_easydels_model_compiles_as_plain_jax_compiles_it(easydel_python, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "PYTHONPATH")}
    done = subprocess.run([easydel_python, str(ROOT / "examples" / "easydel_model.py")],
                          capture_output=True, text=True, timeout=1200, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout[done.stdout.index("{"):])
    plain, free, explored = out["plain"], out["plain_outputs_free"], out["explorer"]
    # With the Trainer's out_shardings given as out_specs, the explorer compiles the Trainer's
    # own program: the same collectives, by kind, count and bytes, and the same memory, to the
    # byte (arguments, outputs, temporaries, aliased).
    pinned = out["explorer_pinned"]
    assert pinned["collectives"] == plain["collectives"]
    assert pinned["memory"] == plain["memory"]
    assert not [n for n in pinned["notes"] if "no output has their shape" in n]
    # Without them, the step with its outputs' layout left to the compiler, as plain jax
    # compiles it with no out_shardings.
    assert explored["collectives"] == free["collectives"]
    assert explored["memory"] == free["memory"]
    assert plain["collectives"]["all-reduce"][0] > 0 and plain["collectives"]["all-gather"][0] > 0
    # The Trainer's out_shardings add only all-gathers: the 15 state leaves (EasyDeL's norm
    # kernels and their AdamW moments) the compiler would leave sharded are gathered back to
    # their replicated input layout, and then alias their inputs; left free, the explorer's
    # notes name those 15 as donated inputs no output could reuse.
    assert plain["collectives"]["all-reduce"] == explored["collectives"]["all-reduce"]
    assert plain["collectives"]["all-gather"][0] - explored["collectives"]["all-gather"][0] == 15
    assert plain["memory"][0] == explored["memory"][0]
    assert plain["memory"][2] == explored["memory"][2]
    [note] = [n for n in out["notes"] if "no output has their shape" in n]
    assert "input_layernorm" in note and "and 12 more" in note
    # Every input laid out as plain jax laid it out; jax dropped none of them.
    assert out["layouts_differ"] == []
    assert explored["inputs"] == plain["inputs"]
    assert out["backend"] == "cpu"
