"""The app on the user's own program: `explore(fn, *args)` for a function of TensorSpecs (as
explorer.analyze takes it), `explore_module(model, *inputs)` for a Flax NNX module.

Both return the app (explorer.ui.app.App): `.widget` is what a notebook cell displays (the app
itself displays too), `.report` the current Report. The sidebar edits the mesh, each input's
spec, the partitioner and the target; the workload picker and its params are replaced by the
function's name and its inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from explorer.errors import RuleError
from explorer.spec.mesh import parse_mesh
from explorer.ui.app import App
from explorer.ui.sources import FunctionSource


def explore(fn: Callable, *args, mesh="data=2,model=4", specs: Mapping | None = None,
            rules: str = "", target: str = "", mapping: str = "",
            partitioner: str = "shardy", debounce: float | None = 0.3, pool=None) -> App:
    """Open the app on `fn(*args)`; each arg is a TensorSpec or a pytree of them.

    specs: regular expression -> spec (`{r"up.*kernel": "None,model"}`), matched with
        re.search against the input names, the first match winning, as MaxText and t5x write
        partition rules; it overrides a TensorSpec's own spec.
    rules: logical-axis rules need logical dimension names, which a TensorSpec does not carry,
        so a plain function takes none (explore_module maps a Flax model's logical names).
    """
    source = FunctionSource(fn, args, specs=specs)
    if rules and not source.uses_rules:
        raise RuleError(f"rules={rules!r}: rules map logical dimension names to mesh axes, and "
                        "the TensorSpecs of a plain function carry none; give specs instead "
                        "(specs={pattern: spec}, or each TensorSpec's spec)")
    return App(source, mesh, partitioner=partitioner, target=target, mapping=mapping,
               rules=rules, debounce=debounce, pool=pool)


def explore_module(model, *inputs, mesh="data=2,model=4", specs: Mapping | None = None,
                   fn: Callable | None = None, rules: str = "", target: str = "",
                   mapping: str = "", partitioner: str = "shardy",
                   debounce: float | None = 0.3, pool=None) -> App:
    """Open the app on a Flax NNX module called on `inputs` (TensorSpecs or pytrees of them),
    or on `fn(model, *inputs)` (a train step, say) when given.

    The module's parameters become inputs named by their path (`layers.0.attn.q.kernel`),
    grouped in the sidebar by layer. specs: regular expression -> spec, first match wins, e.g.
    `{r"up.*kernel": "None,model", r"down.*kernel": "model,None"}`. A parameter made with
    `nnx.with_partitioning` keeps those names as its spec where they are mesh axes; where they
    are logical names (`embed`, `mlp`), `rules` (`"embed=data,mlp=model"`) map them.
    Build the model abstractly with `nnx.eval_shape(lambda: Model(..., rngs=nnx.Rngs(0)))` so
    that nothing is allocated.
    """
    from explorer.ui.module import module_source

    source = module_source(model, inputs, parse_mesh(mesh), specs=specs, fn=fn)
    return App(source, mesh, partitioner=partitioner, target=target, mapping=mapping,
               rules=rules, debounce=debounce, pool=pool)
