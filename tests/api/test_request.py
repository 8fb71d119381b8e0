"""Request validation (explorer/api/request.py and the checks at the top of analyze and
analyze_workload): every malformed value is one explorer error that names it, raised before any
compile. Nothing here compiles: every call that passes validation uses cache_only=True."""

import collections

import pytest

import explorer
from explorer import TensorSpec, analyze, analyze_workload, parse_mesh
from explorer.api.pytrees import tensor_leaves
from explorer.api.request import MAX_TIMEOUT, check_inputs, check_target, check_timeout
from explorer.spec.bounds import MAX_PYTREE_DEPTH


def ident(x):
    return x


X = TensorSpec("x", (8, 8))


# --- timeouts -----------------------------------------------------------------------------------

@pytest.mark.parametrize("timeout, expected", [(None, None), (1, 1.0), (2.5, 2.5),
                                               (MAX_TIMEOUT, float(MAX_TIMEOUT))])
def test_good_timeouts(timeout, expected):
    assert check_timeout(timeout) == expected


@pytest.mark.parametrize("timeout", [float("nan"), float("inf"), float("-inf"), 0, -1, "3",
                                     True, 10 ** 400, MAX_TIMEOUT + 1, [3]])
def test_bad_timeouts_name_the_value_on_every_path(timeout):
    for call in (lambda: check_timeout(timeout),
                 lambda: analyze(ident, X, mesh="d=2", timeout=timeout, cache_only=True),
                 lambda: analyze_workload("mlp", "d=2", timeout=timeout, cache_only=True)):
        with pytest.raises(explorer.ExplorerError, match="is not a positive, finite number of "
                           "seconds"):
            call()


@pytest.mark.parametrize("flag", ["measure", "use_cache", "cache_only", "real_devices"])
def test_flags_are_true_or_false(flag):
    with pytest.raises(explorer.ExplorerError, match=f"{flag}='yes' is not True or False"):
        analyze(ident, X, mesh="d=2", **{"cache_only": True, flag: "yes"})


# --- targets and mappings -----------------------------------------------------------------------

MESH = parse_mesh("data=2,model=8")


@pytest.mark.parametrize("mapping", [
    "data=node,model=gpu", {"data": "node", "model": "gpu"}, {"data": ("node", 2), "model": "gpu"},
    {"data": [("node", 2)], "model": ["gpu:4", "gpu:2"]}])
def test_mapping_forms_that_are_read(mapping):
    assert check_target("h100-8x2", mapping, MESH).to_dict()["data"] == "node"


@pytest.mark.parametrize("mapping, fragment", [
    (5, "mapping 5 is not text like"),
    ({"data": (("gpu", 8, 1),)}, "mesh axis 'data': (('gpu', 8, 1),) is not a physical axis"),
    ({"data": 5}, "mesh axis 'data': 5 is not"),
    ({"data": None}, "mesh axis 'data': None is not"),
    ({"data": (("gpu", "8"),)}, "(('gpu', '8'),) is not"),
    ({"data": [("gpu", 8.0)]}, "[('gpu', 8.0)] is not"),
    ({"data": [("gpu", True)]}, "[('gpu', True)] is not"),
    ({"data": ((5, 8),)}, "((5, 8),) is not"),
    ([("data", "node")], "mapping [('data', 'node')] is not"),
    ("data=node:" + "9" * 5000 + ",model=gpu", "not a whole number from 1 to"),  # 5000 digits
    ("data=node:3,model=gpu", "takes 3 from 'node'"),                # the parser's own message
    ({"data": "node", "model": "tpu"}, "mapped to 'tpu', which h100-8x2 lacks"),
])
def test_malformed_mappings_are_mapping_errors_before_any_compile(mapping, fragment):
    with pytest.raises(explorer.MappingError) as e:
        check_target("h100-8x2", mapping, MESH)
    assert fragment in str(e.value)
    with pytest.raises(explorer.MappingError):
        analyze(ident, X, mesh=MESH, target="h100-8x2", mapping=mapping)   # no cache_only


@pytest.mark.parametrize("target", [5, ["h100-8"], "x" * 1000, "tpu-v5e-" + "9" * 5000 + "x4"])
def test_targets_that_are_no_names(target):
    with pytest.raises(explorer.TargetError):
        check_target(target, None, MESH)


def test_mapping_without_a_target():
    with pytest.raises(explorer.ExplorerError, match="choose a target too"):
        check_target(None, "data=node", MESH)


@pytest.mark.parametrize("topology, fragment", [
    (5, "TPU topology 5 is not a topology name"), ("v5e:" + "9" * 5000 + "x4", "is not a "),
    ("v9:4x4", "is not written as GENERATION:SHAPE")])
def test_bad_tpu_topologies(topology, fragment):
    with pytest.raises(explorer.ExplorerError, match=fragment):
        analyze(ident, X, mesh="d=16", tpu_topology=topology, cache_only=True)


def test_bad_partitioner_names_the_choices():
    with pytest.raises(explorer.ExplorerError, match=r"partitioner \['shardy'\] is not one of "
                       "'shardy', 'gspmd'"):
        analyze(ident, X, mesh="d=2", partitioner=["shardy"], cache_only=True)
    # Bad input, so a ValueError too; the choices are quoted as written, not as enum members.
    with pytest.raises(ValueError, match="partitioner 'Shardy' is not one of 'shardy', 'gspmd'"):
        analyze(ident, X, mesh="d=2", partitioner="Shardy", cache_only=True)


# --- inputs -------------------------------------------------------------------------------------

def test_dict_keys_of_mixed_types_are_a_tensor_error():
    # jax flattens a dict in sorted key order; 1 < "a" raises TypeError in sorted().
    with pytest.raises(explorer.TensorError, match="keys of types 'int', 'str'"):
        analyze(ident, {1: X, "a": TensorSpec("y", (4,))}, mesh="d=2", cache_only=True)


def test_leaves_in_jax_order():
    y, z = TensorSpec("y", (4,)), TensorSpec("z", (2,))
    Pair = collections.namedtuple("Pair", "first second")
    assert tensor_leaves([{"b": y, "a": X}, Pair(z, None)]) == [X, y, z]
    # jax keeps an OrderedDict in insertion order (it asks jax for anything but a plain dict).
    assert tensor_leaves(collections.OrderedDict([("b", y), ("a", X)])) == [y, X]


def test_too_deep_or_not_tensorspecs():
    tree = X
    for _ in range(MAX_PYTREE_DEPTH + 1):
        tree = [tree]
    with pytest.raises(explorer.TensorError, match=f"more than {MAX_PYTREE_DEPTH} levels deep"):
        tensor_leaves(tree)
    # A leaf that is not a TensorSpec is no input: the program holds it fixed.
    assert tensor_leaves([X, {"a": 5}]) == [X]


def test_input_count_and_total_size_bounds():
    big = [TensorSpec(f"t{i}", (2 ** 24, 2 ** 24)) for i in range(5)]    # 5 · 2**48 > 2**50
    with pytest.raises(explorer.TensorError, match="more than 2\\*\\*50 elements in all"):
        check_inputs(big, MESH)
    check_inputs(big[:4], MESH)                                          # 4 · 2**48 = 2**50
    many = [TensorSpec(f"t{i}", (1,)) for i in range(2 ** 16 + 1)]
    with pytest.raises(explorer.TensorError, match="more than 2\\*\\*16 input tensors"):
        tensor_leaves(many)


# --- analyze_workload's own arguments -----------------------------------------------------------

@pytest.mark.parametrize("kwargs, error, fragment", [
    ({"activations": {"hidden": 5}}, explorer.SpecError, "spec 5 of tensor 'hidden'"),
    ({"specs": {"x": 1.5}}, explorer.SpecError, "spec 1.5 of tensor 'x'"),
    ({"specs": 5}, explorer.WorkloadError, "specs 5 are not a mapping"),
    ({"activations": ["hidden"]}, explorer.WorkloadError, "activations ['hidden'] are not"),
    ({"params": [("batch", 8)]}, explorer.WorkloadError, "are not a mapping"),
    ({"preset": ["dp"]}, explorer.PresetError, "preset ['dp'] is unknown"),
    ({"rules": {5: "data"}}, explorer.RuleError, "rule key 5"),
])
def test_analyze_workload_arguments(kwargs, error, fragment):
    with pytest.raises(error) as e:
        analyze_workload("mlp", "data=2", cache_only=True, **kwargs)
    assert fragment in str(e.value)


def test_unknown_workload_names_of_any_type():
    for name in (["mlp"], None, 5):
        with pytest.raises(explorer.WorkloadError, match="is unknown; choose one of 'matmul'"):
            analyze_workload(name, "data=2", cache_only=True)


def test_huge_ints_in_names_still_give_their_message():
    # Found by test_fuzz: formatting repr(10**5000) raises ValueError (over 4300 digits), so
    # the message about the bad value failed in its own f-string.
    huge = 10 ** 5000
    with pytest.raises(explorer.PresetError, match="preset <an int of 16610 bits> is unknown"):
        analyze_workload("mlp", "data=2", preset=huge, cache_only=True)
    with pytest.raises(explorer.WorkloadError, match="no constraint point <an int of 16610 "):
        analyze_workload("mlp", "data=2", activations={huge: "data,None"}, cache_only=True)
    with pytest.raises(explorer.ExplorerError, match="<an int of 16610 bits> is not a function"):
        analyze(huge, X, mesh="d=2", cache_only=True)
