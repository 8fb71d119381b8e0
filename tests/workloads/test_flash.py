"""The flash-style attention of attention=fused against plain causal softmax attention: the same
values and the same gradients, with several key blocks and grouped-query heads."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from explorer.workloads import flash


def plain_attention(q, k, v):
    """softmax(q·kᵀ/√d + causal mask)·v, written out, the [s, s] scores whole."""
    d, s = q.shape[-1], q.shape[1]
    scores = jnp.einsum("bsgrd,btgd->bgrst", q, k) / np.sqrt(d)
    scores = jnp.where(jnp.tril(jnp.ones((s, s), bool)), scores, -jnp.inf)
    return jnp.einsum("bgrst,btgd->bsgrd", jax.nn.softmax(scores, axis=-1), v)


@pytest.mark.slow   # compile-heavy: the full suite runs it, the inner loop does not
@pytest.mark.parametrize("block", [4, 16])     # four key blocks of 4; one block of the whole
def test_flash_attention_matches_plain_attention_and_its_gradients(monkeypatch, block):
    monkeypatch.setattr(flash, "KEY_BLOCK", block)
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    q = jax.random.normal(keys[0], (2, 16, 2, 3, 8))     # 2 key/value heads, 3 queries each
    k = jax.random.normal(keys[1], (2, 16, 2, 8))
    v = jax.random.normal(keys[2], (2, 16, 2, 8))
    np.testing.assert_allclose(flash.flash_attention(q, k, v), plain_attention(q, k, v),
                               atol=1e-5)
    # A loss that weighs every output differently, so that every gradient term shows.
    weights = jax.random.normal(keys[3], q.shape)
    got = jax.grad(lambda *a: jnp.sum(weights * flash.flash_attention(*a)), (0, 1, 2))(q, k, v)
    want = jax.grad(lambda *a: jnp.sum(weights * plain_attention(*a)), (0, 1, 2))(q, k, v)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, atol=1e-5)
