"""A small LLM written the way model zoos write theirs, for tests/ui/test_model_zoo.py.

- The config caches the meshes the model runs on (so the model's GraphDef holds Devices).
- Activations are constrained through the legacy `with mesh:` context, read from
  `jax.interpreters.pxla.thread_resources`, as sharding helpers in model libraries do.
- The mixture-of-experts layer runs its experts in a shard_map over a mesh of its own (the
  config's expert mesh), not the mesh the rest of the model runs on.
- Parameters are placed by a table of (regex, PartitionSpec) pairs over '/'-joined paths with a
  final catch-all, and the embedding and activations use a tuple entry with a size-1 axis
  (`('fsdp', 'sp')`).

The tests trace it in their own process, as a notebook cell's code would be.
"""

from __future__ import annotations

import dataclasses
import re

import jax
import jax.numpy as jnp
from flax import nnx
from jax.interpreters import pxla
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P


@dataclasses.dataclass(frozen=True)
class Config:
    vocab: int = 512
    d_model: int = 64
    d_ff: int = 256
    layers: int = 2
    experts: int = 8
    mesh: Mesh | None = None
    expert_mesh: Mesh | None = None


# The library's partition rules, '/'-joined paths, the first match winning.
RULES = [
    (r"embed/embedding", P("tp", ("fsdp", "sp"))),
    (r"layers/\d+/mlp/up_proj/kernel", P(("fsdp", "sp"), "tp")),
    (r"layers/\d+/mlp/down_proj/kernel", P("tp", ("fsdp", "sp"))),
    (r"layers/\d+/moe/w_in", P("fsdp", None, "tp")),
    (".*", P()),
]
BATCH_SPEC = P(("fsdp", "sp"), None)


def constrain(x, *spec):
    """The library's sharding helper: the mesh comes from the legacy context."""
    mesh = pxla.thread_resources.env.physical_mesh
    assert not mesh.empty, "No mesh found under this context manager"
    return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, P(*spec)))


class Mlp(nnx.Module):
    def __init__(self, config: Config, rngs: nnx.Rngs):
        self.up_proj = nnx.Linear(config.d_model, config.d_ff, use_bias=False, rngs=rngs)
        self.down_proj = nnx.Linear(config.d_ff, config.d_model, use_bias=False, rngs=rngs)

    def __call__(self, x):
        h = jax.nn.gelu(self.up_proj(x))
        h = constrain(h, ("fsdp", "sp"), None, "tp")
        return self.down_proj(h)


class Moe(nnx.Module):
    """Every expert on every token (dense routing, for brevity), experts split over the
    config's expert mesh by a shard_map of its own."""

    def __init__(self, config: Config, rngs: nnx.Rngs):
        self.config = config
        init = nnx.initializers.lecun_normal()
        self.w_in = nnx.Param(init(rngs.params(), (config.experts, config.d_model,
                                                   config.d_model)))

    def __call__(self, x):
        mesh = self.config.expert_mesh

        def per_expert(w, x):            # w: this device's experts; x: every token
            return jax.lax.psum(jnp.einsum("btd,edf->btf", x, w), "expert")

        y = jax.shard_map(per_expert, mesh=mesh, in_specs=(P("expert"), P()),
                          out_specs=P())(self.w_in[...], x)
        return y / self.config.experts


class Layer(nnx.Module):
    def __init__(self, config: Config, rngs: nnx.Rngs):
        self.mlp = Mlp(config, rngs)
        self.moe = Moe(config, rngs)

    def __call__(self, x):
        x = x + self.mlp(x)
        return x + self.moe(x)


class Model(nnx.Module):
    def __init__(self, config: Config, rngs: nnx.Rngs):
        self.config = config
        self.embed = nnx.Embed(config.vocab, config.d_model, rngs=rngs)
        self.layers = nnx.List([Layer(config, rngs) for _ in range(config.layers)])

    def __call__(self, input_ids):
        x = constrain(self.embed(input_ids), ("fsdp", "sp"), None, None)
        for layer in self.layers:
            x = layer(x)
        return self.embed.attend(x)


def loss(model: Model, input_ids):
    logits = model(input_ids)
    return jnp.mean(jax.nn.log_softmax(logits.astype(jnp.float32)))


def spec_of(path: str):
    """The library's own placement of one '/'-joined parameter path."""
    return next(spec for pattern, spec in RULES if re.search(pattern, path))
