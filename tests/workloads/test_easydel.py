"""EasyDeL's own model: its Llama config and model, 5-axis mesh, partition rules, AdamW state and
its Trainer's training step handed to the explorer exactly as EasyDeL holds them, against plain
jax's compile of the same program (examples/easydel_model.py); and docs/from-easydel.md run as
written, its table held to what that run printed and to plain jax's compile.

EasyDeL needs Python >= 3.12, so it runs in an environment of its own, `.venv-easydel/` at the
repository's root, made by the page's own install step (EasyDeL's requirements resolved with
the explorer's, jax overridden to the explorer's floor; tests/_support/py312_env.py) and kept
between runs. Skipped where no Python 3.12 or newer is found.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_support"))
from doc_pages import printed, script, tables  # noqa: E402
from py312_env import example_json, page_env, run_in_env, table_cells  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.easydel]

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "from-easydel.md"
VENV = ROOT / ".venv-easydel"



@pytest.fixture(scope="module")
def easydel_python() -> str:
    """The environment's interpreter, the environment made by the page's install step first."""
    return page_env("EasyDeL", PAGE, VENV, ROOT)


@pytest.fixture(scope="module")
def compared(easydel_python, tmp_path_factory) -> dict:
    """examples/easydel_model.py's output: plain jax's compiles and the explorer's Reports."""
    return example_json(easydel_python, ROOT / "examples" / "easydel_model.py",
                        tmp_path_factory.mktemp("example"))


def test_easydels_model_compiles_as_plain_jax_compiles_it(compared):
    out = compared
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


def test_the_page_runs_as_written_and_its_table_is_that_runs(easydel_python, compared,
                                                            tmp_path):
    # Run as written: no `with mesh:` around the explorer's calls, EasyDeL's mesh given as
    # mesh= is in force while the step is traced (EasyDeL's helpers found no mesh before).
    (tmp_path / "page.py").write_text(script(PAGE))
    output = run_in_env(easydel_python, ["page.py"], tmp_path)
    shown = {label: value.split(" | ") for label, value in printed(output).items()}
    [table] = tables(PAGE)
    header, *rows = table
    assert len(header) == 5 and header[1].startswith("plain jax") and "explorer" in header[2]
    # Every row: the explorer's two columns are what the page's code printed (pinned, free);
    # plain jax's are plain jax's compiles of the same step (the example's), with and without
    # the Trainer's out_shardings.
    inputs = compared["plain"]["inputs"]
    plain = table_cells(compared["plain"], inputs)
    plain_free = table_cells(compared["plain_outputs_free"], inputs)
    assert [row[0] for row in rows] == list(plain)
    for label, plain_cell, pinned_cell, free_plain_cell, free_cell in rows:
        assert [pinned_cell, free_cell] == shown[label], label
        assert plain_cell == plain[label], label
        assert free_plain_cell == plain_free[label], label
    assert "no output has their shape" in output
