"""After `import explorer`, the user's own jax runs quietly on the CPU where this machine has no
GPU or TPU and the user chose no platform (explorer/_src/quiet_jax.py). Before, with the gpu and tpu
extras installed, the README's Equinox recipe (`jax.random.key(0)`) printed the CUDA plugin's
"Jax plugin configuration error ... cuInit(0) failed: Unknown CUDA error 303" with a traceback
and libtpu's "INVALID_ARGUMENT ... unexpected worker hostname".

The subprocess tests run Python with none of the variables through which a user (or
tests/conftest.py) chooses jax's platform; where this machine has a GPU or TPU they are skipped,
since there jax is left to find it."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from explorer._src import quiet_jax

ROOT = Path(__file__).resolve().parents[1]
NOISE = ("cuInit", "Jax plugin configuration error", "worker hostname", "TPU_WORKER_HOSTNAMES",
         "TPU_ACCELERATOR_TYPE")
CHOSEN = ("XLA_FLAGS", "JAX_SKIP_CUDA_CONSTRAINTS_CHECK", *quiet_jax.USER_CHOICES)
no_accelerator = pytest.mark.skipif(
    not quiet_jax.should_run_on_cpu({}),
    reason="this machine has a GPU or TPU (or is not Linux): jax is left to find it")

# The user's own jax, as in the README's Equinox recipe.
USERS_CODE = """
import jax
print(jax.random.key(0))
print("platform:", jax.devices()[0].platform)
"""


def run(*lines: str, **env: str) -> subprocess.CompletedProcess:
    """Python running `lines` (each block dedented) with no platform chosen, or `env`'s."""
    base = {k: v for k, v in os.environ.items() if k not in CHOSEN}
    code = "\n".join(textwrap.dedent(line) for line in lines)
    return subprocess.run([sys.executable, "-c", code], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, env={**base, **env},
                          stdin=subprocess.DEVNULL)


def assert_quiet_on_cpu(out: subprocess.CompletedProcess):
    assert out.returncode == 0, out.stderr
    assert [n for n in NOISE if n in out.stderr] == [], out.stderr
    assert "platform: cpu" in out.stdout, out.stdout


@no_accelerator
@pytest.mark.slow
def test_the_users_jax_runs_quietly_on_the_cpu_after_import_explorer():
    assert_quiet_on_cpu(run("import explorer", USERS_CODE))


@no_accelerator
@pytest.mark.slow
def test_jax_imported_before_explorer_but_not_started_is_quiet_too():
    # jax read JAX_PLATFORMS when it was imported, so its config is what is set.
    out = run("import jax, explorer", USERS_CODE, """
        import os
        print("chosen:", jax.config.jax_platforms, os.environ["JAX_PLATFORMS"])
        """)
    assert_quiet_on_cpu(out)
    assert "chosen: cpu cpu" in out.stdout


@no_accelerator
@pytest.mark.slow
def test_a_backend_started_before_explorer_is_left_alone():
    out = run("""
        import os, jax
        jax.devices()
        import explorer
        print("chosen:", jax.config.jax_platforms, os.environ.get("JAX_PLATFORMS"))
        print(jax.random.key(0))
        print("platform:", jax.devices()[0].platform)
        """)
    assert out.returncode == 0, out.stderr
    assert "chosen: None None" in out.stdout
    assert "platform: cpu" in out.stdout


@no_accelerator
@pytest.mark.slow
def test_the_users_own_jax_platforms_is_kept():
    out = run("import explorer, os", USERS_CODE, 'print("chosen:", os.environ["JAX_PLATFORMS"])',
              JAX_PLATFORMS="cpu")
    assert_quiet_on_cpu(out)
    assert "chosen: cpu" in out.stdout


def _device(root: Path, relative: str, text: str | None = None) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text or "")


@pytest.mark.parametrize("device", ["dev/nvidia0", "dev/nvidiactl", "dev/dxg", "dev/kfd",
                                    "proc/driver/nvidia/version", "dev/accel0", "dev/vfio/0"])
def test_a_gpu_or_tpu_device_leaves_jax_alone(tmp_path, device):
    _device(tmp_path, device)
    environ = {}
    assert quiet_jax.accelerator_present(str(tmp_path))
    assert quiet_jax.quiet(environ, root=str(tmp_path), modules={}) is None
    assert environ == {}


def test_a_tpu_is_found_on_the_pci_bus_and_a_google_nic_is_not(tmp_path):
    _device(tmp_path, "sys/bus/pci/devices/0000:00:04.0/vendor", "0x1ae0\n")
    _device(tmp_path, "sys/bus/pci/devices/0000:00:04.0/device", "0x0042\n")   # gVNIC
    _device(tmp_path, "dev/vfio/vfio")     # the vfio control node alone is no device
    assert not quiet_jax.accelerator_present(str(tmp_path))
    _device(tmp_path, "sys/bus/pci/devices/0000:00:05.0/vendor", "0x1ae0\n")
    _device(tmp_path, "sys/bus/pci/devices/0000:00:05.0/device", "0x0063\n")   # TPU v5e
    assert quiet_jax.accelerator_present(str(tmp_path))


def test_with_no_device_and_no_choice_jax_is_pointed_at_the_cpu(tmp_path):
    environ = {"JAX_PLATFORMS": ""}        # empty: jax would choose, as if unset
    assert quiet_jax.quiet(environ, root=str(tmp_path), modules={}) == "environment"
    assert environ == {"JAX_PLATFORMS": "cpu"}


@pytest.mark.parametrize("choice", [{"JAX_PLATFORMS": "tpu"}, {"JAX_PLATFORMS": "cuda,cpu"},
                                    {"JAX_PLATFORM_NAME": "gpu"}, {"JAX_FORCE_TPU_INIT": ""},
                                    {"PJRT_NAMES_AND_LIBRARY_PATHS": "mine:/opt/libmine.so"}])
def test_a_users_choice_is_never_overridden(tmp_path, choice):
    environ = dict(choice)
    assert quiet_jax.user_chose_platform(environ)
    assert quiet_jax.quiet(environ, root=str(tmp_path), modules={}) is None
    assert environ == choice


def test_only_linux_is_touched(tmp_path):
    assert quiet_jax.should_run_on_cpu({}, root=str(tmp_path), system="linux")
    assert not quiet_jax.should_run_on_cpu({}, root=str(tmp_path), system="darwin")


class _Config:
    def __init__(self, platforms):
        self.jax_platforms = platforms
        self.updates = []

    def update(self, name, value):
        self.updates.append((name, value))


class _Bridge:
    def __init__(self, started):
        self.started = started

    def backends_are_initialized(self):
        return self.started


class _Jax:
    def __init__(self, platforms):
        self.config = _Config(platforms)


@pytest.mark.parametrize("platforms, started, done", [(None, False, "config"),
                                                      ("tpu", False, None),
                                                      (None, True, None)])
def test_an_imported_jax_gets_its_config_set_only_before_it_started(tmp_path, platforms,
                                                                    started, done):
    jax = _Jax(platforms)
    modules = {"jax": jax, "jax._src.xla_bridge": _Bridge(started)}
    environ = {}
    assert quiet_jax.quiet(environ, root=str(tmp_path), modules=modules) == done
    assert jax.config.updates == ([("jax_platforms", "cpu")] if done else [])
    assert environ == ({"JAX_PLATFORMS": "cpu"} if done else {})


def test_a_jax_whose_state_cannot_be_read_is_left_alone(tmp_path):
    environ = {}
    assert quiet_jax.quiet(environ, root=str(tmp_path), modules={"jax": object()}) is None
    assert environ == {}
