"""The explorer as the README's first command installs it: the app extra alone, without the gpu
and tpu extras. Each test runs Python in a subprocess whose import system finds neither jax's
CUDA plugin (nor its `jax_plugins` package) nor libtpu (tests/_support/without_extras), as in
such a venv; the compile workers it starts inherit that view.

A GPU or TPU target then compiles on fake CPU devices and says so, with the install command
(README, "Compiled for the target"). Before the fix, pricing on an H100 raised
ModuleNotFoundError: No module named 'jax_plugins' from the API, the CLI and the app alike.
tests/test_fresh_install.py checks the same in real fresh venvs (slow)."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HIDE = ROOT / "tests" / "_support" / "without_extras"
GPU_INSTALL = "pip install 'sharding-explorer[gpu]'"
TPU_INSTALL = "pip install 'sharding-explorer[tpu]'"
MEGATRON = {"x": "data,None", "w1": "None,model", "w2": "model,None"}
# The mlp workload's defaults: x f32[256,1024] @ w1 [1024,4096] @ w2 [4096,1024]. With Megatron
# specs on data=2,model=4 the partial sums of x@w1@w2 are all-reduced over `model` once: each
# device holds an out block of 256/2 rows by 1024 columns of f32, 128 * 1024 * 4 = 524,288 B.
MEGATRON_ALL_REDUCE_BYTES = 128 * 1024 * 4


def run_without_extras(code: str | None = None, *args: str, timeout: float = 300,
                       hide: str | None = None):
    """Python running `code` (or `args`) with the extras hidden; `hide`: the top-level packages
    to hide instead of all of both extras', comma-separated."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(HIDE), *filter(None, [os.environ.get("PYTHONPATH")])])}
    if hide is not None:
        env["EXPLORER_HIDE"] = hide
    argv = [sys.executable, "-c", textwrap.dedent(code)] if code else [sys.executable, *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=ROOT, stdin=subprocess.DEVNULL)


def test_the_extras_are_hidden_as_if_not_installed():
    out = run_without_extras("""
        import importlib.util
        print(importlib.util.find_spec("libtpu"), importlib.util.find_spec("jax_cuda12_plugin"))
        try:
            importlib.util.find_spec("jax_plugins.xla_cuda12")
        except ModuleNotFoundError as e:
            print(e)
        """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["None None", "No module named 'jax_plugins'"]


@pytest.mark.parametrize("target, install", [("h100-8", GPU_INSTALL),
                                             ("tpu-v5e-2x4", TPU_INSTALL)])
# None: every package of both extras hidden. "jax_plugins,libtpu": jax's CUDA kernels package
# (jax_cuda12_plugin) importable but not the PJRT plugin that holds the compiler; the GPU
# target was then planned for the GPU compiler and its worker raised "NotImplementedError:
# topology not implemented for cuda".
@pytest.mark.parametrize("hide", [None, "jax_plugins,libtpu"])
@pytest.mark.slow
def test_api_compiles_a_gpu_or_tpu_target_on_cpu_devices_and_says_so(target, install, hide):
    out = run_without_extras(hide=hide, code=f"""
        import json
        import explorer
        r = explorer.analyze_workload("mlp", mesh="data=2,model=4", target={target!r},
                                      specs={MEGATRON!r})
        print(json.dumps({{"backend": r.backend, "approximation": r.approximation,
                          "notes": list(r.estimate.notes),
                          "collectives": [(c.kind, list(c.axes), c.bytes)
                                          for c in r.collectives]}}))
        """)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["backend"] == "cpu"
    assert install in got["approximation"]
    # The CPU's program: one all-reduce of the partial sums over model (hand-computed above).
    assert got["collectives"] == [["all-reduce", ["model"], MEGATRON_ALL_REDUCE_BYTES]]
    if target.startswith("h100"):
        # XLA's GEMM-rate table comes with the gpu extra: absent, with its note.
        assert any("not installed" in n and "flat measured fraction" in n for n in got["notes"])


@pytest.mark.parametrize("target, install", [("h100-8", GPU_INSTALL),
                                             ("tpu-v5e-2x4", TPU_INSTALL)])
@pytest.mark.slow
def test_cli_analyze_on_a_gpu_or_tpu_target(target, install):
    out = run_without_extras(None, "-m", "explorer._src.cli", "analyze", "--workload", "mlp",
                             "--mesh", "data=2,model=4", "--target", target)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    (line,) = [ln for ln in out.stdout.splitlines() if ln.startswith("compiled for")]
    assert line.startswith("compiled for 8 CPU devices, priced on 8 × ")
    assert "approximate" in line and install in line


@pytest.mark.slow
def test_app_on_the_readmes_default_target():
    out = run_without_extras(f"""
        import json
        from explorer._src.app_page import app_page
        page = app_page(workload="mlp", mesh="data=2,model=4", target="h100-8",
                        specs={MEGATRON!r}, debounce=None)
        app = page.app
        print(json.dumps({{"page": type(page).__name__, "status": app.status.value,
                          "compiled_for": app.compiled_for.value, "error": app.error_w.value,
                          "page_error": page.error.value}}))
        """)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["page"] == "AppPage"
    assert "● compiled" in got["status"] and "· 1 collective" in got["status"]
    assert "⚠ compiled for 8 CPU devices" in got["compiled_for"]
    assert "approximate" in got["compiled_for"] and GPU_INSTALL.replace("'", "&#x27;") \
        in got["compiled_for"]
    assert got["error"] == "" and got["page_error"] == ""
