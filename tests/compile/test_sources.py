"""The user's own file and line reach the Report: a function traced where it is called names
its file, a script or a notebook cell ("In [3]", explorer._src.compile.sources). (A program the
tests
run inside a worker keeps its file names too: test_source_pickle.py.)"""

import inspect
import os
import subprocess
import sys
import textwrap

import jax.numpy as jnp
import nbformat
import pytest
from nbclient import NotebookClient

from explorer import TensorSpec, WorkerPool, analyze

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def pool():
    p = WorkerPool(timeout=60)
    yield p
    p.close()


def _line_of(fn, text: str) -> int:
    """The file line of the first line of `fn`'s source that contains `text`."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


@pytest.mark.slow
def test_source_is_this_file_and_the_line_of_the_matmul(pool):
    def step(x, w):
        h = jnp.tanh(x)
        return h @ w       # contracts the dimension split over d: an all-reduce over d

    x = TensorSpec("x", (8, 16), spec="None,d")
    w = TensorSpec("w", (16, 4), spec="d,None")
    r = analyze(step, x, w, mesh="d=4", pool=pool, use_cache=False)
    [c] = r.collectives
    assert (c.kind, c.axes) == ("all-reduce", ("d",))
    assert c.source == f"{os.path.relpath(__file__)}:{_line_of(step, 'h @ w')}"


@pytest.mark.slow
def test_a_script_s_function_names_the_script(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""\
        import explorer
        from explorer import TensorSpec


        def layer(x, w):
            return x @ w


        def model(x, w):
            return layer(x, w) + 1

        x = TensorSpec("x", (8, 16), spec="None,d")
        w = TensorSpec("w", (16, 4), spec="d,None")
        r = explorer.analyze(model, x, w, mesh="d=2")
        print([c.source for c in r.collectives])
        """))
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120, env={**os.environ, "PYTHONPATH": ROOT})
    assert out.returncode == 0, out.stderr
    # `layer` and `model` are in __main__, traced there: their file is the script.
    assert out.stdout.strip() == "['train.py:6']"


@pytest.mark.slow
def test_a_notebook_cell_shows_as_its_prompt(tmp_path):
    cells = [
        f"import sys\nsys.path.insert(0, {ROOT!r})\nimport explorer\nfrom explorer import "
        "TensorSpec",
        "def layer(x, w):\n    y = x * 2\n    return y @ w",
        "def model(x, w):\n    return layer(x, w) + 1\n\n"
        "x = TensorSpec('x', (8, 16), spec='None,d')\n"
        "w = TensorSpec('w', (16, 4), spec='d,None')\n"
        "r = explorer.analyze(model, x, w, mesh='d=2')\n"
        "print([c.source for c in r.collectives])\n"
        "print([c.source_text for c in r.collectives])",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    layer_cell, model_cell = nb.cells[1], nb.cells[2]
    n = layer_cell.execution_count
    k = 1 + next(i for i, line in enumerate(cells[1].splitlines()) if "@ w" in line)
    printed = "".join(o.get("text", "") for o in model_cell.outputs)
    assert (n, k) == (2, 3)
    # The line of code too, read from the cell itself.
    assert printed.strip().splitlines() == [f"['In [{n}], line {k}']", "['return y @ w']"]
