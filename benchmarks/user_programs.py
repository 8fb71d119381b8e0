"""Programs written in plain jax the way users write them, to hold the timing view against a chip.

Each `Program` is a function and the abstract arguments it is called with (ShapeDtypeStructs):
the explorer predicts it from those (`explorer.analyze(fn, *args, mesh="data=1",
target="tpu-v5e-1x1")`), and benchmarks/tpu_measure.py runs it on the chip with random data of
the same shapes. Nothing here imports the explorer, so the chip's machine needs only jax.

Sizes fit one TPU v5e chip (15.75 GiB) and run for milliseconds to hundreds of milliseconds;
`small=True` shrinks every one of them so the whole path can run on a CPU in seconds.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import lax

BF16 = jnp.bfloat16
F32 = jnp.float32


@dataclasses.dataclass(frozen=True)
class Program:
    name: str
    kind: str                 # compute, memory, attention, kernel: what bounds it, as written
    fn: Callable
    args: tuple               # pytrees of jax.ShapeDtypeStruct
    int_high: int = 2         # integer inputs are drawn from [0, int_high)
    tpu_only: bool = False    # a Mosaic kernel: compiles for TPU only


def sds(shape, dtype) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(tuple(shape), dtype)


# ------------------------------------------------------------------ a Llama-style decoder

def _rms(x, w):
    x32 = x.astype(F32)
    y = x32 * lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + 1e-6)
    return (y * w).astype(x.dtype)


def _layer(x, p, heads: int):
    b, s, d = x.shape
    h = _rms(x, p["attn_norm"])
    q = (h @ p["wq"]).reshape(b, s, heads, d // heads)
    k = (h @ p["wk"]).reshape(b, s, heads, d // heads)
    v = (h @ p["wv"]).reshape(b, s, heads, d // heads)
    a = jax.nn.dot_product_attention(q, k, v, is_causal=True).reshape(b, s, d)
    x = x + a @ p["wo"]
    h = _rms(x, p["mlp_norm"])
    return x + (jax.nn.silu(h @ p["w1"]) * (h @ p["w3"])) @ p["w2"]


def _layer_params(d: int, f: int, lead: tuple = ()) -> dict:
    return {"attn_norm": sds(lead + (d,), F32), "mlp_norm": sds(lead + (d,), F32),
            "wq": sds(lead + (d, d), BF16), "wk": sds(lead + (d, d), BF16),
            "wv": sds(lead + (d, d), BF16), "wo": sds(lead + (d, d), BF16),
            "w1": sds(lead + (d, f), BF16), "w3": sds(lead + (d, f), BF16),
            "w2": sds(lead + (f, d), BF16)}


def _xent(logits, labels):
    logp = jax.nn.log_softmax(logits.astype(F32), axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, labels[..., None], axis=-1))


def _llama(small: bool, scan: bool) -> Program:
    d, f, v, layers, heads, b, s = ((256, 512, 1000, 2, 2, 2, 128) if small else
                                    (2048, 5632, 32000, 4 if scan else 2, 16, 4, 2048))
    lead = (layers,) if scan else ()
    layer_params = _layer_params(d, f, lead)
    params = {"embed": sds((v, d), BF16), "final_norm": sds((d,), F32),
              "unembed": sds((d, v), BF16),
              "layers": layer_params if scan else [layer_params] * layers}

    def loss(params, tokens):
        x = params["embed"][tokens[:, :-1]]
        if scan:
            x, _ = lax.scan(lambda x, p: (_layer(x, p, heads), None), x, params["layers"])
        else:
            for p in params["layers"]:
                x = _layer(x, p, heads)
        logits = _rms(x, params["final_norm"]) @ params["unembed"]
        return _xent(logits, tokens[:, 1:])

    def train_step(params, tokens):
        value, grads = jax.value_and_grad(loss)(params, tokens)
        new = jax.tree.map(lambda p, g: (p - 1e-3 * g.astype(p.dtype)).astype(p.dtype),
                           params, grads)
        return new, value

    name = "llama_train_scan" if scan else "llama_train"
    return Program(name, "compute", train_step, (params, sds((b, s + 1), jnp.int32)),
                   int_high=v)


# ------------------------------------------------------------------ a ViT and a conv net

def _layernorm(x, scale, bias):
    x32 = x.astype(F32)
    mean = jnp.mean(x32, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x32 - mean), axis=-1, keepdims=True)
    return ((x32 - mean) * lax.rsqrt(var + 1e-6) * scale + bias).astype(x.dtype)


def _vit(small: bool) -> Program:
    b, img, patch, d, heads, layers, classes = ((4, 32, 8, 64, 2, 2, 10) if small else
                                                (64, 224, 16, 768, 12, 12, 1000))
    n = (img // patch) ** 2
    block = {"ln1_s": sds((d,), F32), "ln1_b": sds((d,), F32), "ln2_s": sds((d,), F32),
             "ln2_b": sds((d,), F32), "qkv": sds((d, 3 * d), BF16), "out": sds((d, d), BF16),
             "fc1": sds((d, 4 * d), BF16), "fc2": sds((4 * d, d), BF16)}
    params = {"patch": sds((patch * patch * 3, d), BF16), "pos": sds((n, d), BF16),
              "blocks": [block] * layers, "head": sds((d, classes), BF16)}

    def loss(params, images, labels):
        x = images.reshape(b, img // patch, patch, img // patch, patch, 3)
        x = x.transpose(0, 1, 3, 2, 4, 5).reshape(b, n, patch * patch * 3)
        x = x @ params["patch"] + params["pos"]
        for p in params["blocks"]:
            h = _layernorm(x, p["ln1_s"], p["ln1_b"])
            q, k, v = jnp.split((h @ p["qkv"]).reshape(b, n, 3 * heads, d // heads), 3, axis=2)
            x = x + jax.nn.dot_product_attention(q, k, v).reshape(b, n, d) @ p["out"]
            h = _layernorm(x, p["ln2_s"], p["ln2_b"])
            x = x + jax.nn.gelu(h @ p["fc1"]) @ p["fc2"]
        return _xent(jnp.mean(x, axis=1) @ params["head"], labels)

    def train_step(params, images, labels):
        value, grads = jax.value_and_grad(loss)(params, images, labels)
        return jax.tree.map(lambda p, g: p - 1e-3 * g, params, grads), value

    return Program("vit_train", "compute", train_step,
                   (params, sds((b, img, img, 3), BF16), sds((b,), jnp.int32)), int_high=classes)


def _convnet(small: bool) -> Program:
    b, img, widths, classes = ((2, 16, (8, 16), 10) if small else
                               (128, 64, (64, 128, 256, 512), 1000))
    params, cin = [], 3
    for w in widths:
        params.append(sds((3, 3, cin, w), BF16))
        cin = w
    params = {"convs": params, "head": sds((cin, classes), BF16)}

    def loss(params, images, labels):
        x = images
        for i, w in enumerate(params["convs"]):
            x = lax.conv_general_dilated(x, w, (1, 1) if i == 0 else (2, 2), "SAME",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
            x = jax.nn.relu(x)
        return _xent(jnp.mean(x, axis=(1, 2)) @ params["head"], labels)

    def train_step(params, images, labels):
        value, grads = jax.value_and_grad(loss)(params, images, labels)
        return jax.tree.map(lambda p, g: p - 1e-3 * g, params, grads), value

    return Program("convnet_train", "compute", train_step,
                   (params, sds((b, img, img, 3), BF16), sds((b,), jnp.int32)), int_high=classes)


# ------------------------------------------------------------------ an MoE layer, GShard-style

def _moe(small: bool) -> Program:
    t, d, e, f = (64, 32, 4, 64) if small else (4096, 1024, 8, 4096)
    capacity = int(2 * t / e * 1.25)
    params = {"gate": sds((d, e), F32), "w_in": sds((e, d, f), BF16),
              "w_out": sds((e, f, d), BF16)}

    def loss(params, x):
        probs = jax.nn.softmax(x.astype(F32) @ params["gate"], axis=-1)
        top_p, top_i = lax.top_k(probs, 2)
        onehot = jax.nn.one_hot(top_i, e, dtype=F32)                   # [t, 2, e]
        position = jnp.cumsum(onehot.reshape(2 * t, e), axis=0).reshape(t, 2, e) * onehot - 1
        keep = (position < capacity) & (onehot > 0)
        slot = jax.nn.one_hot(jnp.where(keep, position, -1).astype(jnp.int32), capacity)
        dispatch = jnp.sum(slot, axis=1).astype(BF16)                   # [t, e, c]
        combine = jnp.sum(slot * top_p[..., None, None], axis=1).astype(BF16)
        xs = jnp.einsum("td,tec->ecd", x, dispatch)
        h = jax.nn.gelu(jnp.einsum("ecd,edf->ecf", xs, params["w_in"]))
        ys = jnp.einsum("ecf,efd->ecd", h, params["w_out"])
        y = jnp.einsum("ecd,tec->td", ys, combine)
        return jnp.mean(jnp.square(y.astype(F32)))

    def train_step(params, x):
        value, grads = jax.value_and_grad(loss)(params, x)
        return jax.tree.map(lambda p, g: p - 1e-3 * g, params, grads), value

    return Program("moe_train", "compute", train_step, (params, sds((t, d), BF16)))


# ------------------------------------------------------------------ memory-bound programs

def _xent_vocab(small: bool) -> Program:
    t, d, v = (64, 32, 1000) if small else (4096, 2048, 128256)

    def step(h, w, labels):
        def loss(h, w):
            logits = jnp.dot(h, w, preferred_element_type=F32)
            return _xent(logits, labels)
        return jax.value_and_grad(loss, argnums=(0, 1))(h, w)

    return Program("xent_128k_vocab", "compute", step,
                   (sds((t, d), BF16), sds((d, v), BF16), sds((t,), jnp.int32)), int_high=v)


def _layernorm_chain(small: bool) -> Program:
    rows, d, n = (64, 128, 4) if small else (16384, 4096, 8)

    def chain(x, scales, biases):
        for i in range(n):
            x = jax.nn.gelu(_layernorm(x, scales[i], biases[i]))
        return x

    return Program("layernorm_chain", "memory", chain,
                   (sds((rows, d), F32), sds((n, d), F32), sds((n, d), F32)))


def _adamw(small: bool) -> Program:
    shapes = [(256, 256)] * 3 if small else [(8192, 8192), (8192, 4096), (32000, 2048)]
    tree = {f"w{i}": sds(s, F32) for i, s in enumerate(shapes)}

    def update(params, grads, mu, nu, step):
        b1, b2, lr, wd = 0.9, 0.95, 3e-4, 0.1
        mu = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, mu, grads)
        nu = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, nu, grads)
        c1, c2 = 1 - b1 ** step, 1 - b2 ** step
        params = jax.tree.map(
            lambda p, m, v: p - lr * ((m / c1) / (jnp.sqrt(v / c2) + 1e-8) + wd * p),
            params, mu, nu)
        return params, mu, nu

    return Program("adamw_update", "memory", update,
                   (tree, tree, tree, tree, sds((), F32)))


def _decode(small: bool) -> Program:
    b, cache, d, heads, kv, f = ((2, 64, 64, 4, 2, 128) if small else
                                 (16, 8192, 4096, 32, 8, 14336))
    hd = d // heads
    params = {"wq": sds((d, d), BF16), "wk": sds((d, kv * hd), BF16),
              "wv": sds((d, kv * hd), BF16), "wo": sds((d, d), BF16),
              "w1": sds((d, f), BF16), "w3": sds((d, f), BF16), "w2": sds((f, d), BF16)}

    def decode(params, x, k_cache, v_cache, pos):
        q = (x @ params["wq"]).reshape(b, heads, hd)
        k = (x @ params["wk"]).reshape(b, 1, kv, hd)
        v = (x @ params["wv"]).reshape(b, 1, kv, hd)
        k_cache = lax.dynamic_update_slice(k_cache, k, (0, pos, 0, 0))
        v_cache = lax.dynamic_update_slice(v_cache, v, (0, pos, 0, 0))
        q = q.reshape(b, kv, heads // kv, hd)
        s = jnp.einsum("bkgd,bskd->bkgs", q, k_cache).astype(F32) / math.sqrt(hd)
        s = jnp.where(jnp.arange(cache) <= pos, s, -1e30)
        a = jnp.einsum("bkgs,bskd->bkgd", jax.nn.softmax(s, axis=-1).astype(BF16), v_cache)
        x = x + a.reshape(b, d) @ params["wo"]
        x = x + (jax.nn.silu(x @ params["w1"]) * (x @ params["w3"])) @ params["w2"]
        return x, k_cache, v_cache

    kv_cache = sds((b, cache, kv, hd), BF16)
    return Program("decode_step", "memory", decode,
                   (params, sds((b, d), BF16), kv_cache, kv_cache, sds((), jnp.int32)),
                   int_high=cache)


def _embed_grad(small: bool) -> Program:
    v, d, b, s = (1000, 32, 2, 64) if small else (128256, 2048, 8, 4096)

    def grad(table, ids, dy):
        return jax.grad(lambda t: jnp.sum(t[ids].astype(F32) * dy))(table)

    return Program("embedding_grad", "memory", grad,
                   (sds((v, d), BF16), sds((b, s), jnp.int32), sds((b, s, d), F32)), int_high=v)


# ------------------------------------------------------------------ attention, three ways

def _attn_shapes(small: bool, batch: int, seq: int, heads: int):
    b, s, h, hd = (1, 128, 2, 32) if small else (batch, seq, heads, 128)
    return b, s, h, hd


def _dpa(small: bool) -> Program:
    b, s, h, hd = _attn_shapes(small, 4, 4096, 16)
    qkv = sds((b, s, h, hd), BF16)
    return Program("dot_product_attention", "attention",
                   lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=True),
                   (qkv, qkv, qkv))


def _causal(small: bool, softmax_dtype) -> Program:
    b, s, h, hd = _attn_shapes(small, 2, 8192, 8)

    def attention(q, k, v):
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(softmax_dtype) / math.sqrt(hd)
        mask = jnp.tril(jnp.ones((s, s), bool))
        probs = jax.nn.softmax(jnp.where(mask, scores, -1e9), axis=-1).astype(BF16)
        return jnp.einsum("bhqk,bkhd->bqhd", probs, v)

    qkv = sds((b, s, h, hd), BF16)
    name = "causal_attention_" + jnp.dtype(softmax_dtype).name + "_softmax"
    return Program(name, "attention", attention, (qkv, qkv, qkv))


def _pallas_flash(small: bool) -> Program:
    b, s, h, hd = _attn_shapes(small, 4, 4096, 16)

    def attention(q, k, v):
        from jax.experimental.pallas.ops.tpu.flash_attention import flash_attention
        return flash_attention(q, k, v, causal=True, sm_scale=1 / math.sqrt(hd))

    qkv = sds((b, h, s, hd), BF16)
    return Program("pallas_flash_attention", "kernel", attention, (qkv, qkv, qkv),
                   tpu_only=True)


# ------------------------------------------------------------------ plain matrix work

def _mlp_f32(small: bool) -> Program:
    t, d, f = (64, 64, 256) if small else (8192, 4096, 16384)
    return Program("mlp_f32", "compute",
                   lambda x, w1, w2: jax.nn.gelu(x @ w1) @ w2,
                   (sds((t, d), F32), sds((d, f), F32), sds((f, d), F32)))


def _matmul_bf16(small: bool) -> Program:
    n = 128 if small else 8192
    return Program("matmul_bf16_8192", "compute", lambda a, b: a @ b,
                   (sds((n, n), BF16), sds((n, n), BF16)))


BUILDERS = (
    lambda small: _llama(small, scan=False), lambda small: _llama(small, scan=True),
    _vit, _convnet, _moe, _xent_vocab, _layernorm_chain, _adamw, _decode, _embed_grad, _dpa,
    lambda small: _causal(small, F32), lambda small: _causal(small, BF16), _pallas_flash,
    _mlp_f32, _matmul_bf16,
)


def programs(small: bool = False) -> list[Program]:
    """Every program, at chip sizes or (small) at sizes a CPU runs in seconds."""
    return [build(small) for build in BUILDERS]
