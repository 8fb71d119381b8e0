"""A user's program's memory is split by kind once (issue 52): explorer.analyze splits it by its
inputs' names, and the app keeps that split; the app splits again only with what its source
knows beyond the names (a Flax module's own kinds). Bytes worked by hand from the inputs'
shapes, every input replicated; the activations are XLA's temporaries, read from the Report."""

from functools import partial

import jax
import jax.numpy as jnp
import pytest

pytest.importorskip("ipywidgets")

import explorer  # noqa: E402
from explorer import MemoryKind  # noqa: E402
from explorer._src.report import memory  # noqa: E402
from explorer.ui import explore, explore_module  # noqa: E402

F32 = 4


def step(params, opt_state, batch):
    loss = jnp.sum((batch @ params["w"]) ** 2)
    mu = 0.9 * opt_state["mu"] + loss
    return {"params": {"w": params["w"] - mu}, "opt_state": {"mu": mu}, "loss": loss}


def counted_splits(monkeypatch) -> list:
    """The splits made from now on (memory.memory_kinds, which every split calls)."""
    calls, split = [], memory.memory_kinds
    monkeypatch.setattr(memory, "memory_kinds",
                        lambda *a, **k: calls.append(a[1]) or split(*a, **k))
    return calls


def test_a_plain_train_step_is_split_once_by_its_inputs_names(monkeypatch):
    explorer.clear_cache()          # a finish kept from another test would split nothing here
    splits = counted_splits(monkeypatch)
    w = jax.ShapeDtypeStruct((48, 40), jnp.float32)
    app = explore(step, {"w": w}, {"mu": w}, jax.ShapeDtypeStruct((8, 48), jnp.float32),
                  mesh="data=2", debounce=None)
    try:
        kinds = app.report.memory.by_kind
        # w in and out (not donated), 48·40·4 B each; opt_state.mu likewise; the batch
        # 8·48·4 B and the scalar loss are other; where the gradients are is unknown.
        assert kinds[MemoryKind.PARAMS] == 2 * 48 * 40 * F32
        assert kinds[MemoryKind.OPTIMIZER] == 2 * 48 * 40 * F32
        assert kinds[MemoryKind.OTHER] == 8 * 48 * F32 + F32
        assert kinds[MemoryKind.GRADS] is None
        assert kinds[MemoryKind.ACTIVATIONS] == app.report.memory.temporaries
        assert len(splits) == 1
        # The same request answered again as the app answers it (an undo's): the finished
        # Report is kept, and the app's description splits nothing.
        again = app.session.analyze(describe=partial(app.source.describe, request=app.request))
        assert again.report.memory.kinds == app.report.memory.kinds and len(splits) == 1
    finally:
        app.close()


nnx = pytest.importorskip("flax.nnx")


class Net(nnx.Module):
    def __init__(self, rngs):
        self.dense = nnx.Linear(64, 32, rngs=rngs)
        self.norm = nnx.BatchNorm(32, rngs=rngs)         # its mean and var: other state

    def __call__(self, x):
        return self.norm(self.dense(x))


def train_step(model, x):
    loss, grads = nnx.value_and_grad(lambda m: jnp.mean(m(x) ** 2))(model)
    return loss, grads


def test_a_flax_train_step_is_split_by_the_modules_own_kinds():
    with nnx.use_eager_sharding(False):
        model = nnx.eval_shape(lambda: Net(nnx.Rngs(0)))
    app = explore_module(model, explorer.TensorSpec("x", (16, 64)), fn=train_step,
                         mesh="data=2", debounce=None)
    try:
        kinds = app.report.memory.by_kind
        # Parameters: dense.kernel 64·32, dense.bias 32, norm.scale 32, norm.bias 32 (f32).
        params = (64 * 32 + 3 * 32) * F32
        assert kinds[MemoryKind.PARAMS] == params
        assert kinds[MemoryKind.OPTIMIZER] == 0
        # Other: x 16·64, the batch statistics mean and var 32 each, the scalar loss, and the
        # gradients returned (outputs that name no input, as many bytes as the parameters).
        assert kinds[MemoryKind.OTHER] == (16 * 64 + 2 * 32 + 1) * F32 + params
        # A user's step: where its gradients are held is unknown.
        assert kinds[MemoryKind.GRADS] is None
        assert kinds[MemoryKind.ACTIVATIONS] == app.report.memory.temporaries
    finally:
        app.close()
