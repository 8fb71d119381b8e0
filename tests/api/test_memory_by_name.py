"""explorer.analyze splits a user's own train step's memory by kind from its inputs' names, as
the app's Memory tab does (issue 53): leaves of `model` are parameters, of `optimizer`
optimizer state, the batch other; the new state it returns under the same names counts with
them. Bytes worked by hand: every input replicated on 8 devices."""

import jax
import jax.numpy as jnp

import explorer
from explorer import MemoryKind

KiB = 1024


def step(model, optimizer, batch):
    loss = jnp.sum((batch @ model["w"]) ** 2)
    mu = 0.9 * optimizer["mu"]["w"] + loss
    return {"model": {"w": model["w"] - mu}, "optimizer": {"mu": {"w": mu}}, "loss": loss}


def plain(w, batch):
    return jnp.sum(batch @ w)


def test_a_users_train_step_is_split_into_params_optimizer_state_and_other():
    f32 = jnp.float32
    report = explorer.analyze(step, {"w": jax.ShapeDtypeStruct((64, 64), f32)},
                              {"mu": {"w": jax.ShapeDtypeStruct((64, 64), f32)}},
                              jax.ShapeDtypeStruct((8, 64), f32), mesh="data=2,model=4")
    kinds = report.memory.kinds
    # w in and out, 64*64*4 B = 16 KiB each; mu.w likewise; the batch 8*64*4 B = 2 KiB and
    # the scalar loss 4 B are other; the gradients' place is unknown.
    assert kinds[MemoryKind.PARAMS] == 2 * 16 * KiB
    assert kinds[MemoryKind.OPTIMIZER] == 2 * 16 * KiB
    assert kinds[MemoryKind.OTHER] == 2 * KiB + 4
    assert kinds[MemoryKind.GRADS] is None


def test_names_that_say_nothing_leave_the_memory_unsplit():
    report = explorer.analyze(plain, jax.ShapeDtypeStruct((64, 64), jnp.float32),
                              jax.ShapeDtypeStruct((8, 64), jnp.float32), mesh="data=8")
    assert report.memory.kinds is None
