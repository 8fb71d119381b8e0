"""What the browser tests (tests/ui/*_browser.py) share: Debian's Chromium, a folder for their
screenshots and logs, and a Voila server on a notebook, started and stopped by the test."""

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("EXPLORER_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture(scope="session")
def chromium() -> dict:
    """Playwright's launch arguments for Debian's Chromium (Playwright's own download does not
    work here); skips without it, except under CI, where .ci/run must have installed it."""
    if not shutil.which(CHROMIUM) and not os.path.exists(CHROMIUM):
        if os.environ.get("CI"):
            raise RuntimeError(f"{CHROMIUM} is missing: .ci/run must install Debian's chromium")
        pytest.skip(f"no Chromium at {CHROMIUM}")
    return {"executable_path": CHROMIUM, "args": CHROMIUM_ARGS}


@pytest.fixture(scope="module")
def browser(chromium):
    """A headless Chromium (Playwright) for one test module's pages."""
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(**chromium)
        yield b
        b.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """test-artifacts/: the screenshots and server logs a failed run leaves to look at."""
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def voila_server(artifacts):
    """voila_server(notebook=None, env=None): a context manager running Voila on `notebook`
    (the app notebook by default) on a free loopback port, with `env` added to its (and its
    kernels') environment; it yields the URL and stops the server."""
    from explorer._src.ui.serve import free_port, stop_server, voila_command, wait_until_serving

    @contextlib.contextmanager
    def serve(notebook=None, env=None):
        port = free_port()
        name = "voila" if notebook is None else f"voila-{Path(notebook).stem}"
        # Under pytest-xdist each worker serves its own: one log each, none overwritten.
        worker = os.environ.get("PYTEST_XDIST_WORKER")
        name += f"-{worker}.log" if worker else ".log"
        log = open(artifacts / name, "w")
        proc = subprocess.Popen(voila_command(port, notebook=notebook), stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ, **(env or {})})
        url = f"http://127.0.0.1:{port}/"
        try:
            wait_until_serving(url + "voila/static/", proc)
        except RuntimeError as e:
            proc.kill()
            log.close()
            raise RuntimeError(f"Voila did not start ({e}); see {log.name}") from None
        try:
            yield url
        finally:
            stop_server(proc)
            log.close()

    return serve


def _pick(page, tensor: str, dim: int, axes: list[str]) -> None:
    """Set a dimension's mesh axes as a user does: remove its tags, then type each axis."""
    from explorer._src.ui.editors import css_name

    picker = page.locator(f".explorer-spec-{css_name(tensor)} .explorer-dim-{dim}")
    close = picker.locator(".jupyter-widget-tag-close")
    while close.count():
        close.first.click()
    for axis in axes:
        picker.click()
        box = picker.locator("input.jupyter-widget-taginput")
        box.fill(axis)
        box.press("Enter")
        picker.locator(".jupyter-widget-tag", has_text=axis).wait_for(timeout=10_000)


@pytest.fixture(scope="session")
def pick():
    """pick(page, tensor, dim, axes): set the spec picker of `tensor`'s dimension `dim` in the
    page to `axes`, by clicks and typing."""
    return _pick


def _search(page, names=("batch", "mlp"), timeout_ms: int = 300_000) -> None:
    """In the Suggest tab, search over the logical `names` and wait for the search's end."""
    page.get_by_text("Suggest", exact=True).click()
    tags = page.locator(".explorer-suggest input.jupyter-widget-taginput")
    for name in names:
        tags.click()
        tags.fill(name)
        tags.press("Enter")
    page.locator(".explorer-suggest button", has_text="Start search").click()
    page.locator(".explorer-suggest-progress").filter(has_text="complete: evaluated") \
        .wait_for(timeout=timeout_ms)


@pytest.fixture(scope="session")
def search_in_page():
    """search_in_page(page, names=("batch", "mlp")): run a search in the page's Suggest tab
    over those logical names, as a user does, and wait until it is complete."""
    return _search
