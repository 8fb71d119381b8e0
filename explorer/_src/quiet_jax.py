"""The user's own jax, quiet on the CPU where this machine has no GPU or TPU.

With the gpu extra (jax's CUDA plugin) and the tpu extra (libtpu) installed, jax with no
platform chosen tries every plugin at its first operation. On a machine with no GPU the CUDA
plugin's driver check fails (`cuInit(0) failed: Unknown CUDA error 303`) and jax logs "Jax plugin
configuration error" with a traceback; libtpu, finding no TPU, prints that it could not determine
the accelerator type and the worker hostnames (`INVALID_ARGUMENT ... worker hostname`). jax then
runs on the CPU, as it would have anyway, so all of it is noise, and it lands in the user's own
notebook cells (the README's Equinox recipe, `jax.random.key(0)`). The compile workers choose
their own platform (compile/pool.py); this is about the process that imports `explorer`.

`quiet()`, run when this module is imported (explorer/__init__.py imports it first of all),
sets `JAX_PLATFORMS=cpu` (the CUDA plugin then skips its check, and jax starts neither the CUDA
client nor libtpu), only where the user chose no platform and this machine has no GPU or TPU
device. Where jax is already imported it read its environment then, so its config is set
instead; once one of its backends has started it is too late, and nothing is changed. Where a
GPU or TPU is present, or the user chose (JAX_PLATFORMS set, or one of the other variables in
USER_CHOICES), nothing is changed: a user opts out by setting JAX_PLATFORMS.

Standard library only: the check must not import jax (importing jax is what it is about).
"""

from __future__ import annotations

import glob
import os
import sys
from collections.abc import Mapping, MutableMapping

# Variables through which a user chooses jax's platform or its plugins: any one set (and, for
# JAX_PLATFORMS, not empty: jax reads "" as "choose for me") leaves jax alone.
USER_CHOICES = ("JAX_PLATFORMS", "JAX_PLATFORM_NAME", "PJRT_NAMES_AND_LIBRARY_PATHS",
                "JAX_FORCE_TPU_INIT")

# Device nodes of a GPU, relative to the root: NVIDIA's (jax's own test, hardware_utils.py, is
# /dev/nvidia0, /dev/nvidiactl and WSL2's /dev/dxg), its driver's /proc entry, and AMD's KFD node
# (ROCm), so that another vendor's GPU is never hidden either.
GPU_PATTERNS = ("dev/nvidia*", "dev/dxg", "proc/driver/nvidia", "dev/kfd")
# A TPU VM's chips: /dev/accel<n> (v2 to v4) and /dev/vfio/<n> (v5e and later), as libtpu opens
# them, and the PCI devices jax counts (vendor Google, one of its TPU device ids).
TPU_PATTERNS = ("dev/accel*", "dev/vfio/[0-9]*")
GOOGLE_PCI_VENDOR = "0x1ae0"
TPU_PCI_DEVICES = frozenset({"0x0027", "0x0056", "0x005e", "0x0062", "0x0063", "0x006f",
                             "0x0076"})


def _found(root: str, patterns: tuple[str, ...]) -> bool:
    return any(glob.glob(os.path.join(root, p)) for p in patterns)


def _tpu_on_pci(root: str) -> bool:
    for vendor in glob.glob(os.path.join(root, "sys/bus/pci/devices/*/vendor")):
        try:
            with open(vendor) as f:
                if f.read().strip() != GOOGLE_PCI_VENDOR:
                    continue
            with open(os.path.join(os.path.dirname(vendor), "device")) as f:
                if f.read().strip() in TPU_PCI_DEVICES:
                    return True
        except OSError:
            continue
    return False


def accelerator_present(root: str = "/") -> bool:
    """Whether the machine whose file system is at `root` has a GPU or TPU device."""
    return _found(root, GPU_PATTERNS) or _found(root, TPU_PATTERNS) or _tpu_on_pci(root)


def accelerator_platform(root: str = "/") -> str:
    """The platform jax would run this machine's devices on, as its lowering names it: "tpu"
    or "cuda" ("rocm" for an AMD GPU) where the device is there, else "cpu"; found by the same
    device paths as `accelerator_present`, without starting jax."""
    if _found(root, TPU_PATTERNS) or _tpu_on_pci(root):
        return "tpu"
    if _found(root, ("dev/kfd",)):
        return "rocm"
    return "cuda" if _found(root, GPU_PATTERNS) else "cpu"


def user_chose_platform(environ: Mapping[str, str]) -> bool:
    """Whether `environ` chooses jax's platform or plugins (USER_CHOICES)."""
    return any(environ.get(name) if name == "JAX_PLATFORMS" else name in environ
               for name in USER_CHOICES)


def should_run_on_cpu(environ: Mapping[str, str], root: str = "/",
                      system: str = sys.platform) -> bool:
    """Whether jax should be told to use the CPU: on Linux (where the plugins' noise and these
    device paths are), no platform chosen in `environ`, and no GPU or TPU under `root`."""
    return (system.startswith("linux") and not user_chose_platform(environ)
            and not accelerator_present(root))


def _jax_untouched(modules: Mapping[str, object]) -> bool:
    """Whether an imported jax has started no backend and has no platform set in its config;
    False where that cannot be read (a jax this module does not know: leave it alone)."""
    try:
        bridge = modules["jax._src.xla_bridge"]      # jax's private state, read if it is there
        return not bridge.backends_are_initialized() and not modules["jax"].config.jax_platforms
    except Exception:
        return False


def quiet(environ: MutableMapping[str, str] | None = None, root: str = "/",
          modules: Mapping[str, object] | None = None) -> str | None:
    """Point jax at the CPU where should_run_on_cpu(); says what was set: "environment"
    (jax not imported yet), "config" (imported, no backend started) or None (nothing)."""
    environ = os.environ if environ is None else environ
    modules = sys.modules if modules is None else modules
    if not should_run_on_cpu(environ, root):
        return None
    jax = modules.get("jax")
    if jax is None:
        environ["JAX_PLATFORMS"] = "cpu"
        return "environment"
    if not _jax_untouched(modules):
        return None
    try:
        jax.config.update("jax_platforms", "cpu")
    except Exception:       # a partly imported jax: leave it alone
        return None
    environ["JAX_PLATFORMS"] = "cpu"    # so that processes started from here agree
    return "config"


quiet()
