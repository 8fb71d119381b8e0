"""Model-shaped workloads: a transformer block, a transformer train step with Adam, and a
mixture-of-experts layer, with logical dimension names on every tensor.

Tensor naming (what `--spec NAME=...` and the rules address):
- `transformer` (one pre-norm decoder block): `x`, `ln1`, `wq`, `wk`, `wv`, `wo`, `ln2`, `w1`,
  `w2`. Attention weights keep heads as a dimension: wq[embed, heads, kv], wo[heads, kv, embed].
- `transformer_train` (L blocks): inputs `tokens`, `targets`; params `embed`, the blocks'
  weights, `final_norm`, `unembed` (none with tied_embed=true); Adam state `m.<param>` and
  `v.<param>`. With scan_layers=true (the default, as MaxText) each block weight is stacked over
  the layers: `layers.wq` [layers, embed, heads, kv], logical dims ("layers", ...); with
  scan_layers=false there is one per layer: `l{i}.wq`. A block has `ln1`, `wq`, `wk`, `wv`
  (wk, wv [embed, kv_heads, kv]: grouped-query attention with kv_heads < heads), `wo`, `ln2`
  (not in a parallel block), `w1`, `w3` (swiglu only), `w2`. With experts=E > 0 (a routed
  mixture of experts, Mixtral- and MaxText-style) the block has a `router` [embed, E] (logical
  ("embed", None)) and the MLP weights gain the experts dimension: w1, w3 [E, embed, mlp], w2
  [E, mlp, embed], logical ("experts", ...). The step returns a flat dict with the same names
  (`out.layers.wq`, `out.m.layers.wq`, ...) plus `out.loss`.
- `moe`: `x`, `router`, `wi`, `wo` (wi[experts, embed, mlp]).

Constraint points: places inside the program where a spec can be applied with
`jax.lax.with_sharding_constraint` (`analyze_workload(activations={...})`, `--activation`):
- `layer{i}`: the residual stream entering block i, [batch, seq, embed];
- `layer{i}.heads`: block i's attention output per head, [batch, seq, heads, kv];
- `layer{i}.mid`: the residual stream after block i's attention, entering its MLP;
- `layer{i}.hidden`: block i's MLP hidden activation, [batch, seq, mlp];
- `layer`, `layer.heads`, `layer.mid`, `layer.hidden` (transformer_train with scan_layers=true):
  the same inside the scanned block, so one spec applies to every layer;
- `final`: the output of the last block;
- `grad.<param>` (train step): the gradient of a param, before the optimizer uses it;
- `hidden` (mlp, mlp_train): the MLP hidden activation [batch, mlp];
- `dispatch`, `expert_out` (moe): the expert buffers [experts, batch, capacity, embed], at the
  experts (`dispatch.groups`, `expert_out.groups`: the same buffers where the tokens are);
- `layer.dispatch`, ..., `layer.hidden` (transformer_train with experts > 0): the same inside a
  block, `hidden` then the experts' hidden activation [experts, batch, capacity, mlp].

Model functions are module-level and take their constraint table as a keyword argument of
plain data (`constraints=((name, spec entries), ...)`), so that equal requests are one program
(workloads/base.py: WorkloadProgram) and hit the caches.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass

from explorer._src.errors import WorkloadError
from explorer._src.spec.mesh import MeshSpec
from explorer._src.workloads.base import (
    BATCH,
    D_FF,
    D_HEAD,
    D_MODEL,
    DONATE_OPTIONS,
    DONATE_STATE,
    HEADS,
    LAYERS,
    LR,
    SEQ,
    VOCAB,
    ConstraintPoint,
    Range,
    TensorKind,
    Workload,
)
from explorer._src.workloads.flash import flash_attention

# --- building blocks -------------------------------------------------------------------------

def constrain(x, constraints: Mapping, name: str):
    """Pin `x` to the spec the constraint table gives `name`; leave it free if there is none.

    A bare PartitionSpec is enough: the program is traced under the request's abstract mesh
    (explorer/_src/compile/lowering.py), which names the axes."""
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


def attention(x, wq, wk, wv, wo, cons: Mapping = {}, point: str = "",  # noqa: B006 (read only)
              *, fused: bool = False, offload: bool = False):
    """Causal attention; heads are a dimension of the weights: wq[embed, heads, kv].

    Grouped-query attention (Ainslie et al. 2023, arXiv:2305.13245) when wk and wv have fewer
    heads than wq (wk[embed, kv_heads, kv]): query head h reads key/value head h // group, as
    Llama's `repeat_kv` does. `point` names the constraint point of the per-head output, before
    the output projection. `fused`: the core is computed as a flash-attention kernel computes
    it (explorer._src.workloads.flash: key blocks, no stored scores) in a `fused_kernel_causal`
    named scope, which the cost model times as one causal flash-attention kernel (no score
    traffic; half the square's FLOPs). `offload`: name the projections for the offloading
    remat policy (see OFFLOADED)."""
    import jax.numpy as jnp

    b, s = x.shape[:2]
    heads, kv_heads, d_head = wq.shape[1], wk.shape[1], wq.shape[2]
    q = _offloadable(jnp.einsum("bsd,dhk->bshk", x, wq), "query_proj", offload)
    k = _offloadable(jnp.einsum("bsd,dhk->bshk", x, wk), "key_proj", offload)
    v = _offloadable(jnp.einsum("bsd,dhk->bshk", x, wv), "value_proj", offload)
    if fused:
        o = flash_attention(q.reshape(b, s, kv_heads, heads // kv_heads, d_head), k, v)
        o = o.reshape(b, s, heads, d_head)
    else:
        o = _attention_core(q, k, v, s, heads, kv_heads, d_head)
    o = constrain(o, cons, point)
    return _offloadable(jnp.einsum("bshk,hkd->bsd", o, wo), "out_proj", offload)


def _attention_core(q, k, v, s: int, heads: int, kv_heads: int, d_head: int):
    import jax
    import jax.numpy as jnp

    b = q.shape[0]
    causal = jnp.tril(jnp.ones((s, s), dtype=bool))
    if kv_heads == heads:
        scores = jnp.einsum("bshk,bthk->bhst", q, k) / math.sqrt(d_head)
        scores = jnp.where(causal, scores, jnp.finfo(scores.dtype).min)
        probs = jax.nn.softmax(scores, axis=-1)
        o = jnp.einsum("bhst,bthk->bshk", probs, v)
    else:
        q = q.reshape(b, s, kv_heads, heads // kv_heads, d_head)
        scores = jnp.einsum("bsgrk,btgk->bgrst", q, k) / math.sqrt(d_head)
        scores = jnp.where(causal, scores, jnp.finfo(scores.dtype).min)
        probs = jax.nn.softmax(scores, axis=-1)
        o = jnp.einsum("bgrst,btgk->bsgrk", probs, v).reshape(b, s, heads, d_head)
    return o


MLPS = ("gelu", "relu", "swiglu")


def feed_forward(x, w1, w2, cons: Mapping = {}, point: str = "", *,  # noqa: B006 (read only)
                 mlp: str = "gelu", w3=None, offload: bool = False):
    """The MLP: act(x·w1)·w2 with gelu or relu, or SwiGLU (Shazeer 2020, arXiv:2002.05202),
    (silu(x·w1) ⊙ x·w3)·w2, as Llama and MaxText's ["silu", "linear"] compute it."""
    import jax
    import jax.numpy as jnp

    h = _offloadable(jnp.einsum("bsd,df->bsf", x, w1), "mlpwi_0", offload)
    if mlp == "swiglu":
        h = jax.nn.silu(h) * _offloadable(jnp.einsum("bsd,dg->bsg", x, w3), "mlpwi_1", offload)
    else:
        h = jax.nn.relu(h) if mlp == "relu" else jax.nn.gelu(h)
    h = constrain(h, cons, point)
    return _offloadable(jnp.einsum("bsf,fd->bsd", h, w2), "mlpwo", offload)


# The weight matmuls' outputs that offload=activations moves to host memory between the
# forward and the backward pass, under MaxText's names for them (its remat_policy
# "minimal_offloaded": what "minimal" saves, offloaded).
OFFLOADED = ("query_proj", "key_proj", "value_proj", "out_proj", "mlpwi_0", "mlpwi_1", "mlpwo")


def _offloadable(x, name: str, offload: bool):
    """`x` named for the offloading checkpoint policy; untouched when nothing is offloaded, so
    that the other programs stay as they were."""
    if not offload:
        return x
    from jax.ad_checkpoint import checkpoint_name

    return checkpoint_name(x, name)


@dataclass(frozen=True)
class Arch:
    """How the decoder blocks of a model are built. Plain data: a model function bound to one
    is equal to another bound to an equal Arch, so equal requests hit the caches."""

    mlp: str = "gelu"              # one of MLPS
    # "sequential": x + attn(norm1 x), then + mlp(norm2 ·) (GPT-2, Llama); "parallel": x +
    # attn(norm x) + mlp(norm x) with one norm (GPT-J, PaLM §2, MaxText's early default block).
    block: str = "sequential"
    compute_dtype: str = ""        # params are cast to it where they are used; "": as stored
    remat: str = "none"            # one of REMATS
    scan: bool = False             # the layers as one lax.scan over stacked weights
    tied: bool = False             # logits through the embedding table (no `unembed`)
    fused_attention: bool = False  # the attention core timed as one flash kernel (see attention)
    offload: str = "none"          # one of OFFLOADS: what lives in host memory
    # A routed mixture-of-experts MLP in place of the dense one where experts > 0 (Mixtral,
    # MaxText's num_experts): each token's top_k experts, buffers of `capacity` tokens per
    # group (a batch row) and expert (see routed_feed_forward).
    experts: int = 0
    top_k: int = 0
    capacity: int = 0

    def block_params(self) -> tuple[str, ...]:
        norms = ("ln2",) if self.block == "sequential" else ()
        mlp = ("w1", "w3", "w2") if self.mlp == "swiglu" else ("w1", "w2")
        router = ("router",) if self.experts else ()
        return ("ln1", "wq", "wk", "wv", "wo", *norms, *router, *mlp)


BLOCK_PARAMS = Arch().block_params()
BLOCKS = ("sequential", "parallel")
ATTENTIONS = ("plain", "fused")


def block(x, w: Mapping, cons: Mapping, point: str, arch: Arch = Arch()):  # noqa: B008 (frozen)
    """One pre-norm decoder block; `point` names its constraint points (`layer0`, or `layer`
    inside a scan, where one point applies to every layer)."""
    if arch.compute_dtype:
        w = {n: a.astype(arch.compute_dtype) for n, a in w.items()}
    x = constrain(x, cons, point)
    normed = rms_norm(x, w["ln1"])
    offload = arch.offload == "activations"
    h = x + attention(normed, w["wq"], w["wk"], w["wv"], w["wo"], cons, f"{point}.heads",
                      fused=arch.fused_attention, offload=offload)
    if arch.block == "sequential":
        h = constrain(h, cons, f"{point}.mid")
        normed = rms_norm(h, w["ln2"])
    if arch.experts:
        # Each batch row is one of GShard's groups: its tokens fill their own slots of every
        # expert's buffer, as MaxText's dropping MoE (moe.py, dense_matmul) groups them.
        return h + routed_feed_forward(normed, w["router"], w["w1"], w["w2"], cons,
                                       f"{point}.", top_k=arch.top_k, capacity=arch.capacity,
                                       mlp=arch.mlp, w3=w.get("w3"), offload=offload)
    return h + feed_forward(normed, w["w1"], w["w2"], cons, f"{point}.hidden", mlp=arch.mlp,
                            w3=w.get("w3"), offload=offload)


# --- transformer: one block, forward ---------------------------------------------------------

def transformer(x, ln1, wq, wk, wv, wo, ln2, w1, w2, *, constraints=()):
    cons = dict(constraints)
    w = dict(zip(BLOCK_PARAMS, (ln1, wq, wk, wv, wo, ln2, w1, w2), strict=True))
    return constrain(block(x, w, cons, "layer0"), cons, "final")


def _block_shapes(p, arch: Arch = Arch()) -> dict:  # noqa: B008 (frozen)
    d, h, k, f = p["d_model"], p["heads"], p["d_head"], p["d_ff"]
    g = p.get("kv_heads") or h
    shapes = {"ln1": (d,), "wq": (d, h, k), "wk": (d, g, k), "wv": (d, g, k), "wo": (h, k, d),
              "ln2": (d,), "w1": (d, f), "w3": (d, f), "w2": (f, d)}
    if arch.experts:
        e = arch.experts
        shapes.update({"router": (d, e), "w1": (e, d, f), "w3": (e, d, f), "w2": (e, f, d)})
    return {n: shapes[n] for n in arch.block_params()}


def _block_logical(arch: Arch = Arch(), kv_dim: str = "heads") -> dict:  # noqa: B008
    """Logical dims; `kv_dim` names the head dimension of wk and wv (`kv_heads` where the model
    can have fewer key/value heads than query heads)."""
    dims = {"ln1": ("embed",), "wq": ("embed", "heads", "kv"), "wk": ("embed", kv_dim, "kv"),
            "wv": ("embed", kv_dim, "kv"), "wo": ("heads", "kv", "embed"), "ln2": ("embed",),
            "w1": ("embed", "mlp"), "w3": ("embed", "mlp"), "w2": ("mlp", "embed")}
    if arch.experts:
        # As the `moe` workload's (and MaxText's moe.py: the gate's kernel_axes ("embed",
        # None)): the router's experts dimension is left whole, the experts' weights split
        # by the rules for `experts` (the `ep` preset: experts=expert).
        dims.update({"router": ("embed", None), "w1": ("experts", "embed", "mlp"),
                     "w3": ("experts", "embed", "mlp"), "w2": ("experts", "mlp", "embed")})
    return {n: dims[n] for n in arch.block_params()}


_STREAM = ("batch", "seq", "embed")


def _block_points(p, point: str, arch: Arch = Arch()) -> dict[str, ConstraintPoint]:  # noqa: B008
    b, s, d = p["batch"], p["seq"], p["d_model"]
    out = {point: ConstraintPoint((b, s, d), _STREAM, TensorKind.ACT),
           f"{point}.heads": ConstraintPoint((b, s, p["heads"], p["d_head"]),
                                   ("batch", "seq", "heads", "kv"), TensorKind.ACT)}
    if arch.block == "sequential":
        out[f"{point}.mid"] = ConstraintPoint((b, s, d), _STREAM, TensorKind.ACT)
    if arch.experts:
        out.update(_expert_points(arch.experts, b, arch.capacity, d, p["d_ff"], f"{point}."))
        return out
    out[f"{point}.hidden"] = ConstraintPoint((b, s, p["d_ff"]), ("batch", "seq", "mlp"),
                                             TensorKind.ACT)
    return out


def _expert_points(experts: int, batch: int, capacity: int, d_model: int, d_ff: int,
                   prefix: str = "") -> dict[str, ConstraintPoint]:
    """routed_feed_forward's constraint points, in program order; `hidden` only where asked
    (`d_ff`), as the `moe` workload has none."""
    buffers = (experts, batch, capacity, d_model)
    at_experts = ("experts", "batch", "capacity", "embed")
    # Where the tokens are, the experts dimension is whole: no rule splits it.
    at_groups = (None, "batch", "capacity", "embed")
    out = {f"{prefix}dispatch.groups": ConstraintPoint(buffers, at_groups, TensorKind.ACT),
           f"{prefix}dispatch": ConstraintPoint(buffers, at_experts, TensorKind.ACT)}
    if d_ff:
        out[f"{prefix}hidden"] = ConstraintPoint((experts, batch, capacity, d_ff),
                                                 ("experts", "batch", "capacity", "mlp"),
                                                 TensorKind.ACT)
    out.update({f"{prefix}expert_out": ConstraintPoint(buffers, at_experts, TensorKind.ACT),
                f"{prefix}expert_out.groups": ConstraintPoint(buffers, at_groups,
                                                              TensorKind.ACT)})
    return out


def _final_point(p) -> dict[str, ConstraintPoint]:
    return {"final": ConstraintPoint((p["batch"], p["seq"], p["d_model"]), _STREAM,
                                     TensorKind.ACT)}


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
    kinds=lambda p: {"x": TensorKind.INPUT},
    points=lambda p: {**_block_points(p, "layer0"), **_final_point(p)},
    bounds=_BLOCK_BOUNDS,
    intermediates=lambda p: {"scores": _scores(p)},
)


# --- transformer_train: embedding, L blocks, loss, backward, Adam ----------------------------

# The routed MLP's params (transformer_train's and moe's). 4096 experts: twice the Switch
# Transformer's largest (Fedus et al. 2021, 2048); top_k is unrolled in the program;
# capacity_factor up to the most experts, so that experts/top_k ("no token dropped") is always
# allowed.
EXPERTS = Range(1, 4096)
TOP_K = Range(1, 64)
CAPACITY_FACTOR = Range(0, 4096, low_open=True)


ADAM_B1, ADAM_B2, ADAM_EPS = 0.9, 0.999, 1e-8   # Kingma & Ba 2015, the paper's defaults

# Activation checkpointing, as MaxText's `remat_policy` names it: "full" keeps only each
# block's input and recomputes the block in the backward pass (jax.checkpoint with no policy);
# "minimal" saves the matmuls without batch dimensions (the weight matmuls) and recomputes the
# rest, attention scores included (jax.checkpoint_policies.checkpoint_dots_with_no_batch_dims,
# MaxText's "minimal").
REMATS = ("none", "minimal", "full")
# Host offload, as DeepSpeed's ZeRO-Offload keeps optimizer state in host memory and MaxText
# offloads saved activations: "opt_state" keeps Adam's m and v in pinned host memory (each step
# reads them over the host link, updates them on the device, writes them back); "activations"
# moves what remat=minimal saves (OFFLOADED) to host memory between the forward and the
# backward pass (jax.checkpoint_policies.save_and_offload_only_these_names).
OFFLOADS = ("none", "opt_state", "activations")
SAME = "same"
FLOAT_DTYPES = ("float32", "bfloat16", "float16")
FLAGS = ("true", "false")


def _checkpointed(fn, arch: Arch):
    import jax

    if arch.remat == "none":
        return fn
    if arch.offload == "activations":
        policy = jax.checkpoint_policies.save_and_offload_only_these_names(
            names_which_can_be_saved=[], names_which_can_be_offloaded=list(OFFLOADED),
            offload_src="device", offload_dst="pinned_host")
    else:
        policy = (jax.checkpoint_policies.checkpoint_dots_with_no_batch_dims
                  if arch.remat == "minimal" else None)
    # Inside a scan the loop boundary already keeps XLA from merging the recomputation into
    # the forward pass; unrolled, an optimization barrier does (jax's prevent_cse).
    return jax.checkpoint(fn, policy=policy, prevent_cse=not arch.scan)


def lm_loss(params: Mapping, tokens, targets, *, layers: int, arch: Arch, cons: Mapping):
    """Mean next-token cross entropy of a decoder-only LM.

    The embedding is a one-hot matmul (Mesh-TensorFlow's and t5x's `one_hot` option, MaxText's
    `use_iota_embed`) rather than a gather, so a vocab- or embed-sharded table partitions like
    any matmul. With `arch.scan` the blocks run as one jax.lax.scan over the stacked weights
    `layers.<name>` [layers, ...] (MaxText's scan_layers), so the compiled program has one copy
    of the block whatever the depth; otherwise they are unrolled, with weights `l{i}.<name>`."""
    import jax
    import jax.numpy as jnp

    dtype = arch.compute_dtype or params["embed"].dtype
    vocab = params["embed"].shape[0]
    table = params["embed"].astype(dtype)
    x = jnp.einsum("bsv,vd->bsd", jax.nn.one_hot(tokens, vocab, dtype=dtype), table)
    names = arch.block_params()

    def layer(x, w, point):
        return block(x, w, cons, point, arch)

    if arch.scan:
        body = _checkpointed(lambda x, w: (layer(x, w, "layer"), None), arch)
        x, _ = jax.lax.scan(body, x, {n: params[f"layers.{n}"] for n in names})
    else:
        for i in range(layers):
            run = _checkpointed(functools.partial(layer, point=f"layer{i}"), arch)
            x = run(x, {n: params[f"l{i}.{n}"] for n in names})
    x = rms_norm(constrain(x, cons, "final"), params["final_norm"].astype(dtype))
    if arch.tied:
        # The transposed table, scaled by 1/sqrt(embed) (MaxText's logits_via_embedding).
        logits = jnp.einsum("bsd,vd->bsv", x, table) / math.sqrt(x.shape[-1])
    else:
        logits = jnp.einsum("bsd,dv->bsv", x, params["unembed"].astype(dtype))
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    return -jnp.mean(jnp.sum(logp * jax.nn.one_hot(targets, vocab), axis=-1))


def transformer_train(tokens, targets, *state, names: tuple[str, ...], layers: int, lr: float,
                      arch: Arch = Arch(), constraints=()):  # noqa: B008 (frozen)
    """One Adam step; `state` is the params, then m, then v, each in `names` order."""
    import jax
    import jax.numpy as jnp

    cons = dict(constraints)
    n = len(names)
    params = dict(zip(names, state[:n], strict=True))
    m = dict(zip(names, state[n:2 * n], strict=True))
    v = dict(zip(names, state[2 * n:], strict=True))
    # Offloaded optimizer state is read into device memory where it is used and written back
    # to host memory (the inputs arrive there: Workload.memory_kinds).
    on_host = arch.offload == "opt_state"
    to_device = _mover(jax.memory.Space.Device if on_host else None)
    to_host = _mover(jax.memory.Space.Host if on_host else None)
    m, v = {k: to_device(a) for k, a in m.items()}, {k: to_device(a) for k, a in v.items()}
    loss, grads = jax.value_and_grad(
        functools.partial(lm_loss, layers=layers, arch=arch, cons=cons))(params, tokens, targets)
    out = {"loss": loss}
    for name in names:
        g = constrain(grads[name], cons, f"grad.{name}")
        # With float32 moments beside bfloat16 params (mixed precision) the update is computed
        # in float32 (jax's type promotion) and the new params are rounded to bfloat16.
        m_new = ADAM_B1 * m[name] + (1 - ADAM_B1) * g
        v_new = ADAM_B2 * v[name] + (1 - ADAM_B2) * g * g
        p_new = params[name] - lr * m_new / (jnp.sqrt(v_new) + ADAM_EPS)
        # The new state keeps the layout its input had (the table holds the input specs).
        out[name] = constrain(p_new.astype(params[name].dtype), cons, name)
        out[f"m.{name}"] = to_host(constrain(m_new.astype(m[name].dtype), cons, f"m.{name}"))
        out[f"v.{name}"] = to_host(constrain(v_new.astype(v[name].dtype), cons, f"v.{name}"))
    return out


def _mover(space):
    """x -> x moved to memory `space` (jax.device_put inside the program); the identity for
    None."""
    if space is None:
        return lambda x: x
    import jax

    return lambda x: jax.device_put(x, space)


def train_arch(p) -> Arch:
    """The Arch of transformer_train's params."""
    routed = {"experts": p["experts"], "top_k": p["top_k"],
              "capacity": expert_capacity(p)} if p["experts"] else {}
    return Arch(mlp=p["mlp"], block=p["block"],
                compute_dtype="" if p["compute_dtype"] == SAME else p["compute_dtype"],
                remat=p["remat"], scan=p["scan_layers"] == "true",
                tied=p["tied_embed"] == "true", fused_attention=p["attention"] == "fused",
                offload=p["offload"], **routed)


def _train_params(p) -> dict[str, tuple[int, ...]]:
    arch = train_arch(p)
    shapes = {"embed": (p["vocab"], p["d_model"])}
    block = _block_shapes(p, arch)
    if arch.scan:
        shapes.update({f"layers.{n}": (p["layers"], *s) for n, s in block.items()})
    else:
        for i in range(p["layers"]):
            shapes.update({f"l{i}.{n}": s for n, s in block.items()})
    shapes["final_norm"] = (p["d_model"],)
    if not arch.tied:
        shapes["unembed"] = (p["d_model"], p["vocab"])
    return shapes


def param_names(p) -> tuple[str, ...]:
    """transformer_train's parameter names, in argument order."""
    return tuple(_train_params(p))


def _train_shapes(p):
    params = _train_params(p)
    tokens = (p["batch"], p["seq"])
    return {"tokens": tokens, "targets": tokens, **params,
            **{f"m.{n}": s for n, s in params.items()},
            **{f"v.{n}": s for n, s in params.items()}}


def _train_param_logical(p):
    arch = train_arch(p)
    logical = {"embed": ("vocab", "embed")}
    block = _block_logical(arch, kv_dim="kv_heads")
    if arch.scan:
        logical.update({f"layers.{n}": ("layers", *d) for n, d in block.items()})
    else:
        for i in range(p["layers"]):
            logical.update({f"l{i}.{n}": d for n, d in block.items()})
    logical["final_norm"] = ("embed",)
    if not arch.tied:
        logical["unembed"] = ("embed", "vocab")
    return logical


def _train_logical(p):
    params = _train_param_logical(p)
    return {"tokens": ("batch", "seq"), "targets": ("batch", "seq"), **params,
            **{f"m.{n}": d for n, d in params.items()},
            **{f"v.{n}": d for n, d in params.items()}}


def _train_kinds(p):
    names = param_names(p)
    return {"tokens": TensorKind.INPUT, "targets": TensorKind.INPUT,
            **{f"{s}.{n}": TensorKind.OPT for s in ("m", "v") for n in names}}


def _train_dtypes(p):
    out = {"tokens": "int32", "targets": "int32"}
    if p["opt_dtype"] != SAME:
        out.update({f"{s}.{n}": p["opt_dtype"] for n in param_names(p) for s in ("m", "v")})
    return out


def _train_points(p):
    arch = train_arch(p)
    points: dict[str, ConstraintPoint] = {}
    for point in ["layer"] if arch.scan else [f"layer{i}" for i in range(p["layers"])]:
        points.update(_block_points(p, point, arch))
    points.update(_final_point(p))
    shapes, logical = _train_params(p), _train_param_logical(p)
    points.update({f"grad.{n}": ConstraintPoint(shapes[n], logical[n], TensorKind.GRAD)
                   for n in shapes})
    return points


def _train_memory_kinds(p) -> dict[str, str]:
    if p["offload"] != "opt_state":
        return {}
    return {f"{s}.{n}": "pinned_host" for n in param_names(p) for s in ("m", "v")}


def _train_check(p, mesh: MeshSpec) -> None:
    if p["offload"] == "activations" and p["remat"] != "minimal":
        raise WorkloadError(
            f"workload 'transformer_train': offload=activations with remat={p['remat']!r}; "
            "offloading moves what remat=minimal saves (the weight matmuls' outputs) to host "
            "memory, as MaxText's remat_policy=minimal_offloaded does: set remat=minimal, or "
            f"choose offload from {'|'.join(o for o in OFFLOADS if o != 'activations')}")
    if p["experts"] and p["top_k"] > p["experts"]:
        raise WorkloadError(f"param top_k={p['top_k']} of workload 'transformer_train' is more "
                            f"than experts={p['experts']}; choose top_k <= experts, or "
                            "experts=0 for a dense MLP")
    kv = p["kv_heads"] or p["heads"]
    if kv > p["heads"] or p["heads"] % kv:
        raise WorkloadError(
            f"workload 'transformer_train': kv_heads={p['kv_heads']} must divide heads="
            f"{p['heads']} (each key/value head serves heads/kv_heads query heads); use a "
            f"divisor of {p['heads']}, or 0 for as many as heads")


def _build_train(p):
    return functools.partial(transformer_train, names=param_names(p), layers=p["layers"],
                             lr=p["lr"], arch=train_arch(p))


TRANSFORMER_TRAIN = Workload(
    "transformer_train",
    "one Adam step of a decoder-only LM: one-hot embedding, `layers` transformer blocks (one "
    "lax.scan over stacked weights with scan_layers=true; a routed top-k mixture-of-experts MLP "
    "with experts > 0), cross-entropy loss, backward, Adam update of params and state m, v",
    {"batch": 8, "seq": 32, "vocab": 256, "d_model": 64, "heads": 4, "d_head": 16, "d_ff": 256,
     "layers": 2, "lr": 1e-3, "dtype": "float32",
     # 0: as many key/value heads as query heads (multi-head attention).
     "kv_heads": 0, "mlp": "gelu", "block": "sequential", "tied_embed": "false",
     "compute_dtype": SAME, "opt_dtype": SAME, "remat": "none", "scan_layers": "true",
     # "fused": compute the attention core as a flash kernel does (key blocks, no stored
     # scores) and time it as one on-chip causal kernel.
     "attention": "plain",
     # what lives in host memory: "opt_state" (Adam's m and v) or "activations" (saved by
     # remat=minimal), see OFFLOADS
     "offload": "none",
     # experts > 0: each block's MLP is a routed mixture of experts (Mixtral, MaxText's
     # num_experts / num_experts_per_tok / capacity_factor), as the `moe` workload routes;
     # 0: the dense MLP, and top_k and capacity_factor are not read.
     "experts": 0, "top_k": 2, "capacity_factor": 1.25, **DONATE_STATE},
    _train_shapes,
    _build_train,
    logical=_train_logical,
    kinds=_train_kinds,
    points=_train_points,
    dtypes=_train_dtypes,
    check=_train_check,
    returns_state=True,
    bounds={**_BLOCK_BOUNDS, "vocab": VOCAB, "layers": LAYERS, "lr": LR,
            "kv_heads": Range(0, HEADS.high), "experts": Range(0, EXPERTS.high),
            "top_k": TOP_K, "capacity_factor": CAPACITY_FACTOR},
    options={"mlp": MLPS, "block": BLOCKS, "tied_embed": FLAGS,
             "compute_dtype": (SAME, *FLOAT_DTYPES), "opt_dtype": (SAME, *FLOAT_DTYPES),
             "remat": REMATS, "scan_layers": FLAGS, "attention": ATTENTIONS,
             "offload": OFFLOADS, **DONATE_OPTIONS},
    memory_kinds=_train_memory_kinds,
    # The state is every input but the batch: the params, m and v, each returned updated
    # under its own name.
    donates=r"^(?!tokens$|targets$)",
    # The one-hot tokens and the logits are [batch, seq, vocab]; with experts, the routing's
    # combine tensor and the experts' hidden activations.
    intermediates=lambda p: {"scores": _scores(p), "logits": (p["batch"], p["seq"], p["vocab"]),
                             **(_expert_intermediates(p) if p["experts"] else {})},
)


# --- moe: GShard/Switch top-k dispatch with capacity -----------------------------------------

def _expert_intermediates(p) -> dict[str, tuple[int, ...]]:
    """The routing's combine tensor and the experts' hidden activations."""
    return {"combine": (p["batch"], p["seq"], p["experts"], expert_capacity(p)),
            "expert_hidden": (p["experts"], p["batch"], expert_capacity(p), p["d_ff"])}


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


def routed_feed_forward(x, router, wi, wo, cons: Mapping, prefix: str = "", *, top_k: int,
                        capacity: int, mlp: str = "gelu", w3=None, offload: bool = False):
    """A mixture-of-experts MLP, einsum-based as in GShard: tokens [group, seq, embed] are
    dispatched into per-expert buffers [experts, group, capacity, embed], each expert applies its
    MLP (wi[experts, embed, mlp], wo[experts, mlp, embed]; SwiGLU with w3 as `feed_forward`),
    and the outputs are combined back with the gate weights. `prefix` goes before the names of
    its constraint points (`dispatch`, ...): "" in the `moe` workload, "layer." in a block."""
    import jax
    import jax.numpy as jnp

    logits = jnp.einsum("gsm,me->gse", x, router).astype(jnp.float32)
    combine = top_k_combine(jax.nn.softmax(logits, axis=-1), top_k, capacity)
    dispatch = (combine > 0).astype(x.dtype)
    # Each group fills its slice of every expert's buffer where its tokens are ...
    expert_in = constrain(jnp.einsum("gsec,gsm->egcm", dispatch, x), cons,
                          f"{prefix}dispatch.groups")
    # ... then the buffers move to where their experts are: all-to-all when groups and experts
    # are split over the same mesh axis (GShard).
    expert_in = constrain(expert_in, cons, f"{prefix}dispatch")
    h = _offloadable(jnp.einsum("egcm,emh->egch", expert_in, wi), "mlpwi_0", offload)
    if mlp == "swiglu":
        h = jax.nn.silu(h) * _offloadable(jnp.einsum("egcm,emh->egch", expert_in, w3),
                                          "mlpwi_1", offload)
    else:
        h = jax.nn.relu(h) if mlp == "relu" else jax.nn.gelu(h)
    h = constrain(h, cons, f"{prefix}hidden")
    expert_out = _offloadable(jnp.einsum("egch,ehm->egcm", h, wo), "mlpwo", offload)
    expert_out = constrain(expert_out, cons, f"{prefix}expert_out")
    expert_out = constrain(expert_out, cons, f"{prefix}expert_out.groups")
    return jnp.einsum("gsec,egcm->gsm", combine.astype(x.dtype), expert_out)


def moe(x, router, wi, wo, *, top_k: int, capacity: int, constraints=()):
    """The `moe` workload: one routed_feed_forward, its input and output constraint points
    `layer0` and `final`."""
    cons = dict(constraints)
    x = constrain(x, cons, "layer0")
    y = routed_feed_forward(x, router, wi, wo, cons, top_k=top_k, capacity=capacity)
    return constrain(y, cons, "final")


def _moe_check(p, mesh: MeshSpec):
    if p["top_k"] > p["experts"]:
        raise WorkloadError(f"param top_k={p['top_k']} of workload 'moe' is more than "
                            f"experts={p['experts']}; choose top_k <= experts")


def _moe_points(p):
    stream = (p["batch"], p["seq"], p["d_model"])
    return {"layer0": ConstraintPoint(stream, _STREAM, TensorKind.ACT),
            **_expert_points(p["experts"], p["batch"], expert_capacity(p), p["d_model"], 0),
            "final": ConstraintPoint(stream, _STREAM, TensorKind.ACT)}


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
    kinds=lambda p: {"x": TensorKind.INPUT},
    points=_moe_points,
    bounds={"batch": BATCH, "seq": SEQ, "d_model": D_MODEL, "d_ff": D_FF,
            "experts": EXPERTS, "top_k": TOP_K, "capacity_factor": CAPACITY_FACTOR},
    intermediates=_expert_intermediates,
)
