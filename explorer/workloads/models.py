"""Model-shaped workloads: a transformer block, a transformer train step with Adam, and a
mixture-of-experts layer, with logical dimension names on every tensor.

Tensor naming (what `--spec NAME=...` and the rules address):
- `transformer` (one pre-norm decoder block): `x`, `ln1`, `wq`, `wk`, `wv`, `wo`, `ln2`, `w1`,
  `w2`. Attention weights keep heads as a dimension: wq[embed, heads, kv], wo[heads, kv, embed].
- `transformer_train` (L blocks): inputs `tokens`, `targets`; params `embed`, `l{i}.ln1`,
  `l{i}.wq`, ..., `l{i}.w2`, `final_norm`, `unembed`; Adam state `m.<param>` and `v.<param>`.
  The step returns a flat dict with the same names (`out['l0.wq']`, `out['m.l0.wq']`, ...) plus
  `out['loss']`.
- `moe`: `x`, `router`, `wi`, `wo` (wi[experts, embed, mlp]).

Constraint points: places inside the program where a spec can be applied with
`jax.lax.with_sharding_constraint` (`analyze_workload(activations={...})`, `--activation`):
- `layer{i}`: the residual stream entering block i, [batch, seq, embed];
- `layer{i}.mid`: the residual stream after block i's attention, entering its MLP;
- `final`: the output of the last block;
- `grad.<param>` (train step): the gradient of a param, before the optimizer uses it;
- `hidden` (mlp, mlp_train): the MLP hidden activation [batch, mlp];
- `dispatch`, `expert_out` (moe): the expert buffers [experts, batch, capacity, embed].

Model functions are module-level and take their constraint table as a keyword argument of
plain data (`constraints=((name, spec entries), ...)`), so a bound function pickles by reference
and equal requests hit the cache.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping

from explorer.errors import WorkloadError
from explorer.spec.mesh import MeshSpec
from explorer.workloads.base import (
    BATCH,
    D_FF,
    D_HEAD,
    D_MODEL,
    HEADS,
    LAYERS,
    LR,
    SEQ,
    VOCAB,
    Point,
    Range,
    Workload,
)

# --- building blocks -------------------------------------------------------------------------

def constrain(x, constraints: Mapping, name: str):
    """Pin `x` to the spec the constraint table gives `name`; leave it free if there is none.

    A bare PartitionSpec is enough: the compile worker traces under `jax.set_mesh`."""
    if name not in constraints:
        return x
    import jax
    from jax.sharding import PartitionSpec

    with jax.named_scope(name):  # the op names of what this costs then carry the point's name
        return jax.lax.with_sharding_constraint(x, PartitionSpec(*constraints[name]))


def rms_norm(x, scale):
    import jax
    import jax.numpy as jnp

    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * scale


def attention(x, wq, wk, wv, wo, cons: Mapping = {}, point: str = ""):  # noqa: B006 (read only)
    """Causal multi-head attention; heads are a dimension of the weights: wq[embed, heads, kv].

    `point` names the constraint point of the per-head output, before the output projection."""
    import jax
    import jax.numpy as jnp

    q = jnp.einsum("bsd,dhk->bshk", x, wq)
    k = jnp.einsum("bsd,dhk->bshk", x, wk)
    v = jnp.einsum("bsd,dhk->bshk", x, wv)
    scores = jnp.einsum("bshk,bthk->bhst", q, k) / math.sqrt(wq.shape[-1])
    seq = x.shape[1]
    causal = jnp.tril(jnp.ones((seq, seq), dtype=bool))
    scores = jnp.where(causal, scores, jnp.finfo(scores.dtype).min)
    probs = jax.nn.softmax(scores, axis=-1)
    o = constrain(jnp.einsum("bhst,bthk->bshk", probs, v), cons, point)
    return jnp.einsum("bshk,hkd->bsd", o, wo)


def feed_forward(x, w1, w2, cons: Mapping = {}, point: str = ""):  # noqa: B006 (read only)
    import jax
    import jax.numpy as jnp

    h = constrain(jax.nn.gelu(jnp.einsum("bsd,df->bsf", x, w1)), cons, point)
    return jnp.einsum("bsf,fd->bsd", h, w2)


BLOCK_PARAMS = ("ln1", "wq", "wk", "wv", "wo", "ln2", "w1", "w2")


def block(x, w: Mapping, cons: Mapping, layer: int):
    """One pre-norm decoder block: x + attention(norm(x)), then + mlp(norm(.))."""
    x = constrain(x, cons, f"layer{layer}")
    h = x + attention(rms_norm(x, w["ln1"]), w["wq"], w["wk"], w["wv"], w["wo"], cons,
                      f"layer{layer}.heads")
    h = constrain(h, cons, f"layer{layer}.mid")
    return h + feed_forward(rms_norm(h, w["ln2"]), w["w1"], w["w2"], cons,
                            f"layer{layer}.hidden")


# --- transformer: one block, forward ---------------------------------------------------------

def transformer(x, ln1, wq, wk, wv, wo, ln2, w1, w2, *, constraints=()):
    cons = dict(constraints)
    w = dict(zip(BLOCK_PARAMS, (ln1, wq, wk, wv, wo, ln2, w1, w2), strict=True))
    return constrain(block(x, w, cons, 0), cons, "final")


def _block_shapes(p, prefix=""):
    d, h, k, f = p["d_model"], p["heads"], p["d_head"], p["d_ff"]
    return {f"{prefix}ln1": (d,), f"{prefix}wq": (d, h, k), f"{prefix}wk": (d, h, k),
            f"{prefix}wv": (d, h, k), f"{prefix}wo": (h, k, d), f"{prefix}ln2": (d,),
            f"{prefix}w1": (d, f), f"{prefix}w2": (f, d)}


def _block_logical(prefix=""):
    return {f"{prefix}ln1": ("embed",), f"{prefix}wq": ("embed", "heads", "kv"),
            f"{prefix}wk": ("embed", "heads", "kv"), f"{prefix}wv": ("embed", "heads", "kv"),
            f"{prefix}wo": ("heads", "kv", "embed"), f"{prefix}ln2": ("embed",),
            f"{prefix}w1": ("embed", "mlp"), f"{prefix}w2": ("mlp", "embed")}


_STREAM = ("batch", "seq", "embed")


def _stream_points(p, layers: int) -> dict[str, Point]:
    b, s, d = p["batch"], p["seq"], p["d_model"]
    out = {}
    for i in range(layers):
        out[f"layer{i}"] = Point((b, s, d), _STREAM, "act")
        out[f"layer{i}.heads"] = Point((b, s, p["heads"], p["d_head"]),
                                       ("batch", "seq", "heads", "kv"), "act")
        out[f"layer{i}.mid"] = Point((b, s, d), _STREAM, "act")
        out[f"layer{i}.hidden"] = Point((b, s, p["d_ff"]), ("batch", "seq", "mlp"), "act")
    out["final"] = Point((b, s, d), _STREAM, "act")
    return out


# Sizes where one attention weight (d_model·heads·d_head) is as big as the activation
# (batch·seq·d_model): the partitioner then moves activations, as the textbooks do, rather than
# weights (see docs/strategies.md, megatron_sp).
_BLOCK_BOUNDS = {"batch": BATCH, "seq": SEQ, "d_model": D_MODEL, "heads": HEADS,
                 "d_head": D_HEAD, "d_ff": D_FF}


def _scores(p) -> tuple[int, ...]:
    """The attention scores [batch, heads, seq, seq]: quadratic in seq, the largest
    intermediate at long context."""
    return (p["batch"], p["heads"], p["seq"], p["seq"])


_TRANSFORMER_DEFAULTS = {"batch": 8, "seq": 16, "d_model": 256, "heads": 8, "d_head": 32,
                         "d_ff": 1024, "dtype": "float32"}

TRANSFORMER = Workload(
    "transformer",
    "one pre-norm decoder block: causal multi-head attention (wq[embed,heads,kv]), then a "
    "gelu MLP, each with a residual",
    _TRANSFORMER_DEFAULTS,
    lambda p: {"x": (p["batch"], p["seq"], p["d_model"]), **_block_shapes(p)},
    lambda p: transformer,
    logical=lambda p: {"x": _STREAM, **_block_logical()},
    kinds=lambda p: {"x": "input"},
    points=lambda p: _stream_points(p, 1),
    bounds=_BLOCK_BOUNDS,
    intermediates=lambda p: {"scores": _scores(p)},
)


# --- transformer_train: embedding, L blocks, loss, backward, Adam ----------------------------

ADAM_B1, ADAM_B2, ADAM_EPS = 0.9, 0.999, 1e-8   # Kingma & Ba 2015, the paper's defaults


def _param_names(layers: int) -> tuple[str, ...]:
    names = ["embed"]
    for i in range(layers):
        names += [f"l{i}.{n}" for n in BLOCK_PARAMS]
    return (*names, "final_norm", "unembed")


def lm_loss(params: Mapping, tokens, targets, *, layers: int, cons: Mapping):
    """Mean next-token cross entropy of a decoder-only LM.

    The embedding is a one-hot matmul (Mesh-TensorFlow's and t5x's `one_hot` option) rather
    than a gather, so a vocab- or embed-sharded table partitions like any matmul."""
    import jax
    import jax.numpy as jnp

    vocab = params["embed"].shape[0]
    one_hot = jax.nn.one_hot(tokens, vocab, dtype=params["embed"].dtype)
    x = jnp.einsum("bsv,vd->bsd", one_hot, params["embed"])
    for i in range(layers):
        x = block(x, {n: params[f"l{i}.{n}"] for n in BLOCK_PARAMS}, cons, i)
    x = constrain(x, cons, "final")
    logits = jnp.einsum("bsd,dv->bsv", rms_norm(x, params["final_norm"]), params["unembed"])
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    return -jnp.mean(jnp.sum(logp * jax.nn.one_hot(targets, vocab), axis=-1))


def transformer_train(tokens, targets, *state, names: tuple[str, ...], layers: int, lr: float,
                      constraints=()):
    """One Adam step; `state` is the params, then m, then v, each in `names` order."""
    import jax
    import jax.numpy as jnp

    cons = dict(constraints)
    n = len(names)
    params = dict(zip(names, state[:n], strict=True))
    m = dict(zip(names, state[n:2 * n], strict=True))
    v = dict(zip(names, state[2 * n:], strict=True))
    loss, grads = jax.value_and_grad(functools.partial(lm_loss, layers=layers, cons=cons))(
        params, tokens, targets)
    out = {"loss": loss}
    for name in names:
        g = constrain(grads[name], cons, f"grad.{name}")
        m_new = ADAM_B1 * m[name] + (1 - ADAM_B1) * g
        v_new = ADAM_B2 * v[name] + (1 - ADAM_B2) * g * g
        p_new = params[name] - lr * m_new / (jnp.sqrt(v_new) + ADAM_EPS)
        # The new state keeps the layout its input had (the table holds the input specs).
        out[name] = constrain(p_new.astype(params[name].dtype), cons, name)
        out[f"m.{name}"] = constrain(m_new.astype(m[name].dtype), cons, f"m.{name}")
        out[f"v.{name}"] = constrain(v_new.astype(v[name].dtype), cons, f"v.{name}")
    return out


def _train_params(p) -> dict[str, tuple[int, ...]]:
    shapes = {"embed": (p["vocab"], p["d_model"])}
    for i in range(p["layers"]):
        shapes.update(_block_shapes(p, f"l{i}."))
    shapes["final_norm"] = (p["d_model"],)
    shapes["unembed"] = (p["d_model"], p["vocab"])
    return shapes


def _train_shapes(p):
    params = _train_params(p)
    tokens = (p["batch"], p["seq"])
    return {"tokens": tokens, "targets": tokens, **params,
            **{f"m.{n}": s for n, s in params.items()},
            **{f"v.{n}": s for n, s in params.items()}}


def _train_param_logical(p):
    logical = {"embed": ("vocab", "embed")}
    for i in range(p["layers"]):
        logical.update(_block_logical(f"l{i}."))
    logical["final_norm"] = ("embed",)
    logical["unembed"] = ("embed", "vocab")
    return logical


def _train_logical(p):
    params = _train_param_logical(p)
    return {"tokens": ("batch", "seq"), "targets": ("batch", "seq"), **params,
            **{f"m.{n}": d for n, d in params.items()},
            **{f"v.{n}": d for n, d in params.items()}}


def _train_kinds(p):
    names = _param_names(p["layers"])
    return {"tokens": "input", "targets": "input", **{f"m.{n}": "opt" for n in names},
            **{f"v.{n}": "opt" for n in names}}


def _train_points(p):
    points = _stream_points(p, p["layers"])
    shapes, logical = _train_params(p), _train_param_logical(p)
    points.update({f"grad.{n}": Point(shapes[n], logical[n], "grad") for n in shapes})
    return points


def _build_train(p):
    return functools.partial(transformer_train, names=_param_names(p["layers"]),
                             layers=p["layers"], lr=p["lr"])


TRANSFORMER_TRAIN = Workload(
    "transformer_train",
    "one Adam step of a decoder-only LM: one-hot embedding, `layers` transformer blocks, "
    "cross-entropy loss, backward, Adam update of params and state m, v",
    {"batch": 8, "seq": 32, "vocab": 256, "d_model": 64, "heads": 4, "d_head": 16, "d_ff": 256,
     "layers": 2, "lr": 1e-3, "dtype": "float32"},
    _train_shapes,
    _build_train,
    logical=_train_logical,
    kinds=_train_kinds,
    points=_train_points,
    dtypes=lambda p: {"tokens": "int32", "targets": "int32"},
    returns_state=True,
    bounds={**_BLOCK_BOUNDS, "vocab": VOCAB, "layers": LAYERS, "lr": LR},
    # The one-hot tokens and the logits are [batch, seq, vocab].
    intermediates=lambda p: {"scores": _scores(p), "logits": (p["batch"], p["seq"], p["vocab"])},
)


# --- moe: GShard/Switch top-k dispatch with capacity -----------------------------------------

def expert_capacity(p) -> int:
    """Tokens each expert takes per group: ceil(capacity_factor · top_k · seq / experts), the
    expert capacity of GShard (Lepikhin et al. 2020) and the Switch Transformer (Fedus et al.
    2021), counting each of a token's top_k choices."""
    return math.ceil(p["capacity_factor"] * p["top_k"] * p["seq"] / p["experts"])


def top_k_combine(probs, top_k: int, capacity: int):
    """GShard's combine tensor [group, seq, experts, capacity]: the gate weight of token s in
    slot c of expert e. Each token goes to its top_k experts in order of preference; a token
    whose expert buffer is full is dropped (its row is zero)."""
    import jax
    import jax.numpy as jnp

    experts = probs.shape[-1]
    remaining = probs
    filled = jnp.zeros(probs.shape[:1] + (1, experts), probs.dtype)  # slots used, per expert
    combine = jnp.zeros(probs.shape + (capacity,), probs.dtype)
    for _ in range(top_k):
        choice = jax.nn.one_hot(jnp.argmax(remaining, axis=-1), experts, dtype=probs.dtype)
        slot = jnp.cumsum(choice, axis=1) - 1 + filled          # position in the buffer
        keep = choice * (slot < capacity)
        filled = filled + jnp.sum(choice, axis=1, keepdims=True)
        gate = jnp.sum(probs * keep, axis=-1)                    # [group, seq]
        position = jnp.sum(slot * keep, axis=-1).astype(jnp.int32)
        combine = combine + (gate[..., None, None] * keep[..., None]
                             * jax.nn.one_hot(position, capacity, dtype=probs.dtype)[:, :, None])
        remaining = remaining * (1 - choice)
    return combine


def moe(x, router, wi, wo, *, top_k: int, capacity: int, constraints=()):
    """A mixture-of-experts MLP, einsum-based as in GShard: tokens [group, seq, embed] are
    dispatched into per-expert buffers [experts, group, capacity, embed], each expert applies its
    MLP, and the outputs are combined back with the gate weights."""
    import jax
    import jax.numpy as jnp

    cons = dict(constraints)
    x = constrain(x, cons, "layer0")
    logits = jnp.einsum("gsm,me->gse", x, router).astype(jnp.float32)
    combine = top_k_combine(jax.nn.softmax(logits, axis=-1), top_k, capacity)
    dispatch = (combine > 0).astype(x.dtype)
    # Each group fills its slice of every expert's buffer where its tokens are ...
    expert_in = constrain(jnp.einsum("gsec,gsm->egcm", dispatch, x), cons, "dispatch.groups")
    # ... then the buffers move to where their experts are: all-to-all when groups and experts
    # are split over the same mesh axis (GShard).
    expert_in = constrain(expert_in, cons, "dispatch")
    h = jax.nn.gelu(jnp.einsum("egcm,emh->egch", expert_in, wi))
    expert_out = constrain(jnp.einsum("egch,ehm->egcm", h, wo), cons, "expert_out")
    expert_out = constrain(expert_out, cons, "expert_out.groups")
    y = jnp.einsum("gsec,egcm->gsm", combine.astype(x.dtype), expert_out)
    return constrain(y, cons, "final")


def _moe_check(p, mesh: MeshSpec):
    if p["top_k"] > p["experts"]:
        raise WorkloadError(f"param top_k={p['top_k']} of workload 'moe' is more than "
                            f"experts={p['experts']}; choose top_k <= experts")


def _moe_points(p):
    buffers = (p["experts"], p["batch"], expert_capacity(p), p["d_model"])
    at_experts = ("experts", "batch", "capacity", "embed")
    # Where the tokens are, the experts dimension is whole: no rule splits it.
    at_groups = (None, "batch", "capacity", "embed")
    stream = (p["batch"], p["seq"], p["d_model"])
    return {"layer0": Point(stream, _STREAM, "act"),
            "dispatch.groups": Point(buffers, at_groups, "act"),
            "dispatch": Point(buffers, at_experts, "act"),
            "expert_out": Point(buffers, at_experts, "act"),
            "expert_out.groups": Point(buffers, at_groups, "act"),
            "final": Point(stream, _STREAM, "act")}


MOE = Workload(
    "moe",
    "a mixture-of-experts MLP: softmax router, top-k dispatch into per-expert buffers of "
    "ceil(capacity_factor·top_k·seq/experts) tokens per group, expert MLPs, weighted combine",
    {"batch": 8, "seq": 64, "d_model": 128, "d_ff": 256, "experts": 8, "top_k": 2,
     "capacity_factor": 1.25, "dtype": "float32"},
    lambda p: {"x": (p["batch"], p["seq"], p["d_model"]), "router": (p["d_model"], p["experts"]),
               "wi": (p["experts"], p["d_model"], p["d_ff"]),
               "wo": (p["experts"], p["d_ff"], p["d_model"])},
    lambda p: functools.partial(moe, top_k=p["top_k"], capacity=expert_capacity(p)),
    logical=lambda p: {"x": _STREAM, "router": ("embed", None),
                       "wi": ("experts", "embed", "mlp"), "wo": ("experts", "mlp", "embed")},
    check=_moe_check,
    info=lambda p: {"capacity": expert_capacity(p)},
    kinds=lambda p: {"x": "input"},
    points=_moe_points,
    bounds={"batch": BATCH, "seq": SEQ, "d_model": D_MODEL, "d_ff": D_FF,
            # 4096 experts: twice the Switch Transformer's largest (Fedus et al. 2021, 2048);
            # top_k is unrolled in the program; capacity_factor up to the most experts, so that
            # experts/top_k ("no token dropped") is always allowed.
            "experts": Range(1, 4096), "top_k": Range(1, 64),
            "capacity_factor": Range(0, 4096, low_open=True)},
    intermediates=lambda p: {
        "combine": (p["batch"], p["seq"], p["experts"], expert_capacity(p)),
        "expert_hidden": (p["experts"], p["batch"], expert_capacity(p), p["d_ff"])},
)
