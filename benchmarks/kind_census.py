"""Which instruction kinds real models' steps spend their predicted time in, on a TPU v5e.

    .venv/bin/python benchmarks/kind_census.py [OUT.json [NAME ...]]
    .venv-maxtext/bin/python benchmarks/kind_census.py OUT.json maxtext-mixtral
    .venv-easydel/bin/python benchmarks/kind_census.py OUT.json easydel-llama

With NAMEs, only those programs are compiled again; the others keep their results in OUT.json.
Run with no NAMEs, the programs of libraries not installed fail and are recorded as failed: the
MaxText and EasyDeL programs run in their own environments (docs/from-maxtext.md,
docs/from-easydel.md), named on the command line.

Compiles programs written the way users and model libraries write them (a Llama-style train
step, its MoE variant, a Flax NNX train step, a Flax linen CNN train step, a KV-cache decode
step with sampling, an embedding-gradient step, Equinox's MNIST CNN example, and JAX's docs'
matmul and shard_map programs) for TPU v5e slices with libtpu (no chip needed), through the
public API (`explorer.analyze`, `explorer.analyze_workload`). For each, every compute event of the
predicted step (`Report.trace`) has a `TimeBasis`: its kind, and whether a chip measured that
kind. Prints, per kind: how many programs have it, its share of their compute time (mean and
largest), and whether it was measured; unmeasured kinds with the largest share come first. These
are the kinds worth measuring on the chip next (issue "Widen what the chip has measured").

The shares are of the *predicted* compute time: an unmeasured kind's share is the model's own
figure, which may be low by the kind's slowdown (its range's high end) - the reason it ranks first.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import explorer  # noqa: E402


@dataclass(frozen=True)
class Program:
    name: str
    what: str
    run: Callable[[], explorer.Report | None]


def _llama(moe: bool = False) -> explorer.Report | None:
    # A Llama-style decoder (swiglu, grouped-query attention, bf16 compute with fp32 state) at
    # 4 of its layers, on a v5e 2x4 slice, data x model.
    params = {"batch": 16, "seq": 1024, "vocab": 32000, "d_model": 2048, "heads": 16,
              "d_head": 128, "kv_heads": 4, "d_ff": 5632, "layers": 4, "mlp": "swiglu",
              "compute_dtype": "bfloat16", "remat": "full", "attention": "fused"}
    if moe:
        return explorer.analyze_workload(
            "moe", "expert=8", params={"batch": 16, "seq": 1024, "d_model": 2048,
                                             "d_ff": 5632, "experts": 8, "top_k": 2,
                                             "dtype": "bfloat16"},
            preset="ep", target="tpu-v5e-2x4", timeout=900)
    return explorer.analyze_workload("transformer_train", "data=2,model=4", params=params,
                                     preset="fsdp_tp", target="tpu-v5e-2x4",
                                     timeout=900)


def _decode() -> explorer.Report | None:
    # One decode step as serving code writes it: the new token's q/k/v, the KV cache updated in
    # place at the position, attention over the cache, the logits, top-k sampling.
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    layers, batch, heads, d_head, d_model, cache_len, vocab = 4, 32, 16, 128, 2048, 4096, 32000

    def step(params, cache_k, cache_v, token, pos, key):
        x = params["embed"][token]                                  # [batch, d_model]
        for i in range(layers):
            q = jnp.einsum("bd,dhk->bhk", x, params["wq"][i])
            k = jnp.einsum("bd,dhk->bhk", x, params["wk"][i])
            v = jnp.einsum("bd,dhk->bhk", x, params["wv"][i])
            cache_k = jax.lax.dynamic_update_slice(cache_k, k[None, :, None], (i, 0, pos, 0, 0))
            cache_v = jax.lax.dynamic_update_slice(cache_v, v[None, :, None], (i, 0, pos, 0, 0))
            s = jnp.einsum("bhk,bthk->bht", q, cache_k[i]) / jnp.sqrt(d_head).astype(x.dtype)
            s = jnp.where(jnp.arange(cache_len) <= pos, s, -1e30)
            a = jnp.einsum("bht,bthk->bhk", jax.nn.softmax(s.astype(jnp.float32),
                                                           axis=-1).astype(x.dtype), cache_v[i])
            x = x + jnp.einsum("bhk,hkd->bd", a, params["wo"][i])
        logits = (x @ params["embed"].T).astype(jnp.float32)
        top, idx = jax.lax.top_k(logits, 40)
        choice = jax.random.categorical(key, top)
        nxt = jnp.take_along_axis(idx, choice[:, None], axis=1)[:, 0]
        return nxt, cache_k, cache_v

    bf = jnp.bfloat16
    S = jax.ShapeDtypeStruct
    params = {"embed": S((vocab, d_model), bf),
              "wq": S((layers, d_model, heads, d_head), bf),
              "wk": S((layers, d_model, heads, d_head), bf),
              "wv": S((layers, d_model, heads, d_head), bf),
              "wo": S((layers, heads, d_head, d_model), bf)}
    cache = S((layers, batch, cache_len, heads, d_head), bf)
    return explorer.analyze(
        step, params, cache, cache, S((batch,), jnp.int32), S((), jnp.int32),
        jax.random.key(0), mesh="data=2,model=4", target="tpu-v5e-2x4",
        specs={r"params\.w[qkv]": P(None, None, "model", None),
               r"params\.wo": P(None, "model", None, None),
               r"cache_[kv]": P(None, "data", None, "model", None),
               r"token": P("data")},
        donate=("cache_k", "cache_v"))


def _embedding_grad() -> explorer.Report | None:
    # The gradient of a gathered embedding: XLA writes a scatter-add.
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    def loss(embed, w, tokens):
        h = embed[tokens]
        return jnp.mean((h @ w).astype(jnp.float32) ** 2)

    def step(embed, w, tokens):
        g_e, g_w = jax.grad(loss, argnums=(0, 1))(embed, w, tokens)
        return embed - 1e-3 * g_e, w - 1e-3 * g_w

    S = jax.ShapeDtypeStruct
    return explorer.analyze(step, S((32000, 2048), jnp.bfloat16), S((2048, 2048), jnp.bfloat16),
                            S((16, 1024), jnp.int32), mesh="data=8", target="tpu-v5e-2x4",
                            specs={"tokens": P("data", None)}, donate=("embed", "w"))


def _nnx() -> explorer.Report | None:
    # A Flax NNX LLM as model zoos write it (meshes in its config, activations constrained under
    # `with mesh:`, experts in a shard_map over a mesh of their own, regex partition rules): the
    # test suite's zoo model at a larger size, its loss and gradient.
    import jax
    import numpy as np
    from flax import nnx
    from jax.sharding import Mesh

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "_support"))
    import model_zoo as zoo

    devices = np.array(jax.devices()[:8])
    mesh = Mesh(devices.reshape(4, 1, 2), ("fsdp", "sp", "tp"))
    config = zoo.Config(vocab=32000, d_model=1024, d_ff=4096, layers=2, mesh=mesh,
                        expert_mesh=Mesh(devices, ("expert",)))
    model = nnx.eval_shape(lambda: zoo.Model(config, rngs=nnx.Rngs(0)))
    graphdef, state = nnx.split(model)
    params = jax.tree.map(lambda v: jax.ShapeDtypeStruct(v.shape, v.dtype),
                          nnx.to_pure_dict(state))

    def step(params, input_ids):
        return jax.value_and_grad(lambda p: zoo.loss(nnx.merge(graphdef, p), input_ids))(params)

    ids = explorer.TensorSpec("input_ids", (16, 512), "int32", spec=zoo.BATCH_SPEC)
    with mesh:          # the legacy context the zoo's constraint helpers read
        return explorer.analyze(step, params, ids, mesh="fsdp=4,sp=1,tp=2", specs=zoo.RULES,
                                target="tpu-v5e-2x4", timeout=900)


def _linen_cnn() -> explorer.Report | None:
    # Flax's MNIST example's CNN, one SGD train step.
    import flax.linen as nn
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    class CNN(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.relu(nn.Conv(32, (3, 3))(x))
            x = nn.avg_pool(x, (2, 2), (2, 2))
            x = nn.relu(nn.Conv(64, (3, 3))(x))
            x = nn.avg_pool(x, (2, 2), (2, 2))
            x = x.reshape((x.shape[0], -1))
            x = nn.relu(nn.Dense(256)(x))
            return nn.Dense(10)(x)

    model = CNN()
    images = jax.ShapeDtypeStruct((256, 28, 28, 1), jnp.float32)
    labels = jax.ShapeDtypeStruct((256,), jnp.int32)
    params = jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.zeros((1, 28, 28, 1))))

    def train_step(params, images, labels):
        def loss(p):
            logits = model.apply(p, images)
            one_hot = jax.nn.one_hot(labels, 10)
            return -jnp.mean(jnp.sum(one_hot * jax.nn.log_softmax(logits), axis=-1))
        g = jax.grad(loss)(params)
        return jax.tree.map(lambda p, g: p - 0.1 * g, params, g)

    return explorer.analyze(train_step, params, images, labels, mesh="data=8",
                            target="tpu-v5e-2x4", specs={"images": P("data"),
                                                         "labels": P("data")})


def _equinox_cnn() -> explorer.Report | None:
    # Equinox's "CNN on MNIST" example as its docs write it: a module of eqx.nn layers applied
    # per example under jax.vmap, the gradient of its arrays (eqx.partition), and optax's
    # AdamW, one train step.
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import optax
    from jax.sharding import PartitionSpec as P

    class CNN(eqx.Module):
        layers: list

        def __init__(self, key):
            k1, k2, k3, k4 = jax.random.split(key, 4)
            self.layers = [eqx.nn.Conv2d(1, 3, kernel_size=4, key=k1),
                           eqx.nn.MaxPool2d(kernel_size=2), jax.nn.relu, jnp.ravel,
                           eqx.nn.Linear(1728, 512, key=k2), jax.nn.sigmoid,
                           eqx.nn.Linear(512, 64, key=k3), jax.nn.relu,
                           eqx.nn.Linear(64, 10, key=k4), jax.nn.log_softmax]

        def __call__(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    # Built abstractly (no weights made): its arrays are ShapeDtypeStructs, which
    # eqx.is_array does not count, so they are split off by type.
    model = eqx.filter_eval_shape(CNN, jax.random.key(0))
    params, static = eqx.partition(model, lambda v: isinstance(v, jax.ShapeDtypeStruct))
    optim = optax.adamw(3e-4)
    opt_state = jax.eval_shape(optim.init, params)

    def train_step(params, opt_state, x, y):
        def loss(p):
            pred = jax.vmap(eqx.combine(p, static))(x)
            return -jnp.mean(jnp.take_along_axis(pred, y[:, None], axis=1))
        value, grads = jax.value_and_grad(loss)(params)
        updates, opt_state = optim.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    x = jax.ShapeDtypeStruct((256, 1, 28, 28), jnp.float32)
    y = jax.ShapeDtypeStruct((256,), jnp.int32)
    return explorer.analyze(train_step, params, opt_state, x, y, mesh="data=8",
                            target="tpu-v5e-2x4", specs={"^x$": P("data"), "^y$": P("data")})


def _docs_matmul() -> explorer.Report | None:
    # The "Distributed arrays" tutorial's sharded matmul with a tanh, as the docs call it.
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((4, 2), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    x = jax.ShapeDtypeStruct((8192, 8192), jnp.float32, sharding=NamedSharding(mesh, P("x", "y")))
    return explorer.analyze(lambda x: jnp.tanh(x @ x.T).sum(axis=0), x, target="tpu-v5e-2x4")


def _docs_shard_map() -> explorer.Report | None:
    # The shard_map tutorial's all-gather matmul, psum at the end.
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((8,), ("i",))

    @jax.jit
    def f(a, b):
        def local(a, b):
            return jax.lax.psum(a @ b, "i")
        return jax.shard_map(local, mesh=mesh, in_specs=(P(None, "i"), P("i", None)),
                             out_specs=P())(a, b)

    a = jax.ShapeDtypeStruct((4096, 8192), jnp.bfloat16, sharding=NamedSharding(mesh, P(None, "i")))
    b = jax.ShapeDtypeStruct((8192, 4096), jnp.bfloat16, sharding=NamedSharding(mesh, P("i", None)))
    return explorer.analyze(f, a, b, target="tpu-v5e-2x4")


def _examples():
    # examples/ holds the MaxText and EasyDeL programs as their users hand them over.
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples")
    if here not in sys.path:
        sys.path.insert(0, here)


def _maxtext() -> explorer.Report | None:
    # MaxText's own Mixtral-style MoE train step (examples/maxtext_model.py: its config, mesh,
    # logical-axis rules and AdamW step as train_compile.py builds them), for a v5e 2x4 slice.
    # Runs in docs/from-maxtext.md's environment (.venv-maxtext, Python 3.12).
    _examples()
    import jax
    from flax.linen.partitioning import axis_rules
    from maxtext_model import train_step

    config, mesh, step, args, _, _, out_shardings, _ = train_step()
    mesh_text = ",".join(f"{name}={size}" for name, size in mesh.shape.items())
    with jax.set_mesh(mesh), axis_rules(config.logical_axis_rules):
        return explorer.analyze(step, *args, mesh=mesh_text, target="tpu-v5e-2x4",
                                donate=[r"^model\.", r"^optimizer\."], out_specs=out_shardings,
                                timeout=900)


def _easydel() -> explorer.Report | None:
    # EasyDeL's own Llama and its Trainer's training_step (examples/easydel_model.py), on its
    # own 5-axis mesh, for a v5e 2x4 slice. Runs in docs/from-easydel.md's environment.
    _examples()
    import jax.numpy as jnp
    from easydel_model import DONATE, train_step

    mesh, _, step, args = train_step(jnp.bfloat16)
    return explorer.analyze(step, *args, mesh=mesh, donate=DONATE,
                            target="tpu-v5e-2x4", timeout=900)


PROGRAMS = (
    Program("llama-train", "transformer_train, Llama-style (swiglu, GQA, bf16), 4 layers", _llama),
    Program("moe", "moe workload, 8 experts top-2, bf16", lambda: _llama(moe=True)),
    Program("decode", "KV-cache decode step with top-k sampling, 4 layers", _decode),
    Program("embedding-grad", "gathered embedding's gradient (scatter-add)", _embedding_grad),
    Program("nnx-llm", "Flax NNX zoo-style LLM with a shard_map MoE, loss and gradient", _nnx),
    Program("linen-cnn", "Flax linen MNIST CNN, one SGD step", _linen_cnn),
    Program("equinox-cnn", "Equinox's MNIST CNN example, vmap, AdamW, one step", _equinox_cnn),
    Program("docs-matmul", "JAX docs: tanh(x @ x.T) on a 4x2 mesh", _docs_matmul),
    Program("docs-shard-map", "JAX docs: shard_map matmul with psum", _docs_shard_map),
    # In their libraries' own environments (Python 3.12): named on the command line there.
    Program("maxtext-mixtral", "MaxText's Mixtral-style MoE train step, its own config and mesh",
            _maxtext),
    Program("easydel-llama", "EasyDeL's Llama and its Trainer's training_step, bf16 compute",
            _easydel),
)


def census(report: explorer.Report) -> dict[str, dict]:
    """Per kind: its predicted compute seconds and whether a chip measured it."""
    kinds: dict[str, dict] = {}
    for e in report.trace.events if report.trace else ():
        if e.basis is None or e.duration <= 0:
            continue
        k = kinds.setdefault(e.basis.kind, {"seconds": 0.0, "measured": e.basis.measured,
                                            "slowdown": e.basis.slowdown, "count": 0})
        k["seconds"] += e.duration
        k["count"] += 1
    return kinds


def main() -> int:
    out = sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results/census-2026-12-07.json"
    only = set(sys.argv[2:])
    programs: dict[str, dict] = {}
    if only and os.path.exists(out):
        with open(out) as f:
            programs = {n: p for n, p in json.load(f)["programs"].items() if n not in only}
    for p in PROGRAMS:
        if only and p.name not in only:
            continue
        t0 = time.perf_counter()
        try:
            report = p.run()
        except Exception as err:  # noqa: BLE001 - a program that fails is reported, not hidden
            print(f"{p.name}: failed: {type(err).__name__}: {str(err)[:300]}", flush=True)
            programs[p.name] = {"what": p.what, "error": f"{type(err).__name__}: {err}"[:500]}
            continue
        kinds = census(report)
        total = sum(k["seconds"] for k in kinds.values()) or 1.0
        for k in kinds.values():
            k["share"] = k["seconds"] / total
        programs[p.name] = {"what": p.what, "compiler": report.compiler,
                            "backend": report.backend, "compute_seconds": total,
                            "kinds": kinds}
        print(f"{p.name}: {len(kinds)} kinds, compute {total * 1e3:.3f} ms "
              f"({report.compiler}, {time.perf_counter() - t0:.0f} s)", flush=True)
    rows: dict[str, dict] = {}
    for name, prog in programs.items():
        for kind, k in prog.get("kinds", {}).items():
            r = rows.setdefault(kind, {"measured": k["measured"], "slowdown": k["slowdown"],
                                       "programs": [], "shares": []})
            r["programs"].append(name)
            r["shares"].append(k["share"])
    ok = sum(1 for p in programs.values() if "kinds" in p)
    table = sorted(rows.items(), key=lambda kv: (kv[1]["measured"], -sum(kv[1]["shares"])))
    print(f"\n{'kind':44s} {'measured':9s} {'programs':>8s} {'mean share':>10s} "
          f"{'largest':>8s}")
    for kind, r in table:
        mean = sum(r["shares"]) / ok
        print(f"{kind[:44]:44s} {'yes' if r['measured'] else 'NO':9s} {len(r['programs']):8d} "
              f"{mean:10.1%} {max(r['shares']):8.1%}")
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out, "w") as f:
        json.dump({"programs": programs, "kinds": {k: {**r, "mean_share": sum(r["shares"]) / ok}
                                                   for k, r in table}}, f, indent=1)
    print(f"\nwritten: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
