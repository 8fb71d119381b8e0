"""The search space: mesh shapes, and on each one the rule tables or per-tensor specs to try.

Two kinds of space, both over the axes of the mesh the user named:

- rules: each searched logical name (`batch`, `embed`, `mlp`, ...) is mapped to one mesh axis or
  to none; the names' order is the rules' priority (flax's `logical_to_mesh_axes`: a name whose
  axis an earlier name of the same tensor took gets none). The candidate is that rule table,
  applied by `explorer.analyze_workload(rules=...)` to every input and constraint point. With
  |A| mesh axes of size > 1 and N names this is (|A|+1)^N tables per mesh shape.
- specs: each chosen tensor gets every spec the mesh allows: each mesh axis splits one of its
  dimensions or none, the axes on one dimension in every order; tensors not chosen keep theirs.

The mesh shape is searched too: every factorisation of the device count into the mesh's axes,
in order (`data=2,model=4` on 8 devices also tries 1x8, 4x2 and 8x1).

Divisibility is respected (a candidate that splits a dimension by a size that does not divide
it is counted as invalid and dropped) and equivalent candidates are skipped: two candidates are
the same program when every input and every constraint point gets the same Tiling (the same
devices holding the same tiles, explorer._src.spec.layout). That removes rules over size-1 axes, a
name mapped to an axis that no tensor of the name can use, specs that differ only in axis
order over a size-1 axis, and mesh shapes that relabel the same placement (1x8 against 8x1).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import permutations, product

from explorer._src.errors import ExplorerError, InputError, TensorError, WorkloadError, choices
from explorer._src.layout_search.result import SearchSpace
from explorer._src.spec.bounds import show
from explorer._src.spec.layout import Tiling, tiling_from_spec
from explorer._src.spec.mesh import MeshSpec
from explorer._src.spec.tensor import DTYPE_BYTES, Entry, TensorSpec, entry_axes, format_spec
from explorer._src.strategy.rules import LOGICAL_NAMES, Rule, Rules, logical_spec
from explorer._src.workloads.base import TensorKind, Workload

# Enumerating is cheap (no compile), but not free: a space beyond this is refused, with a hint
# to search fewer names or tensors, rather than enumerated for minutes.
MAX_SPACE = 1_000_000


def mesh_factorisations(mesh: MeshSpec, vary: bool = True) -> list[MeshSpec]:
    """`mesh`, then (with `vary`) every other ordered factorisation of its device count into
    its axes, largest first axis first (so that of two shapes that place the tensors the same
    way, e.g. 8x1 and 1x8, the search names the candidate by the one with the outer axis
    used)."""
    if not vary:
        return [mesh]
    out = [mesh]
    for sizes in sorted(_factorisations(mesh.device_count, len(mesh.names)), reverse=True):
        if sizes != mesh.sizes:
            out.append(MeshSpec(mesh.names, sizes, mesh.axis_type))
    return out


def _factorisations(n: int, parts: int) -> Iterator[tuple[int, ...]]:
    if parts == 1:
        yield (n,)
        return
    for d in range(1, n + 1):
        if n % d == 0:
            for rest in _factorisations(n // d, parts - 1):
                yield (d, *rest)


@dataclass(frozen=True)
class SearchLayout:
    """One point of the space: a mesh and what places the tensors on it."""

    mesh: MeshSpec
    rules: tuple[tuple[str, str], ...] = ()               # (logical name, mesh axis), by priority
    specs: tuple[tuple[str, tuple[Entry, ...]], ...] = ()  # searched tensor -> spec

    @property
    def rules_text(self) -> str:
        return ",".join(f"{n}={a}" for n, a in self.rules)

    def label(self) -> str:
        what = self.rules_text or ", ".join(f"{n}={format_spec(s)}" for n, s in self.specs
                                            if any(entry_axes(e) for e in s))
        return f"{self.mesh.text()}: {what or 'replicated'}"


@dataclass(frozen=True)
class SearchPoint:
    """One distinct candidate, with what the bounds need: the shard bytes of every input and
    the mesh axes that split anything."""

    index: int                                   # enumeration order
    layout: SearchLayout
    specs: Mapping[str, tuple[Entry, ...]]       # every input -> spec
    shard_bytes: Mapping[str, int]               # every input -> bytes per device
    axes_used: frozenset[str]                    # mesh axes (size > 1) in any spec or constraint
    key: tuple[int, ...] = ()                    # the Tiling of each input and point, interned


@dataclass
class Space:
    points: list[SearchPoint] = field(default_factory=list)
    space: int = 0
    invalid: int = 0
    equivalent: int = 0
    tilings: list[Tiling] = field(default_factory=list)    # SearchPoint.key's ids -> Tiling


class Problem:
    """What is searched: a built-in workload or a user's function, and the tensors it takes.

    Subclasses give the inputs (global shapes and dtypes), resolve a layout into the spec of
    every input and constraint point (None: the point is left to propagation), and say whether
    the program's own code can add shardings the specs do not show."""

    name: str
    inputs: list[TensorSpec]
    hidden_shardings: bool = True     # a user function may constrain inside; a workload cannot

    def check_mesh(self, mesh: MeshSpec) -> str | None:
        """Why the program cannot run on this mesh shape, or None."""
        return None

    def resolve(self, layout: SearchLayout) -> tuple[dict[str, tuple[Entry, ...]],
                                               dict[str, tuple[Entry, ...]]]:
        raise NotImplementedError

    def point_shapes(self) -> dict[str, tuple[int, ...]]:
        return {}


class WorkloadProblem(Problem):
    def __init__(self, workload: Workload, params: dict):
        self.workload = workload
        self.name = workload.name
        self.params = params
        self.inputs = workload.tensors(params)
        self.logical = workload.logical(params) if workload.logical is not None else {}
        self.kinds: Mapping[str, TensorKind] = workload.kinds(params) if workload.kinds else {}
        self.points = workload.points(params) if workload.points is not None else {}
        self.hidden_shardings = False

    def names(self) -> list[str]:
        """The logical names its inputs and constraint points use, in LOGICAL_NAMES order."""
        used = {d for dims in [*self.logical.values(), *(p.dims for p in self.points.values())]
                for d in dims if d is not None}
        return [n for n in LOGICAL_NAMES if n in used] + sorted(used - set(LOGICAL_NAMES))

    def check_mesh(self, mesh: MeshSpec) -> str | None:
        if self.workload.check is None:
            return None
        try:
            self.workload.check(self.params, mesh)
        except ExplorerError as e:
            return str(e)
        return None

    def point_shapes(self) -> dict[str, tuple[int, ...]]:
        return {n: p.shape for n, p in self.points.items()}

    def resolve(self, layout):
        """As explorer._src.strategy.plan resolves the same request: rules (one table for every
        kind, since the searched rules are unscoped) for inputs and points, specs over them."""
        table = Rules(tuple(Rule(None, n, a) for n, a in layout.rules)).table()
        specs = {t.name: () for t in self.inputs}
        points: dict[str, tuple[Entry, ...]] = {}
        if table:
            memo: dict[tuple, tuple[Entry, ...]] = {}   # many tensors share their dims

            def spec_of(dims):
                if dims not in memo:
                    memo[dims] = logical_spec(dims, table)
                return memo[dims]

            for name, dims in self.logical.items():
                specs[name] = spec_of(tuple(dims))
            for name, p in self.points.items():
                points[name] = spec_of(tuple(p.dims))
        for name, spec in layout.specs:
            specs[name] = spec
        return specs, points


class FunctionProblem(Problem):
    """A user's function and the pytree of TensorSpecs it takes (lists, tuples, dicts)."""

    def __init__(self, fn: Callable, args: tuple, leaves: list[TensorSpec]):
        self.fn = fn
        self.args = args
        self.name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", "function")
        self.inputs = leaves
        self.hidden_shardings = True

    def check_mesh(self, mesh: MeshSpec) -> str | None:
        return None

    def resolve(self, layout):
        specs = {t.name: t.spec for t in self.inputs}
        for name, spec in layout.specs:
            specs[name] = spec
        return specs, {}

    def args_with(self, specs: Mapping[str, tuple[Entry, ...]]) -> tuple:
        """The arguments with each TensorSpec's spec replaced from `specs`."""
        return tuple(_replace_specs(a, specs) for a in self.args)


def _replace_specs(tree, specs):
    if isinstance(tree, TensorSpec):
        return replace(tree, spec=specs.get(tree.name, tree.spec))
    if tree is None:
        return None
    if type(tree) is dict:
        return {k: _replace_specs(v, specs) for k, v in tree.items()}
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return type(tree)(*(_replace_specs(v, specs) for v in tree))
    if isinstance(tree, list | tuple):
        return type(tree)(_replace_specs(v, specs) for v in tree)
    raise TensorError(f"search rebuilds the inputs with new specs, and can do that for "
                      f"TensorSpecs in lists, tuples, namedtuples and dicts, not in "
                      f"{type(tree).__name__} ({show(tree)}); pass the TensorSpecs in one of "
                      "those")


def check_replaceable(args: tuple) -> None:
    for a in args:
        _replace_specs(a, {})


# ---------------------------------------------------------------------------------------------
# Per-tensor specs.

def tensor_specs(shape: tuple[int, ...], mesh: MeshSpec) -> list[tuple[Entry, ...]]:
    """Every spec of a tensor of `shape` on `mesh` that divides it, one per distinct Tiling:
    each mesh axis of size > 1 splits one dimension or none, the axes on a dimension in every
    order. Replicated first."""
    return _tensor_specs(shape, mesh)[0]


def _tensor_specs(shape, mesh) -> tuple[list[tuple[Entry, ...]], int]:
    """(the distinct divisible specs, how many specs divide before the duplicates go)."""
    axes = [a for a in mesh.names if mesh.size(a) > 1]
    rank = len(shape)
    out: dict[Tiling, tuple[Entry, ...]] = {}
    divisible = 0
    for where in product(range(-1, rank), repeat=len(axes)):
        on = [[a for a, w in zip(axes, where, strict=True) if w == d] for d in range(rank)]
        if any(shape[d] % math.prod(mesh.size(a) for a in on[d]) for d in range(rank)):
            continue
        for orders in product(*(permutations(o) for o in on)):
            divisible += 1
            spec = tuple(None if not o else o[0] if len(o) == 1 else tuple(o) for o in orders)
            tiling = tiling_from_spec(spec, mesh.names, mesh.sizes, rank)
            out.setdefault(tiling, spec)
    return list(out.values()), divisible


def _count_tensor_specs(rank: int, axes: int) -> int:
    """How many (dimension-or-none, order) choices `axes` distinct axes have on `rank` dims,
    before divisibility: sum over how many axes are used, of the ordered placements."""
    # Placing k labelled axes on `rank` ordered lists: rank·(rank+1)···(rank+k-1) ways.
    total = 0
    for k in range(axes + 1):
        total += math.comb(axes, k) * math.prod(range(rank, rank + k))
    return total


# ---------------------------------------------------------------------------------------------
# Enumeration.

class _Cache:
    """Per (shape, dtype, spec, mesh sizes): divisible?, its Tiling (interned as an int) and
    its bytes per device. Shared by every candidate, since most repeat a few shapes."""

    def __init__(self):
        self.entries: dict = {}
        self.tilings: dict[Tiling, int] = {}

    def get(self, shape, dtype, spec, mesh: MeshSpec):
        key = (shape, dtype, spec, mesh.names, mesh.sizes)
        hit = self.entries.get(key)
        if hit is None:
            hit = self.entries[key] = self._compute(shape, dtype, spec, mesh)
        return hit

    def _compute(self, shape, dtype, spec, mesh):
        spec = tuple(spec) + (None,) * (len(shape) - len(spec))
        tiles = []
        for dim, entry in zip(shape, spec, strict=True):
            k = math.prod(mesh.size(a) for a in entry_axes(entry))
            if dim % k:
                return None
            tiles.append(k)
        tiling = tiling_from_spec(spec, mesh.names, mesh.sizes, len(shape))
        tid = self.tilings.setdefault(tiling, len(self.tilings))
        per_device = math.prod(d // k for d, k in zip(shape, tiles, strict=True))
        itemsize = DTYPE_BYTES.get(dtype, 4)
        axes = frozenset(a for e in spec for a in entry_axes(e) if mesh.size(a) > 1)
        return tid, per_device * itemsize, axes


def _check_axes(spec, mesh: MeshSpec) -> bool:
    used = [a for e in spec for a in entry_axes(e)]
    return all(a in mesh.shape for a in used) and len(set(used)) == len(used)


def _layouts_rules(mesh: MeshSpec, names: Sequence[str]) -> Iterator[SearchLayout]:
    axes = [a for a in mesh.names if mesh.size(a) > 1]
    for choice in product([None, *axes], repeat=len(names)):
        yield SearchLayout(mesh, tuple((n, a) for n, a in zip(names, choice, strict=True)
                                 if a is not None))


def _layouts_specs(mesh: MeshSpec, tensors: Sequence[TensorSpec], out: Space,
                   raw: int) -> Iterator[SearchLayout]:
    """Every combination of the tensors' distinct specs. The combinations that a tensor's
    indivisible or duplicate specs would have made are counted in `out` without being made."""
    found = [_tensor_specs(t.shape, mesh) for t in tensors]
    divisible = math.prod(d for _, d in found)
    distinct = math.prod(len(s) for s, _ in found)
    out.invalid += raw - divisible
    out.equivalent += divisible - distinct
    for combo in product(*(s for s, _ in found)):
        yield SearchLayout(mesh, specs=tuple((t.name, s) for t, s in zip(tensors, combo,
                                                                      strict=True)))


def space_size(problem: Problem, meshes: Sequence[MeshSpec], space: SearchSpace,
               names: Sequence[str], tensors: Sequence[TensorSpec]) -> int:
    """How many combinations the space has, before divisibility and equivalence."""
    total = 0
    for mesh in meshes:
        axes = sum(1 for s in mesh.sizes if s > 1)
        if space == SearchSpace.RULES:
            total += (axes + 1) ** len(names)
        else:
            total += math.prod(_count_tensor_specs(t.rank, axes) for t in tensors)
    return total


# How many layouts the enumeration resolves between two looks at its stop condition.
STOP_CHECK_EVERY = 16


def enumerate_space(problem: Problem, meshes: Sequence[MeshSpec], space: SearchSpace,
                    names: Sequence[str] = (), tensors: Sequence[TensorSpec] = (),
                    cancelled: Callable[[], bool] = lambda: False) -> Space:
    """The distinct, divisible candidates, in enumeration order (the given mesh shape first,
    and on it the replicated candidate first); those found before `cancelled()` came true,
    where it did (a cancel, a spent budget)."""
    rules = space == SearchSpace.RULES
    size = space_size(problem, meshes, space, names, tensors)
    if size > MAX_SPACE:
        what = (f"{len(names)} logical names ({', '.join(names)})" if rules
                else f"the specs of {len(tensors)} tensors")
        raise InputError(
            f"the search space has {size} candidates ({what} over {len(meshes)} mesh shape(s)), "
            f"more than the {MAX_SPACE} a search enumerates; search fewer "
            f"{'names (names=[...], --names)' if rules else 'tensors (tensors=[...])'}"
            " or keep the mesh shape fixed (mesh_shapes=False, --fixed-mesh)")
    out = Space(space=size)
    cache = _Cache()
    seen: set[tuple] = set()
    point_shapes = problem.point_shapes()
    dtypes = {t.name: t.dtype for t in problem.inputs}
    shapes = {t.name: t.shape for t in problem.inputs}
    # A layout's specs come from its rules or specs alone, whatever the mesh shape, and most
    # (tensor, spec) pairs repeat across thousands of layouts: each is worked out once (a
    # search of 8,620 layouts resolved them 40,390 times over, most of its first minute on a
    # busy 2-core machine).
    resolved: dict[tuple, tuple[dict, dict]] = {}
    for mesh in meshes:
        if cancelled():
            break
        raw = space_size(problem, [mesh], space, names, tensors)
        if problem.check_mesh(mesh) is not None:
            out.invalid += raw
            continue
        on_mesh: dict[tuple, tuple | None] = {}     # (input?, name, spec) -> its cache entry

        def shard(name: str, spec, is_input: bool, mesh=mesh, on_mesh=on_mesh):
            """The cache entry of tensor `name` (an input, else a constraint point) laid out
            as `spec` on this mesh; None where an axis is unknown or used twice, or a
            dimension is not divisible."""
            key = (is_input, name, spec)
            if key not in on_mesh:
                on_mesh[key] = (None if not _check_axes(spec, mesh) else
                                cache.get(shapes[name], dtypes[name], spec, mesh) if is_input
                                else cache.get(point_shapes[name], "float32", spec, mesh))
            return on_mesh[key]

        layouts = (_layouts_rules(mesh, names) if rules
                   else _layouts_specs(mesh, tensors, out, raw))
        for n, layout in enumerate(layouts):
            # A mesh shape can hold thousands of layouts, each resolved through the planner:
            # a cancel or a spent budget is looked for as it goes, not only between shapes.
            if n % STOP_CHECK_EVERY == STOP_CHECK_EVERY - 1 and cancelled():
                break
            what = (layout.rules, layout.specs)
            if what not in resolved:
                resolved[what] = problem.resolve(layout)
            specs, points = resolved[what]
            key, shard_bytes, axes_used, ok = [], {}, set(), True
            for name, spec in specs.items():
                hit = shard(name, spec, True)
                if hit is None:
                    ok = False
                    break
                key.append(hit[0])
                shard_bytes[name] = hit[1]
                axes_used |= hit[2]
            if ok:
                key.append(-1)        # inputs | points
                for name, spec in points.items():
                    hit = shard(name, spec, False)
                    if hit is None:
                        ok = False
                        break
                    key.append(hit[0])
                    axes_used |= hit[2]
            if not ok:
                out.invalid += 1
                continue
            # A user function may constrain inside on axes by name, which means another
            # placement on another mesh shape: there only the same shape can repeat a program.
            key_t = (mesh.sizes if problem.hidden_shardings else None, bool(points), tuple(key))
            if key_t in seen:
                out.equivalent += 1
                continue
            seen.add(key_t)
            out.points.append(SearchPoint(len(out.points), layout, specs, shard_bytes,
                                          frozenset(axes_used), tuple(key)))
    out.tilings = sorted(cache.tilings, key=cache.tilings.get)
    return out


def check_names(problem: WorkloadProblem, names) -> list[str]:
    known = problem.names()
    if names is None:
        return known
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    names = list(names)
    bad = [n for n in names if n not in known]
    if bad or not names:
        raise WorkloadError(f"logical name {show(bad[0] if bad else names)} is not one that "
                            f"workload {problem.name!r} uses; its names: {choices(known)}")
    if len(set(names)) != len(names):
        raise WorkloadError(f"logical names {show(names)} name one twice; give each once")
    return names


def check_tensors(problem: Problem, tensors) -> list[TensorSpec]:
    by_name = {t.name: t for t in problem.inputs}
    if tensors is None:
        return list(problem.inputs)
    if isinstance(tensors, str):
        tensors = [n.strip() for n in tensors.split(",") if n.strip()]
    tensors = list(tensors)
    bad = [n for n in tensors if n not in by_name]
    if bad or not tensors:
        raise TensorError(f"tensor {show(bad[0] if bad else tensors)} is not an input of "
                          f"{problem.name!r}; its inputs: {choices(by_name)}")
    if len(set(tensors)) != len(tensors):
        raise TensorError(f"tensors {show(tensors)} name one twice; give each once")
    return [by_name[n] for n in tensors]
