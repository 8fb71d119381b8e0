"""The flash-style attention of attention=fused against plain causal softmax attention: the same
values and the same gradients, with several key blocks and grouped-query heads."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from explorer._src.workloads import flash


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


@pytest.mark.slow
def test_in_bfloat16_the_kernel_writes_its_output_and_gradients_in_bfloat16(monkeypatch):
    # As a flash kernel does: float32 inside (scores, softmax sums, dQ's accumulator), the
    # output and dQ, dK, dV written in the inputs' dtype; the values as float32 attention's
    # within bfloat16's rounding (8 bits of mantissa: 2^-8 relative, a few of them summed).
    monkeypatch.setattr(flash, "KEY_BLOCK", 4)
    keys = jax.random.split(jax.random.PRNGKey(1), 4)
    q, k, v = (jax.random.normal(keys[0], (1, 16, 2, 2, 8)),
               jax.random.normal(keys[1], (1, 16, 2, 8)), jax.random.normal(keys[2], (1, 16, 2, 8)))
    weights = jax.random.normal(keys[3], q.shape)
    low = [a.astype(jnp.bfloat16) for a in (q, k, v)]
    out = flash.flash_attention(*low)
    assert out.dtype == jnp.bfloat16
    np.testing.assert_allclose(out.astype(jnp.float32), plain_attention(*low), atol=3e-2)
    got = jax.grad(lambda *a: jnp.sum(weights * flash.flash_attention(*a).astype(jnp.float32)),
                   (0, 1, 2))(*low)
    want = jax.grad(lambda *a: jnp.sum(weights * plain_attention(
        *(x.astype(jnp.float32) for x in a))), (0, 1, 2))(*low)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == jnp.bfloat16
        np.testing.assert_allclose(g.astype(jnp.float32), w, atol=0.1, rtol=0.05)
