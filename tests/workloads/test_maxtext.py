"""MaxText's own model, first try: its config, model, 12-axis mesh, logical-axis rules and AdamW
train step handed to the explorer exactly as MaxText holds them, against plain jax's compile of
the same program (examples/maxtext_model.py); and docs/from-maxtext.md run as written, its table
held to what that run printed and to plain jax's compile.

MaxText needs Python >= 3.12, so it runs in an environment of its own, `.venv-maxtext/` at the
repository's root, made by the page's own install step (MaxText's `tpu` extra resolved with the
explorer's requirements; tests/_support/py312_env.py) and kept between runs. Skipped where no
Python 3.12 or newer is found.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_support"))
from doc_pages import printed, script, tables  # noqa: E402
from py312_env import example_json, page_env, run_in_env, table_cells  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.maxtext]

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "from-maxtext.md"
VENV = ROOT / ".venv-maxtext"



@pytest.fixture(scope="module")
def maxtext_python() -> str:
    """The environment's interpreter, the environment made by the page's install step first."""
    return page_env("MaxText", PAGE, VENV, ROOT)


@pytest.fixture(scope="module")
def compared(maxtext_python, tmp_path_factory) -> dict:
    """examples/maxtext_model.py's output: plain jax's compile and the explorer's Report."""
    return example_json(maxtext_python, ROOT / "examples" / "maxtext_model.py",
                        tmp_path_factory.mktemp("example"))


def test_maxtexts_model_compiles_as_plain_jax_compiles_it(compared):
    out = compared
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


def test_the_page_runs_as_written_and_its_table_is_that_runs(maxtext_python, compared,
                                                            tmp_path):
    (tmp_path / "page.py").write_text(script(PAGE))
    output = run_in_env(maxtext_python, ["page.py"], tmp_path)
    shown = printed(output)
    [table] = tables(PAGE)
    header, *rows = table
    assert header[1:] == ["plain jax", "explorer"]
    # Every row of the table: the explorer's column is what the page's own code printed, plain
    # jax's is plain jax's compile of the same step (the example's).
    plain = table_cells(compared["plain"], compared["plain"]["inputs"])
    assert [row[0] for row in rows] == list(plain)
    for label, plain_cell, explorer_cell in rows:
        assert explorer_cell == shown[label], label
        assert plain_cell == plain[label], label
    # The page's run is the example's program: the same numbers, and the note it names.
    explored = compared["explorer"]
    assert table_cells(explored, explored["inputs"]) == {row[0]: row[2] for row in rows}
    assert "the program never reads the input targets_position" in output
