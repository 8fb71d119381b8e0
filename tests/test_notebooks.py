"""The workshop's tutorials (notebooks/00_*.ipynb ... 10_*.ipynb) run top to bottom, and their
exercise checks accept the answer key (docs/workshop.md) and nothing less.

The slow tests execute every notebook with nbclient in a fresh kernel, twice: as shipped (the
exercise cells hold `...`; every check must say the answer is missing or wrong, and no cell may
raise) and with the answer key put into the exercise cells (every check must say "Right"). The
fast tests read the notebooks without running them, and try the checks on wrong answers.
"""

import importlib.util
import os
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "notebooks"
NOTEBOOKS = sorted(p for p in FOLDER.glob("[0-9][0-9]_*.ipynb"))
RIGHT, WRONG, MISSING = "✓ Right", "✗ Not yet", "… No answer yet"

# The answer key, by exercise id (the `exercise` key of each exercise cell's metadata); the same
# answers as docs/workshop.md, written as the code a learner would type.
ANSWERS = {
    "00.bytes": "allreduce_bytes = 256 // 2 * 1024 * 4",
    "00.shard": "w1_shard = (1024, 1024)",
    "01.shard": "x_shard = (64, 512)",
    "01.block": "device6_block = ((128, 192), (512, 1024))",
    "01.replicas": "replicas = 4",
    "02.V": "V = (1024 * 4096 + 4096 * 1024) * 4",
    "02.ring": "sent = 2 * (8 - 1) / 8 * V",
    "02.time": "seconds = sent / 450e9",
    "02.limit": "factor = 2",
    "03.case1": 'case1 = "none"',
    "03.case2": 'case2 = "all-gather"',
    "03.case3": 'case3 = "all-reduce"',
    "03.case4": 'case4 = "all-gather"',
    "03.megatron": 'w1_spec = "None,model"\nw2_spec = "model,None"',
    "04.zero1_opt": "zero1_optimizer = 4 * psi // 8",
    "04.zero2_grads": "zero2_grads = psi // 8",
    "04.zero3_params": "zero3_params = 2 * psi // 8",
    "05.rules": 'megatron_rules = "batch=data,heads=model,mlp=model"',
    "05.reshard": "switch_bytes = 8 * 16 * 256 * 4 // 8",
    "06.bubble": "bubble = (4 - 1) / (8 + 4 - 1)",
    "06.permutes": "permutes = 2 * (8 + 4 - 2)",
    "06.inflight": "in_flight = [4, 3, 2, 1]",
    "06.cuts": 'cuts = "2,4,6"',
    "07.capacity": "import math\ncapacity = math.ceil(1.25 * 2 * 64 / 8)",
    "07.bytes": "a2a_bytes = 8 * 8 * 20 * 128 * 4 // 8",
    "08.line1": 'culprit = "d = a + b"',
    "08.fix1": 'spec_a = "None,(x,y),None"\nspec_b = "None,(x,y),None"',
    "08.line2": 'culprit2 = "keys = jax.random.split(rng, batch_size)"',
    "08.fix2": ("def shuffle_rows_fixed(rng, inputs):\n"
                "    keys = jax.random.split(rng, inputs.shape[0])\n"
                "    return jax.vmap(lambda k, x: jax.random.permutation(k, x))(keys, inputs)"),
    "09.bytes": "tpu_bytes = 1024 * 4096 // 64 * 2\ncpu_bytes = 1024 * 4096 // 64 * 4",
    "10.lean": 'w1_spec = "None,(data,model)"\nw2_spec = "(data,model),None"',
    "10.mesh": 'best_mesh = "data=8,model=1"\nbest_bytes = 2 * 64 * 256 * 4',
}


def read(path: Path):
    return nbformat.read(path, as_version=4)


def exercise_cells(nb):
    return [c for c in nb.cells if c.get("metadata", {}).get("exercise")]


def test_the_workshop_has_its_eleven_notebooks():
    assert [p.stem[:2] for p in NOTEBOOKS] == [f"{i:02d}" for i in range(11)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_shipped_clean(path):
    nb = read(path)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    # Outputs cleared: the notebook is small and a learner's first run is theirs.
    assert all(not c.outputs and c.execution_count is None for c in code)
    # The first code cell gives jax its 8 fake devices before anything imports jax.
    first = code[0].source
    assert "xla_force_host_platform_device_count=8" in first
    assert first.index("XLA_FLAGS") < first.index("import explorer")
    if "import jax" in first:
        assert first.index("XLA_FLAGS") < first.index("import jax")
    # Every exercise has an answer in the key, and is followed by a cell that checks it.
    for cell in exercise_cells(nb):
        assert cell.metadata["exercise"] in ANSWERS
        after = nb.cells[nb.cells.index(cell) + 1]
        assert after.cell_type == "code" and "check_" in after.source


def test_every_answer_belongs_to_an_exercise():
    ids = {c.metadata["exercise"] for p in NOTEBOOKS for c in exercise_cells(read(p))}
    assert ids == set(ANSWERS)


def run(path: Path, answers: dict[str, str] | None, monkeypatch) -> list[str]:
    """Execute the notebook in a fresh kernel (in its own folder, as JupyterLab does); return
    the text it printed. A cell that raises fails the test (CellExecutionError)."""
    from nbclient import NotebookClient

    nb = read(path)
    for cell in exercise_cells(nb):
        if answers is not None:
            cell.source = answers[cell.metadata["exercise"]]
    # The kernel inherits this environment: this checkout's explorer, and (conftest) 8 fake
    # devices and no persistent report cache, so that every request really compiles.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(FOLDER)}}).execute()
    out = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            if o.get("output_type") == "stream":
                out.append(o["text"])
    return out


def verdicts(texts: list[str]) -> list[str]:
    return [line for t in texts for line in t.splitlines()
            if line.startswith((RIGHT, WRONG, MISSING))]


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_as_shipped(path, monkeypatch):
    texts = run(path, None, monkeypatch)
    found = verdicts(texts)
    assert len(found) >= len(exercise_cells(read(path)))
    assert not [v for v in found if v.startswith(RIGHT)], found


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_accepts_the_answer_key(path, monkeypatch):
    texts = run(path, ANSWERS, monkeypatch)
    found = verdicts(texts)
    assert found and all(v.startswith(RIGHT) for v in found), found
    assert len(found) >= len(exercise_cells(read(path)))


# ------------------------------------------------------------------ the checks themselves

@pytest.fixture(scope="module")
def checks():
    spec = importlib.util.spec_from_file_location("workshop_checks",
                                                  FOLDER / "workshop_checks.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["workshop_checks"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("workshop_checks", None)


def test_checks_say_wrong_and_hint(checks, capsys):
    # Hand-worked wrong answers: a forgotten split, the all-reduce's 2 for the ring's 2(N-1)/N,
    # an unsplit spec, a case-2 answer for case 3.
    assert checks.check_quickstart_bytes(256 * 1024 * 4) is False
    assert checks.check_ring_bytes(2 * 33554432, n=8) is False
    assert checks.check_megatron_specs("None,None", "None,None") is False
    assert checks.check_matmul_case("all-gather", "None,x", "x,None") is False
    assert checks.check_zero_bytes(4 * 328448, "optimizer", "zero1") is False
    out = capsys.readouterr().out
    assert out.count(WRONG) == 5 and out.count("Hint:") == 5


def test_checks_refuse_a_missing_or_malformed_answer(checks, capsys):
    assert checks.check_bubble(...) is False
    assert checks.check_capacity("twenty") is False
    assert checks.check_in_flight("4,3,2,1") is False
    assert checks.check_shuffle_fix(lambda rng, inputs: inputs) is False   # not shuffled

    def shuffle_rows_fixed(rng, inputs):       # as notebook 08 ships it
        ...

    assert checks.check_shuffle_fix(shuffle_rows_fixed) is False
    out = capsys.readouterr().out
    assert out.count(MISSING) == 2 and out.count(WRONG) == 3


def test_checks_compute_with_plain_jax(checks):
    """The matmul cases as the scaling book states them, from XLA's own program."""
    assert checks.matmul_collectives("x,None", "None,y") == []
    assert checks.matmul_collectives("None,x", "x,None") == ["all-reduce"]
    # flax's rule order: the first rule that reaches a dimension with free axes wins.
    assert checks.logical_to_mesh(("embed", "mlp"), [("mlp", "model"), ("embed", "model")]) \
        == (None, "model")


def test_search_mesh_check_counts_bytes_by_hand(checks, capsys):
    """mlp_train (batch 65536, d_model 64, d_ff 256) on data x model, the batch over data and
    Megatron over model: a model axis all-reduces the [65536/data, 64] float32 output block, a
    data axis the gradients of the 2*64*256/model weight elements each device holds."""
    assert checks.mlp_train_collective_bytes(8, 1) == 2 * 64 * 256 * 4               # 131072
    assert checks.mlp_train_collective_bytes(4, 2) == 16384 * 64 * 4 + 64 * 256 * 4  # 4259840
    assert checks.mlp_train_collective_bytes(1, 8) == 65536 * 64 * 4                 # 16 MiB
    assert checks.check_search_mesh("data=8,model=1", 131072) is True
    assert checks.check_search_mesh((8, 1), 131072) is True
    assert checks.check_search_mesh("data=4,model=2", 131072) is False    # Megatron too
    assert checks.check_search_mesh("data=8", 2 * 131072) is False        # the ring's 2V
    out = capsys.readouterr().out
    assert out.count(RIGHT) == 2 and out.count(WRONG) == 2 and out.count("Hint:") == 2


def test_search_checks_refuse_a_missing_or_malformed_answer(checks, capsys):
    assert checks.check_search_mesh(..., 131072) is False
    assert checks.check_search_mesh("eight by one", 131072) is False
    assert checks.check_search_mesh("data=3,model=3", 131072) is False    # not 8 devices
    assert checks.check_search_mesh("data=0", 131072) is False
    assert checks.check_lean_layout(..., "model,None", None, None, ()) is False
    assert checks.check_lean_layout(("None", "model"), "model,None", None, None, ()) is False
    # No search result to compare with: a hint, not an AttributeError.
    assert checks.check_lean_layout("None,model", "model,None", None, None, ()) is False
    out = capsys.readouterr().out
    assert out.count(MISSING) == 2 and out.count(WRONG) == 5
