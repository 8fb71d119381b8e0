"""Bring your own model: analyse a Flax NNX train step with sharding-explorer.

The explorer analyses any function of named tensors. A Flax NNX model becomes one in three steps:

1. `nnx.eval_shape` builds the model abstractly (nothing is allocated), and `nnx.split` separates
   its static structure (the graphdef) from its parameter pytree (the state).
2. Every parameter becomes an `explorer.TensorSpec` named by its path in the model
   (`blocks.0.up.kernel`), with a spec from logical-axis rules: each parameter kind gets logical
   dimension names (a Linear kernel of `up` is [embed, mlp]) and the rules map those names to
   mesh axes, as in flax's `logical_axis_rules` or MaxText.
3. The train step rebuilds the model from the graphdef and the parameter dict (`nnx.merge`), so
   the explorer compiles exactly what the model computes.

Run it:

    python examples/flax_nnx.py                                  # Megatron MLP on data=2,model=4
    python examples/flax_nnx.py --mesh data=8 --rules batch=data,embed=data   # FSDP-like
    python examples/flax_nnx.py --preset zero3 --mesh data=8     # a preset's rules, by kind

It prints the explorer's summary: each parameter's layout, the collectives the partitioner
inserted and which line of this file caused them.
"""

from __future__ import annotations

import argparse
import functools

import jax
import jax.numpy as jnp
from flax import nnx

import explorer


class Block(nnx.Module):
    """A pre-norm residual MLP block."""

    def __init__(self, d_model: int, d_ff: int, *, rngs: nnx.Rngs):
        self.norm = nnx.LayerNorm(d_model, rngs=rngs)
        self.up = nnx.Linear(d_model, d_ff, rngs=rngs)
        self.down = nnx.Linear(d_ff, d_model, rngs=rngs)

    def __call__(self, x):
        return x + self.down(jax.nn.gelu(self.up(self.norm(x))))


class Model(nnx.Module):
    def __init__(self, layers: int, d_model: int, d_ff: int, *, rngs: nnx.Rngs):
        self.blocks = nnx.List([Block(d_model, d_ff, rngs=rngs) for _ in range(layers)])

    def __call__(self, x):
        for block in self.blocks:
            x = block(x)
        return x


# Logical dimension names of each parameter, by the last two parts of its path.
LOGICAL = {
    ("norm", "scale"): ("embed",), ("norm", "bias"): ("embed",),
    ("up", "kernel"): ("embed", "mlp"), ("up", "bias"): ("mlp",),
    ("down", "kernel"): ("mlp", "embed"), ("down", "bias"): ("embed",),
}


def param_specs(state, rules: explorer.Rules) -> dict:
    """The parameter dict as a nested dict of TensorSpecs named by path, specs from `rules`."""
    table = rules.table("param")

    def spec(path, leaf):
        keys = tuple(str(getattr(k, "key", getattr(k, "idx", k))) for k in path)
        dims = LOGICAL[keys[-2:]]
        return explorer.TensorSpec(".".join(keys), leaf.shape, leaf.dtype,
                                   explorer.logical_spec(dims, table))

    return jax.tree_util.tree_map_with_path(spec, nnx.to_pure_dict(state))


def train_step(params, x, *, graphdef, lr):
    """One SGD step on mean(model(x)**2); returns the new parameter dict."""

    def loss(params):
        model = nnx.merge(graphdef, params)
        return jnp.mean(model(x) ** 2)

    grads = jax.grad(loss)(params)
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)


def main(argv: list[str] | None = None) -> explorer.Report:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mesh", default="data=2,model=4")
    ap.add_argument("--rules", default="batch=data,mlp=model",
                    help="logical-axis rules (default: data parallel + Megatron MLP)")
    ap.add_argument("--preset", help="use a preset's rules instead, e.g. zero3 or megatron")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--d-ff", type=int, default=1024)
    args = ap.parse_args(argv)

    mesh = explorer.parse_mesh(args.mesh)
    rules = (explorer.PRESETS[args.preset].rules_for(mesh) if args.preset
             else explorer.parse_rules(args.rules))
    rules.check_mesh(mesh)

    # 1. Abstract model: shapes and dtypes only.
    model = nnx.eval_shape(lambda: Model(args.layers, args.d_model, args.d_ff,
                                         rngs=nnx.Rngs(0)))
    graphdef, state = nnx.split(model)
    # 2. Named, laid-out inputs.
    params = param_specs(state, rules)
    x = explorer.TensorSpec("x", (args.batch, args.d_model), "float32",
                            explorer.logical_spec(("batch", "embed"), rules.table("input")))
    # 3. The step, bound to the graphdef (it travels to the compile worker by value).
    step = functools.partial(train_step, graphdef=graphdef, lr=0.1)
    report = explorer.analyze(step, params, x, mesh=mesh)
    print(f"rules {rules.text()}\n")
    print(explorer.summary(report))
    return report


if __name__ == "__main__":
    main()
