"""The Memory tab of a user's own train step splits its bytes by kind from its inputs' names
(issue 53): leaves of `model` are parameters, of `optimizer` optimizer state, the batch other;
the new state it returns, under the same names, counts with them."""

import jax
import jax.numpy as jnp
import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")

from explorer._src.report.report import MemoryKind  # noqa: E402
from explorer._src.ui.app import TAB_TITLES  # noqa: E402
from explorer.ui import explore  # noqa: E402

KiB = 1024


def step(model, optimizer, batch):
    loss = jnp.sum((batch @ model["w"]) ** 2)
    mu = 0.9 * optimizer["mu"]["w"] + loss
    return {"model": {"w": model["w"] - mu}, "optimizer": {"mu": {"w": mu}}, "loss": loss}


def test_a_users_train_step_is_split_into_params_optimizer_state_and_other():
    f32 = jnp.float32
    app = explore(step, {"w": jax.ShapeDtypeStruct((64, 64), f32)},
                  {"mu": {"w": jax.ShapeDtypeStruct((64, 64), f32)}},
                  jax.ShapeDtypeStruct((8, 64), f32), mesh="data=2,model=4", debounce=None)
    try:
        kinds = app.report.memory.by_kind
        # Every input replicated: w in and out, 64·64·4 B = 16 KiB each; mu.w likewise; the
        # batch 8·64·4 B = 2 KiB and the scalar loss 4 B are other.
        assert kinds[MemoryKind.PARAMS] == 2 * 16 * KiB
        assert kinds[MemoryKind.OPTIMIZER] == 2 * 16 * KiB
        assert kinds[MemoryKind.OTHER] == 2 * KiB + 4
        app.tabs.selected_index = TAB_TITLES.index("Memory")
        assert "every byte counts as other" not in app.memory.text.value
    finally:
        app.close()
