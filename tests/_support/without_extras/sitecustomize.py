"""Put this folder on PYTHONPATH to run Python as if neither the gpu nor the tpu extra were
installed: the import system finds none of their packages (jax's CUDA plugin, its
`jax_plugins` namespace, libtpu), as in a venv with the app extra alone. Child processes (the
compile workers) inherit PYTHONPATH and so the same view. `EXPLORER_HIDE` may name the
top-level packages to hide instead, comma-separated."""

import os
import sys
from importlib.machinery import PathFinder

HIDDEN = frozenset(os.environ.get(
    "EXPLORER_HIDE", "jax_plugins,jax_cuda12_plugin,jax_cuda12_pjrt,libtpu").split(","))


class _Hiding:
    """A meta path finder that finds nothing under the hidden names, so that
    importlib.util.find_spec returns None for them and importing them raises
    ModuleNotFoundError, exactly as for packages that are not installed."""

    def __init__(self, inner):
        self.inner = inner

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            return None
        return self.inner.find_spec(name, path, target)

    def __getattr__(self, attr):
        return getattr(self.inner, attr)


sys.meta_path[:] = [_Hiding(f) if f is PathFinder else f for f in sys.meta_path]
