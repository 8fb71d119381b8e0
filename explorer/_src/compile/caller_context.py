"""The contexts a user's function is traced under, kept for a trace that happens later.

A function handed to the app (`explore`), to a Session or to a search is traced again at every
edit, on a widget callback or a search's thread, long after the `with` blocks it was handed over
in have closed, and elsewhere than the thread that entered them. Its meaning may depend on them:
flax's `logical_axis_rules` (without which every `nn.with_logical_constraint` is dropped), jax's
`default_matmul_precision`, `jax.set_mesh`, the legacy `with mesh:`. So they are captured where
the function is handed over (`bind_context`) and entered again around each trace
(explorer/_src/compile/lowering.py):
- every jax config state set for this thread (the thread-local value a `with
  jax.default_matmul_precision(...)` block sets);
- the mesh of `jax.set_mesh` (or `jax.sharding.use_abstract_mesh`);
- the legacy `with mesh:` mesh;
- flax linen's logical axis rules, where flax is imported.

A function called at once (`explorer.analyze(fn, ...)`) is traced in the caller's own thread,
inside the caller's blocks, and needs none of this.
"""

from __future__ import annotations

import functools
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CallerContext:
    """What was in force where a function was handed over (see the module doc)."""

    config: tuple[tuple[str, Any], ...] = ()     # jax config states set for the thread
    mesh: Any = None                             # jax.set_mesh's Mesh (or AbstractMesh)
    legacy_mesh: Any = None                      # the `with mesh:` Mesh, if one was entered
    axis_rules: tuple = ()                       # flax linen's logical axis rules

    @classmethod
    def here(cls) -> CallerContext:
        """The contexts in force in this thread now: none where jax is not imported yet (no
        context of jax's, nor flax's, which imports it, can have been entered)."""
        if "jax" not in sys.modules:
            return cls()
        import jax

        from explorer._src.compile import jax_private

        concrete, abstract = jax.sharding.get_mesh(), jax.sharding.get_abstract_mesh()
        mesh = concrete if not concrete.empty else abstract if not abstract.empty else None
        return cls(config=jax_private.thread_config(), mesh=mesh,
                   legacy_mesh=jax_private.legacy_context_mesh(),
                   axis_rules=_flax_axis_rules())

    @property
    def empty(self) -> bool:
        return not (self.config or self.mesh is not None or self.legacy_mesh is not None
                    or self.axis_rules)

    @contextmanager
    def entered(self) -> Iterator[None]:
        """These contexts, entered again (in this thread) for the duration of the block."""
        import jax

        from explorer._src.compile import jax_private

        with ExitStack() as stack:
            for name, value in self.config:
                stack.enter_context(jax_private.config_context(name, value))
            if isinstance(self.mesh, jax.sharding.Mesh):
                stack.enter_context(jax.set_mesh(self.mesh))
            elif self.mesh is not None:
                stack.enter_context(jax.sharding.use_abstract_mesh(self.mesh))
            if self.legacy_mesh is not None:
                stack.enter_context(legacy_mesh(self.legacy_mesh))
            if self.axis_rules:
                from flax.linen import partitioning

                stack.enter_context(partitioning.axis_rules(self.axis_rules))
            yield


@contextmanager
def legacy_mesh(mesh) -> Iterator[None]:
    """The legacy `with mesh:` context, which model libraries' sharding helpers still read
    (`jax.interpreters.pxla.thread_resources.env.physical_mesh`); entered on their behalf, so
    jax's deprecation warning of it is not the user's."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*`with mesh:` context manager",
                                category=DeprecationWarning)
        with mesh:
            yield


@contextmanager
def mesh_in_force(mesh) -> Iterator[None]:
    """A jax Mesh in force in both forms libraries read: `jax.set_mesh` (what jax's own
    shard_map and sharding-in-types read) and the legacy `with mesh:` (what model libraries'
    constraint helpers read, EasyDeL's among them); nothing for None."""
    if mesh is None:
        yield
        return
    import jax

    with jax.set_mesh(mesh), legacy_mesh(mesh):
        yield


def _flax_axis_rules() -> tuple:
    """flax linen's logical axis rules in force, where flax is imported (never imported here:
    a caller that has not imported it has set none)."""
    if "flax.linen" not in sys.modules:
        return ()
    from flax.linen import partitioning

    return tuple(partitioning.get_axis_rules() or ())


class BoundToContext:
    """`fn` with the contexts in force where it was handed over (`context`), which every later
    trace of it enters (explorer/_src/compile/lowering.py). Called directly, it is `fn`; it has
    `fn`'s name, signature and docs (functools.update_wrapper)."""

    def __init__(self, fn: Callable[..., Any], context: CallerContext):
        functools.update_wrapper(self, fn)
        self.fn, self.caller_context = fn, context

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return repr(self.fn)

    def __eq__(self, other) -> bool:
        # Two handovers of one function under the same contexts are the same program.
        return (isinstance(other, BoundToContext) and self.fn == other.fn
                and self.caller_context == other.caller_context)

    def __hash__(self) -> int:
        return hash(self.fn)


def bind_context(fn: Callable[..., Any], context: CallerContext | None = None
                 ) -> Callable[..., Any]:
    """`fn` bound to `context` (by default the contexts in force here now), for the traces of
    it that happen later (an edit in the app, a search's thread); `fn` itself where the context
    is empty, or where it, or a function it wraps, is bound already (a search's flat call
    around the app's function keeps the app's contexts)."""
    if context_of(fn) is not None:
        return fn
    context = CallerContext.here() if context is None else context
    return fn if context.empty else BoundToContext(fn, context)


# How deep `context_of` looks through wrappers: a flat call around a partial around a bound
# function is three.
_WRAPPED_DEPTH = 8


def context_of(fn: Callable[..., Any]) -> CallerContext | None:
    """The contexts `fn` was bound to, or a function it wraps (a FlatCall's or a
    BoundToContext's `fn`, a functools.partial's `func`); None where none was bound."""
    for _ in range(_WRAPPED_DEPTH):
        if isinstance(fn, BoundToContext):
            return fn.caller_context
        inner = getattr(fn, "fn", None) or getattr(fn, "func", None)
        if inner is None or not callable(inner):
            return None
        fn = inner
    return None
