"""The program the explorer compiles for a Flax NNX module (explorer.ui.explore_module): the
module rebuilt from its state with `nnx.merge`, then called. It is traced where the app runs,
as any user's function is (explorer/_src/compile/lowering.py), with the module's GraphDef bound in
a functools.partial.
"""

from __future__ import annotations

import functools


@functools.cache
def _exclude_flax_frames() -> None:
    """Source lines name the model's code, not flax's: jax records the innermost frame outside
    its own files, which in a flax layer is flax's (nnx/nn/linear.py), so flax's files are
    excluded the way jax excludes its own, once (jax appends to a list and clears its caches
    at each registration). A private jax API: without it, lines stay flax's."""
    try:
        import os

        import flax
        from jax.extend import source_info_util

        source_info_util.register_exclusion(os.path.dirname(flax.__file__))
    except (ImportError, AttributeError):
        pass


def call_module(params, state, *inputs, graphdef, call, keys):
    """The compiled program: the module rebuilt from its state, then called on the inputs."""
    import jax
    from flax import nnx

    _exclude_flax_frames()
    for path in keys:             # RNG keys are made here: no TensorSpec has a key dtype
        node = state
        for k in path[:-1]:
            node = node.setdefault(k, {})
        node[path[-1]] = jax.random.key(0)
    model = nnx.merge(graphdef, params, state)
    return call(model, *inputs) if call is not None else model(*inputs)
