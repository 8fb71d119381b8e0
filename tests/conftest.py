"""Test set-up. Compiles run in worker processes with their own device counts; the test process
itself gets 8 fake CPU devices for the tests that compare against jax directly."""

import os

# Must be set before jax is first imported in this process (it fixes the device count then).
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# The persistent report cache (explorer/api/diskcache.py) is off, so that every test compiles
# what it asks for and none reads or fills the user's ~/.cache; its own tests turn it on.
os.environ.setdefault("EXPLORER_DISK_CACHE", "0")

import pytest  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _close_workers():
    yield
    from explorer.compile.pool import default_pool

    default_pool().close()
