"""Test set-up. Compiles run in worker processes with their own device counts; the test process
itself gets 8 fake CPU devices for the tests that compare against jax directly."""

import os

# Must be set before jax is first imported in this process (it fixes the device count then).
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import pytest  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _close_workers():
    yield
    from explorer.compile.pool import default_pool

    default_pool().close()


def pytest_collection_modifyitems(items):
    # Every test that drives a real Voila server in Chromium lives in a *_browser.py file.
    for item in items:
        if item.path.name.endswith("_browser.py"):
            item.add_marker(pytest.mark.browser)
