"""The app on the user's own program: `explore(fn, *args)` for a function of TensorSpecs (as
explorer.analyze takes it), `explore_module(model, *inputs)` for a Flax NNX module.

Both return the app (explorer._src.ui.app.App): `.widget` is what a notebook cell displays (the app
itself displays too), `.report` the current Report. The sidebar edits the mesh, each input's
spec, the partitioner and the target; the workload picker and its params are replaced by the
function's name and its inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from explorer._src.api.analysis_request import CompileForName, PartitionerName
from explorer._src.api.analyze import MeshLike, SpecPatterns
from explorer._src.api.mesh_source import is_concrete, is_jax_mesh, spec_of
from explorer._src.compile.caller_context import mesh_in_force
from explorer._src.compile.pool import WorkerPool
from explorer._src.errors import RuleError
from explorer._src.spec.mesh import parse_mesh
from explorer._src.ui.app import App
from explorer._src.ui.sources import FunctionSource

if TYPE_CHECKING:
    from flax import nnx


def explore(fn: Callable[..., Any], *args: Any, mesh: MeshLike = "data=2,model=4",
            specs: SpecPatterns | None = None, rules: str = "", target: str = "",
            mapping: str = "", partitioner: PartitionerName = "shardy",
            debounce: float | None = 0.3, pool: WorkerPool | None = None,
            compile_for: CompileForName = "target",
            timeout: float | None = None, out_specs: Any = None) -> App:
    """Open the app on `fn(*args)`, as explorer.analyze would compile it.

    Args:
        fn: the function, called as ``fn(*args)``.
        *args: each a TensorSpec or a pytree of them; the sidebar groups the inputs by
            argument and starts each at its TensorSpec's spec.
        mesh: the mesh the app opens with: text like ``"data=2,model=4"`` (an axis may name
            its type: ``"data=2:explicit,model=4"``), a mapping, a MeshSpec, or a
            ``jax.sharding.Mesh``, which keeps its axis types and is in force while `fn` is
            traced (jax.set_mesh and the legacy ``with mesh:``), as model libraries'
            constraint helpers read it.
        specs: partition rules, as MaxText, t5x and model zoos write them: regular
            expression -> spec (``{r"up.*kernel": "None,model"}``, or a sequence of
            ``(regex, spec)`` pairs), searched in the input names joined with '.' or '/', the
            first match winning; a spec a TensorSpec gives itself (one that splits a
            dimension) wins over them. A pattern that finds no input is named in the notes.
        rules: must be empty: logical-axis rules need logical dimension names, which a
            TensorSpec does not carry (explore_module maps a Flax model's logical names).
        target: the hardware target picked at first (see explorer.targets()); ``""`` for none.
        mapping: the mesh-to-hardware mapping text at first; ``""`` for the target's default.
        partitioner: ``"shardy"`` or ``"gspmd"`` (or an explorer.Partitioner).
        debounce: an edit made while a compile runs or waits compiles this many seconds
            after the last edit of its burst (the first edit compiles at once); None compiles
            every edit at once.
        pool: the WorkerPool that compiles; None for this process's shared one.
        compile_for: ``"target"`` compiles for a GPU or TPU target's hardware where its
            compiler is installed, ``"cpu"`` on fake CPU devices (the sidebar's "compile on
            CPU devices" box), as explorer.analyze takes it (or an explorer.CompileFor).
        timeout: the time limit of a compile in seconds (the sidebar's box); None for the
            target's default.
        out_specs: the layout the outputs must end in, as explorer.analyze (and jax.jit's
            ``out_shardings``) takes it.

    Returns:
        The app: ``.widget`` is what a notebook cell displays, ``.report`` the current Report.

    Raises:
        RuleError: `rules` given.
        ExplorerError: `fn` is not callable, or the inputs, specs or mesh are invalid (the
            errors explorer.analyze raises for them).
    """
    mesh, in_force = _mesh_given(mesh)
    # The source keeps the contexts in force where it is made (explorer/_src/compile/
    # caller_context.py): a jax Mesh given is in force at every trace, as analyze's is.
    with mesh_in_force(in_force):
        source = FunctionSource(fn, args, specs=specs, out_specs=out_specs)
        if rules and not source.uses_rules:
            raise RuleError(f"rules={rules!r}: rules map logical dimension names to mesh axes, "
                            "and the TensorSpecs of a plain function carry none; give specs "
                            "instead (specs={pattern: spec}, or each TensorSpec's spec)")
        return App(source, mesh, partitioner=partitioner, target=target, mapping=mapping,
                   rules=rules, debounce=debounce, pool=pool, compile_for=compile_for,
                   timeout=timeout)


def _mesh_given(mesh) -> tuple[Any, Any]:
    """(the mesh the app opens with, a jax Mesh to keep in force where the program is traced:
    the one given as mesh=, or None): a jax mesh opens as its axes, sizes and types."""
    if not is_jax_mesh(mesh):
        return mesh, None
    return spec_of(mesh), (mesh if is_concrete(mesh) else None)


def explore_module(model: nnx.Module, *inputs: Any, mesh: MeshLike = "data=2,model=4",
                   specs: SpecPatterns | None = None,
                   fn: Callable[..., Any] | None = None, rules: str = "", target: str = "",
                   mapping: str = "", partitioner: PartitionerName = "shardy",
                   debounce: float | None = 0.3, pool: WorkerPool | None = None,
                   compile_for: CompileForName = "target", timeout: float | None = None,
                   out_specs: Any = None) -> App:
    """Open the app on a Flax NNX module called on `inputs`, or on `fn(model, *inputs)`.

    The module's parameters become inputs named by their path (``layers.0.attn.q.kernel``),
    grouped in the sidebar by layer. A parameter made with ``nnx.with_partitioning`` keeps
    those names as its spec where they are mesh axes; where they are logical names (``embed``,
    ``mlp``), `rules` map them. Build the model abstractly with
    ``nnx.eval_shape(lambda: Model(..., rngs=nnx.Rngs(0)))`` so that nothing is allocated.

    Args:
        model: a flax.nnx.Module, best built with nnx.eval_shape.
        *inputs: TensorSpecs or pytrees of them, the module's (or `fn`'s) other arguments.
        specs: partition rules, regular expression -> spec (a mapping or a sequence of
            pairs), searched in the '.'- and '/'-joined parameter paths, first match wins,
            e.g. ``{r"up.*kernel": "None,model", r"down.*kernel": "model,None"}`` or
            ``[(r"layers/[0-9]+/mlp/down_proj/kernel", P("model", None)), (".*", P())]``; a spec
            from ``nnx.with_partitioning`` over mesh axes, or an input's own, wins.
        fn: called as ``fn(model, *inputs)`` (a train step, say) instead of the module itself.
        rules: logical-axis rules for the parameters' logical names, e.g.
            ``"embed=data,mlp=model"``.
        mesh, target, mapping, partitioner, debounce, pool, compile_for, timeout, out_specs:
            as explore takes them (a jax Mesh as `mesh` is in force while the program is
            traced: jax.set_mesh and the legacy ``with mesh:``).

    Returns:
        The app: ``.widget`` is what a notebook cell displays, ``.report`` the current Report.

    Raises:
        TensorError: `model` is not a flax.nnx.Module.
        ExplorerError: the inputs, specs, rules or mesh are invalid.
    """
    from explorer._src.ui.module import module_source

    mesh, in_force = _mesh_given(mesh)
    with mesh_in_force(in_force):
        source = module_source(model, inputs, parse_mesh(mesh), specs=specs, fn=fn,
                               out_specs=out_specs)
        return App(source, mesh, partitioner=partitioner, target=target, mapping=mapping,
                   rules=rules, debounce=debounce, pool=pool, compile_for=compile_for,
                   timeout=timeout)
