"""Causal attention computed the way a flash-attention kernel computes it, in plain jax.

A flash kernel (Dao et al. 2022; FlashAttention-2, Dao 2023, Algorithms 1 and 2) never stores
the [seq, seq] scores: the forward pass walks over blocks of keys with an online softmax and
keeps, per query row, only the output and the log-sum-exp of its scores; the backward pass
walks over the key blocks again, recomputes each block's probabilities from the log-sum-exp
and accumulates the gradients. This module does the same with a `jax.lax.scan` over key blocks
and a `jax.custom_vjp`, so that the compiled program holds one block of scores at a time and
saves no scores for the backward pass: the compiler's memory decisions (what it keeps, what it
rematerialises) are then those of a program with a flash kernel. Its arithmetic is the
kernel's too: every block of the square in the forward pass, and in the backward pass the
scores again plus four matmuls per block (FlashAttention-2's backward recomputes them).

Its forward and backward passes run in a `fused_kernel_causal` named scope
(explorer/_src/hlo/schedule.py), so that the cost model times them as one on-chip kernel that skips
the blocks above the diagonal.
"""

from __future__ import annotations

import math

# Keys per block. MaxText's TPU flash attention uses blocks of 512 (MaxText/layers/attentions.py
# at 76bd53b0f: BlockSizes(block_q=min(512, seq), block_k=min(512, seq), ...)); a sequence that
# 512 does not divide is one block.
KEY_BLOCK = 512


def flash_attention(q, k, v):
    """Causal softmax(q·kᵀ/√d)·v. q [batch, seq, kv_heads, group, d_head]; k, v [batch, seq,
    kv_heads, d_head] (grouped-query attention: each key/value head serves `group` query
    heads). Returns [batch, seq, kv_heads, group, d_head] in q's dtype."""
    return _flash(q, k, v)


def _block(seq: int) -> int:
    return KEY_BLOCK if seq % KEY_BLOCK == 0 else seq


def _blocks(x, block: int):
    """[batch, seq, heads, d] -> [seq / block, batch, block, heads, d], the scan's axis first."""
    b, s = x.shape[:2]
    return x.reshape(b, s // block, block, *x.shape[2:]).swapaxes(0, 1)


def _scores(q, k_j, j, block: int):
    """One key block's scaled, causally masked scores in f32: [batch, kv, group, seq, block]."""
    import jax.numpy as jnp

    s = jnp.einsum("bsgrd,btgd->bgrst", q, k_j, preferred_element_type=jnp.float32)
    s = s / math.sqrt(q.shape[-1])
    seq = q.shape[1]
    keep = (j * block + jnp.arange(block))[None, :] <= jnp.arange(seq)[:, None]
    return jnp.where(keep, s, -jnp.inf)


def _forward(q, k, v):
    import jax
    import jax.numpy as jnp

    seq = q.shape[1]
    block = _block(seq)

    def first(k_j, v_j, j):
        """The running maxima, sums and output of the rows after key block j alone."""
        s = _scores(q, k_j, j, block)
        m = s.max(-1)
        p = jnp.exp(s - m[..., None])
        return m, p.sum(-1), jnp.einsum("bgrst,btgd->bgrsd", p.astype(v.dtype), v_j,
                                        preferred_element_type=jnp.float32)

    def step(carry, kv):
        m, total, acc = carry
        k_j, v_j, j = kv
        s = _scores(q, k_j, j, block)
        m_new = jnp.maximum(m, s.max(-1))
        p = jnp.exp(s - m_new[..., None])
        scale = jnp.exp(m - m_new)
        total = total * scale + p.sum(-1)
        acc = acc * scale[..., None] + jnp.einsum(
            "bgrst,btgd->bgrsd", p.astype(v.dtype), v_j, preferred_element_type=jnp.float32)
        return (m_new, total, acc), None

    # The rows start from key block 0, not from zeros: XLA fuses the zero broadcasts of every
    # layer's accumulator into one and so holds all of them, float32, at once (it would where
    # a remat policy recomputes the forward pass in the backward one). Block 0 holds key 0,
    # which every query sees, so each row's maximum is finite from there on.
    k_blocks, v_blocks = _blocks(k, block), _blocks(v, block)
    (m, total, acc), _ = jax.lax.scan(step, first(k_blocks[0], v_blocks[0], 0),
                                      (k_blocks[1:], v_blocks[1:], jnp.arange(1, seq // block)))
    o = (acc / total[..., None]).transpose(0, 3, 1, 2, 4).astype(q.dtype)   # [b, s, g, r, d]
    return o, m + jnp.log(total)


def _backward(q, k, v, o, lse, do):
    import jax
    import jax.numpy as jnp

    seq = q.shape[1]
    block = _block(seq)
    # D = rowsum(dO ∘ O): the softmax's correction term (FlashAttention-2, Algorithm 2, line 4).
    delta = jnp.einsum("bsgrd,bsgrd->bgrs", do.astype(jnp.float32), o.astype(jnp.float32))
    scale = 1 / math.sqrt(q.shape[-1])

    def block_grads(k_j, v_j, j):
        """Key block j's share of dQ (float32), and its dK and dV."""
        p = jnp.exp(_scores(q, k_j, j, block) - lse[..., None])
        dv_j = jnp.einsum("bgrst,bsgrd->btgd", p.astype(do.dtype), do,
                          preferred_element_type=jnp.float32)
        dp = jnp.einsum("bsgrd,btgd->bgrst", do, v_j, preferred_element_type=jnp.float32)
        ds = (p * (dp - delta[..., None]) * scale).astype(q.dtype)
        dq_j = jnp.einsum("bgrst,btgd->bsgrd", ds, k_j, preferred_element_type=jnp.float32)
        dk_j = jnp.einsum("bgrst,bsgrd->btgd", ds, q, preferred_element_type=jnp.float32)
        # A key block's dK and dV are whole once every query has been seen (this step): the
        # kernel writes them out in the inputs' dtype there (FlashAttention-2, Algorithm 2,
        # line 24), so the stacked blocks are never float32.
        return dq_j, dk_j.astype(k.dtype), dv_j.astype(v.dtype)

    def step(dq, kv):
        dq_j, dk_j, dv_j = block_grads(*kv)
        return dq + dq_j, (dk_j, dv_j)

    # dQ starts as block 0's share, not as zeros: XLA fuses the zero broadcasts of every
    # layer's accumulator into one and so holds all of them, float32, from before the first
    # layer's backward pass: one [batch, seq, heads, d_head] array a layer.
    k_blocks, v_blocks = _blocks(k, block), _blocks(v, block)
    dq, dk_0, dv_0 = block_grads(k_blocks[0], v_blocks[0], 0)
    dq, (dk, dv) = jax.lax.scan(step, dq, (k_blocks[1:], v_blocks[1:],
                                           jnp.arange(1, seq // block)))
    dk = jnp.concatenate([dk_0[None], dk])
    dv = jnp.concatenate([dv_0[None], dv])

    def unblock(x, like):   # [blocks, b, block, g, d] -> [b, seq, g, d]
        return x.swapaxes(0, 1).reshape(like.shape)

    return dq.astype(q.dtype), unblock(dk, k), unblock(dv, v)


def _make():
    import jax

    from explorer._src.hlo.schedule import CAUSAL_KERNEL_SCOPE

    @jax.custom_vjp
    def flash(q, k, v):
        with jax.named_scope(CAUSAL_KERNEL_SCOPE):
            return _forward(q, k, v)[0]

    def fwd(q, k, v):
        with jax.named_scope(CAUSAL_KERNEL_SCOPE):
            # The barrier makes the kernel's outputs what it writes: the output in q's dtype
            # and the float32 log-sum-exp. Without it XLA fuses the output's last division
            # and rounding into each reader, the backward pass's included, and so keeps the
            # float32 accumulator from the forward to the backward pass: a [batch, seq,
            # heads, d_head] float32 array a layer that no flash kernel holds.
            o, lse = jax.lax.optimization_barrier(_forward(q, k, v))
        return o, (q, k, v, o, lse)      # what a flash kernel keeps: no scores

    def bwd(res, do):
        with jax.named_scope(CAUSAL_KERNEL_SCOPE):
            # The kernel recomputes each block's scores from q and k. Without a barrier XLA
            # finds key block 0's scores the same expression as the forward pass's (both
            # outside their loops) and keeps the forward's, float32 [seq, block] a head and
            # layer, from one pass to the other: what a flash kernel never holds.
            res, do = jax.lax.optimization_barrier((res, do))
            # The same for the gradients: the kernel writes dQ, dK and dV in the inputs' dtype,
            # and XLA must not keep its float32 dQ accumulator for the rounding's readers.
            return jax.lax.optimization_barrier(_backward(*res, do))

    flash.defvjp(fwd, bwd)
    return flash


def _flash(q, k, v):
    global _FLASH
    if _FLASH is None:       # jax is imported on first use, in the compile worker
        _FLASH = _make()
    return _FLASH(q, k, v)


_FLASH = None
