"""The search space: its size counted by hand, its divisibility and equivalence checked against
jax's own placement of every tensor (NamedSharding.devices_indices_map on this process's 8
fake devices) and against explorer's request path (strategy.plan), not against itself."""

import itertools

import jax
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from explorer._src.errors import ExplorerError, SpecError
from explorer._src.layout_search.result import SearchSpace
from explorer._src.layout_search.space import (
    WorkloadProblem,
    enumerate_space,
    mesh_factorisations,
    tensor_specs,
)
from explorer._src.spec.mesh import MeshSpec, parse_mesh
from explorer._src.spec.tensor import TensorSpec, check_spec
from explorer._src.strategy.plan import plan
from explorer._src.workloads.registry import get_workload


def test_mesh_shapes_are_the_factorisations_of_the_device_count():
    shapes = mesh_factorisations(parse_mesh("data=2,model=4"))
    assert shapes[0].sizes == (2, 4)                       # the given shape first
    assert sorted(m.sizes for m in shapes) == [(1, 8), (2, 4), (4, 2), (8, 1)]
    assert {m.names for m in shapes} == {("data", "model")}
    three = mesh_factorisations(parse_mesh("a=2,b=2,c=3"))
    # 12 = 2·2·3 into 3 ordered factors: (number of ordered factorisations) = C(2+2,2)·C(1+2,2)
    # = 6·3 = 18 (stars and bars on the exponents of 2 and of 3).
    assert len(three) == 18 and len({m.sizes for m in three}) == 18
    assert mesh_factorisations(parse_mesh("data=8"), vary=True)[0].sizes == (8,)
    assert len(mesh_factorisations(parse_mesh("data=2,model=4"), vary=False)) == 1


def _placement(spec, shape, jmesh):
    m = NamedSharding(jmesh, PartitionSpec(*spec)).devices_indices_map(shape)
    return tuple(sorted((d.id, tuple((s.start or 0, shape[i] if s.stop is None else s.stop)
                                     for i, s in enumerate(idx))) for d, idx in m.items()))


def _jax_mesh(mesh: MeshSpec):
    return Mesh(np.array(jax.devices()[:mesh.device_count]).reshape(mesh.sizes), mesh.names)


def test_tensor_specs_counted_by_hand():
    mesh = MeshSpec(("data", "model"), (2, 2))
    # Each of 2 axes on dim 0, dim 1 or neither, both on one dim in either order: replicated
    # (1) + one axis on one dim (2·2 = 4) + one axis per dim (2) + both on dim 0 (2 orders) +
    # both on dim 1 (2) = 11, all dividing (4, 8).
    specs = tensor_specs((4, 8), mesh)
    assert len(specs) == 11 and specs[0] == (None, None)
    jmesh = _jax_mesh(mesh)
    assert len({_placement(s, (4, 8), jmesh) for s in specs}) == 11
    # Dimension 0 of size 2 cannot take both axes (4 devices): the 2 both-on-dim-0 specs go.
    assert len(tensor_specs((2, 8), mesh)) == 9
    # A size-1 axis splits nothing: only `model` matters, on dim 0, dim 1 or neither.
    assert len(tensor_specs((4, 8), MeshSpec(("data", "model"), (1, 4)))) == 3


def _oracle(workload_name, params, mesh_text, names):
    """Every rule table of the space resolved through explorer's request path (plan), each
    input and constraint point placed by jax: (valid tables, distinct placements)."""
    w = get_workload(workload_name)
    p = w.resolve(params)
    shapes = w.shapes(p)
    points = w.points(p) if w.points else {}
    valid, distinct = 0, set()
    for mesh in mesh_factorisations(parse_mesh(mesh_text)):
        axes = [a for a in mesh.names if mesh.size(a) > 1]
        jmesh = _jax_mesh(mesh)
        for choice in itertools.product([None, *axes], repeat=len(names)):
            rules = ",".join(f"{n}={a}" for n, a in zip(names, choice, strict=True) if a)
            layout = plan(w, p, mesh, rules=rules or None)
            specs = {n: layout.specs.get(n, ()) for n in shapes}
            try:
                for n, s in specs.items():
                    check_spec(TensorSpec(n, shapes[n], spec=s), mesh)
                for n, s in layout.activations.items():
                    check_spec(TensorSpec(n, points[n].shape, spec=s), mesh)
            except SpecError:
                continue
            valid += 1
            key = (tuple(_placement(specs[n], shapes[n], jmesh) for n in shapes),
                   tuple((n, _placement(s, points[n].shape, jmesh))
                         for n, s in sorted(layout.activations.items())))
            distinct.add(key)
    return valid, len(distinct)


@pytest.mark.parametrize("workload,params,names", [
    ("mlp", {}, ["batch", "embed", "mlp"]),
    ("mlp_train", {"batch": 4}, ["batch", "embed", "mlp"]),     # batch 4 cannot split 8 ways
    ("transformer", {}, ["batch", "heads", "mlp"]),
])
def test_rules_space_matches_jax_placements(workload, params, names):
    w = get_workload(workload)
    problem = WorkloadProblem(w, w.resolve(params))
    found = enumerate_space(problem, mesh_factorisations(parse_mesh("data=2,model=4")),
                            SearchSpace.RULES, names)
    # (|A|+1)^N per mesh shape: 3^3 on 2x4 and 4x2, 2^3 on 8x1 and 1x8.
    assert found.space == 27 + 27 + 8 + 8
    valid, distinct = _oracle(workload, params, "data=2,model=4", names)
    assert found.space - found.invalid == valid
    assert len(found.points) == distinct
    assert found.space == found.invalid + found.equivalent + len(found.points)


def test_specs_space_counts_add_up():
    problem = WorkloadProblem(get_workload("matmul"), get_workload("matmul").resolve(
        {"m": 4, "k": 8, "n": 2}))
    mesh = MeshSpec(("data", "model"), (2, 2))
    found = enumerate_space(problem, [mesh], SearchSpace.SPECS, tensors=problem.inputs)
    # x (4, 8): 11 specs, w (8, 2): 9 (its dim 1 of size 2 cannot take both axes); each tensor
    # has 11 placements before divisibility (as counted above), so 121 combinations.
    assert found.space == 121
    assert len(found.points) == 11 * 9
    assert found.invalid == 121 - 11 * 9 and found.equivalent == 0


def test_a_space_too_large_is_refused_with_the_way_out():
    w = get_workload("transformer_train")
    problem = WorkloadProblem(w, w.resolve({"layers": 4}))
    with pytest.raises(ExplorerError, match="fewer"):
        enumerate_space(problem, mesh_factorisations(parse_mesh("a=2,b=2,c=2")), SearchSpace.SPECS,
                        tensors=problem.inputs)
