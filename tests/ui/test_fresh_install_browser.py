"""What the README tells a newcomer to run, run as they would: its first command, in a fresh
venv with the app extra alone, then `sharding-explorer` served from it and the page opened in
Chromium; the API and the CLI in that venv on a GPU and a TPU target; and the other installs
the README offers (the tpu and the gpu extras beside the app) at their main job.

The test suite's own venv has every extra, so nothing else here would see an install that
lacks one (the app extra alone once served a page that showed only Voila's "There was an error
when executing cell [1]"). The venvs live in a temporary folder; pip installs the packages from
PyPI (or its cache) as the README's command does. The servers, the API and the CLI run with a
fresh home folder (no report cache, no config), as on a newcomer's machine."""

import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

playwright = pytest.importorskip("playwright.sync_api")

from explorer._src.ui.serve import wait_until_serving  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[2]
# The Placement tab's heatmap, drawn with its title: the app's first result on the page.
HEATMAP = ".explorer-placement .js-plotly-plot .gtitle"
VOILA_ERROR = "There was an error when executing cell"
MEGATRON = ["--spec", "x=data,None", "--spec", "w1=None,model", "--spec", "w2=model,None"]


def readme_first_command() -> str:
    """The README's first command: `python3 -m venv .venv && ... && .venv/bin/sharding-explorer`."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```bash\n(.*?)\n```", text, re.S).group(1).strip()
    assert block.endswith("&& .venv/bin/sharding-explorer"), block
    return block


def install(venv: Path, extras: str | None = None) -> None:
    """The README's first command up to the launch, into `venv`; `extras` in place of the
    README's `app` (e.g. `app,gpu`), as the README's notes on the extras offer."""
    command = readme_first_command().removesuffix("&& .venv/bin/sharding-explorer").strip()
    if extras:
        command = command.replace("'.[app]'", f"'.[{extras}]'")
    command = command.replace(".venv", shlex.quote(str(venv)))
    out = subprocess.run(command, shell=True, cwd=ROOT, capture_output=True, text=True,
                         stdin=subprocess.DEVNULL, timeout=1800, env=_machine_env())
    assert out.returncode == 0, f"{command}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"


def _machine_env() -> dict:
    """This machine's environment less what the test suite set (fake devices, the cache off,
    strict readers, its venv): what a newcomer's shell has."""
    drop = ("XLA_", "JAX_", "EXPLORER_", "PYTEST", "VIRTUAL_ENV", "PYTHONPATH")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    here = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != here)
    return env


def newcomer_env(home: Path) -> dict:
    home.mkdir(parents=True, exist_ok=True)
    return {**_machine_env(), "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache")}


def cli(venv: Path, home: Path, *args: str) -> str:
    out = subprocess.run([str(venv / "bin" / "sharding-explorer"), *args], capture_output=True,
                         text=True, timeout=600, env=newcomer_env(home), cwd=home,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    return out.stdout


def compiled_line(stdout: str) -> str:
    (line,) = [ln for ln in stdout.splitlines() if ln.startswith("compiled for")]
    return line


def serve_and_look(venv: Path, home: Path, chromium: dict, shot: Path) -> str:
    """`sharding-explorer` with no arguments, as the README runs it; the URL it prints opened in
    Chromium at desktop size until the first heatmap is drawn. Returns the page's text; leaves
    a screenshot at `shot`. Fails on Voila's generic cell error or a page without the app."""
    proc = subprocess.Popen([str(venv / "bin" / "sharding-explorer")], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=newcomer_env(home),
                            cwd=home, stdin=subprocess.DEVNULL)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        url = _printed_url(lines, proc)
        try:
            wait_until_serving(url, proc)
        except RuntimeError as e:
            raise AssertionError(f"Voila did not start ({e}):\n" + "".join(lines)) from None
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(**chromium)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.goto(url, timeout=300_000)
                # The app's first result, or the page's error: whichever shows first.
                page.wait_for_selector(f"{HEATMAP}, .explorer-page-failed, "
                                       f":text(\"{VOILA_ERROR}\")", timeout=300_000)
                page.screenshot(path=str(shot), full_page=True)
                text = page.inner_text("body")
                assert VOILA_ERROR not in text, text[:2000]
                assert page.locator(".explorer-page-failed").count() == 0, text[:2000]
                assert page.locator(HEATMAP).count() >= 1
                return text
            finally:
                browser.close()
    finally:
        proc.send_signal(signal.SIGTERM)      # sharding-explorer stops Voila and its kernels
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _printed_url(lines: list[str], proc: subprocess.Popen) -> str:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for line in list(lines):
            found = re.search(r"sharding-explorer app: (http://\S+)", line)
            if found:
                return found.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    raise AssertionError("sharding-explorer printed no URL:\n" + "".join(lines))


@pytest.fixture(scope="module")
def app_venv(tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp("fresh") / ".venv"
    install(venv)
    return venv


def test_the_readmes_first_command_serves_the_app(app_venv, tmp_path, chromium, artifacts):
    text = serve_and_look(app_venv, tmp_path / "home", chromium,
                          artifacts / "fresh-install-app.png")
    # The default target is an H100 node; without the gpu extra it is compiled on CPU devices,
    # and the page says so, with the install command.
    assert "compiled for 8 CPU devices, priced on 8 × H100 SXM: approximate" in text
    assert "pip install 'sharding-explorer[gpu]'" in text


@pytest.mark.parametrize("target, install_command", [
    ("h100-8", "pip install 'sharding-explorer[gpu]'"),
    ("tpu-v5e-2x4", "pip install 'sharding-explorer[tpu]'")])
def test_the_cli_and_api_of_the_app_install(app_venv, tmp_path, target, install_command):
    line = compiled_line(cli(app_venv, tmp_path, "analyze", "--workload", "mlp", "--mesh",
                             "data=2,model=4", "--target", target, *MEGATRON))
    assert line.startswith("compiled for 8 CPU devices") and install_command in line
    out = subprocess.run(
        [str(app_venv / "bin" / "python"), "-c",
         "import explorer; r = explorer.analyze_workload('mlp', mesh='data=2,model=4', "
         f"target={target!r}); print(r.backend, '|', r.approximation)"],
        capture_output=True, text=True, timeout=600, env=newcomer_env(tmp_path), cwd=tmp_path,
        stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    backend, approximation = out.stdout.strip().splitlines()[-1].split(" | ")
    assert backend == "cpu" and install_command in approximation


def test_the_tpu_extra_compiles_with_libtpu(app_venv, tmp_path):
    """`[app,tpu]`: the same venv with the tpu extra added, as its note in the README offers;
    a TPU target is then compiled by libtpu for its slice (the runs above have finished)."""
    install(app_venv, "app,tpu")
    line = compiled_line(cli(app_venv, tmp_path, "analyze", "--workload", "mlp", "--mesh",
                             "data=2,model=4", "--target", "tpu-v5e-2x4", *MEGATRON))
    assert line.startswith("compiled for a v5e:2x4 slice (8 × TPU v5")
    assert "by the TPU compiler, libtpu (no TPU needed)" in line
    assert "approximate" not in line


def test_the_gpu_extra_serves_the_gpu_compilers_program(tmp_path_factory, chromium, artifacts):
    """`[app,gpu]` in a fresh venv: the page's default H100 target is compiled by XLA's GPU
    compiler, and so is the CLI's."""
    root = tmp_path_factory.mktemp("fresh-gpu")
    venv = root / ".venv"
    install(venv, "app,gpu")
    home = root / "home"
    line = compiled_line(cli(venv, home, "analyze", "--workload", "mlp", "--mesh",
                             "data=2,model=4", "--target", "h100-8", *MEGATRON))
    assert line == "compiled for 8 × NVIDIA H100 80GB HBM3 by XLA's GPU compiler (no GPU needed)"
    text = serve_and_look(venv, home, chromium, artifacts / "fresh-install-gpu.png")
    assert "compiled for 8 × NVIDIA H100 80GB HBM3 by XLA's GPU compiler" in text
    assert "approximate" not in text.split("compiled for", 1)[1].split("\n", 1)[0]
