"""Test set-up. Compiles run in worker processes with their own device counts; the test process
itself gets 8 fake CPU devices for the tests that compare against jax directly."""

import os

# Must be set before jax is first imported in this process (it fixes the device count then).
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# The persistent report cache (explorer/_src/api/diskcache.py) is off, so that every test compiles
# what it asks for and none reads or fills the user's ~/.cache; its own tests turn it on.
os.environ.setdefault("EXPLORER_DISK_CACHE", "0")
# A reader that raises (explorer/_src/report/why/explain.py) fails the test instead of answering
# `unknown`, so that a crash cannot pass for "no rule fits".
os.environ.setdefault("EXPLORER_STRICT", "1")
# Tests that compare with plain jax's deviceless TPU compile load libtpu in their own process,
# while another test process (the other xdist worker, the newest-jax compatibility run) may
# hold it: libtpu lets several processes load it only when each asks, as the compile workers do
# (explorer/_src/compile/pool.py).
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")

import pytest  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _close_workers():
    yield
    from explorer._src.compile.pool import default_pool

    default_pool().close()


@pytest.fixture
def cpu_screen(monkeypatch):
    """A search on a GPU or TPU target screens on CPU devices, not by the estimate (which it
    would take first for a program it can trace), whatever the reference's compile times:
    which screen a program the estimate cannot trace takes depends on how much faster the CPU
    compiled the reference than the target's compiler (confirm.screen_skipped), which a loaded
    machine can change between two searches; a test that compares two searches needs both to
    take the same one."""
    from explorer._src.layout_search import branch_and_bound

    monkeypatch.setattr(branch_and_bound.BranchAndBound, "estimate_screen",
                        lambda self: (None, " (the estimate screen off for this test)"))
    monkeypatch.setattr(branch_and_bound, "screen_skipped", lambda screened, own: "")


@pytest.fixture
def cli(capsys):
    """explorer._src.cli.main run in this process: `cli(argv)` gives (exit status, stdout, stderr),
    argparse's own errors (a SystemExit) included."""
    from explorer._src.cli import main

    def run(argv: list[str]) -> tuple[int, str, str]:
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code
        out, err = capsys.readouterr()
        return code, out, err

    return run


def pytest_collection_modifyitems(items):
    # Every test that drives a real Voila server in Chromium lives in a *_browser.py file.
    for item in items:
        if item.path.name.endswith("_browser.py"):
            item.add_marker(pytest.mark.browser)


# Two reports of the mlp on data=2,model=4 that several test folders read (compare, dataflow,
# graph): Megatron specs (one all-reduce over model) and replicated weights (none). Compiled on
# fake CPU devices and priced on h100-8, so that their expectations (worked out for the CPU's
# f32 program) hold whether or not the gpu extra is installed.
MLP_MEGATRON = {"x": "data,None", "w1": "None,model", "w2": "model,None"}
MLP_REPLICATED = {"x": "data,None", "w1": "None,None", "w2": "None,None"}


@pytest.fixture(scope="session")
def megatron():
    import explorer

    return explorer.analyze_workload("mlp", "data=2,model=4", specs=MLP_MEGATRON,
                                     target="h100-8", compile_for="cpu")


@pytest.fixture(scope="session")
def replicated():
    import explorer

    return explorer.analyze_workload("mlp", "data=2,model=4", specs=MLP_REPLICATED,
                                     target="h100-8", compile_for="cpu")
