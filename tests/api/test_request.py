"""Request validation (explorer/_src/api/request.py and the checks at the top of analyze and
analyze_workload): every malformed value is one explorer error that names it, raised before any
compile. Nothing here compiles: every call that passes validation uses cache_only=True."""

import collections

import pytest

import explorer
from explorer import TensorSpec, analyze, analyze_workload, parse_mesh
from explorer._src.api.pytrees import tensor_leaves
from explorer._src.api.request import MAX_TIMEOUT, check_inputs, check_target, check_timeout
from explorer._src.spec.bounds import MAX_PYTREE_DEPTH


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


# --- logical-axis rules as (logical name, mesh axes) pairs, as flax and MaxText write them -----

# A name may repeat: the first pair that fits wins. mlp takes model first, so embed falls back
# to data in the MLP's weights; vocab falls back to data where embed took model.
PAIRS = [("batch", "data"), ("mlp", "model"), ("embed", "model"), ("embed", "data"),
         ("heads", "model"), ("vocab", "model"), ("vocab", "data")]
BY_HAND = {
    "tokens": ("data", None),                              # [batch, seq]
    "embed": ("data", "model"),                            # [vocab, embed]
    "layers.ln1": (None, "model"),                         # [layers, embed]
    "layers.wq": (None, "model", None, None),              # [layers, embed, heads, kv]
    "layers.wo": (None, None, None, "model"),              # [layers, heads, kv, embed]
    "layers.w1": (None, "data", "model"),                  # [layers, embed, mlp]
    "layers.w2": (None, "model", "data"),                  # [layers, mlp, embed]
    "final_norm": ("model",),                              # [embed]
    "unembed": ("model", "data"),                          # [embed, vocab]
    "m.layers.w1": (None, "data", "model"),                # optimizer state: the same rules
}


def _specs(**kwargs):
    r = explorer.Request(workload="transformer_train", mesh="data=2,model=4", **kwargs)
    return {t.name: tuple(t.spec) for t in r.planned.leaves}, r


def test_pairs_with_repeated_names_place_a_train_step_as_computed_by_hand():
    specs, request = _specs(rules=PAIRS)
    assert {n: specs[n] for n in BY_HAND} == BY_HAND
    # analyze_workload takes them too (validated and planned before any compile).
    analyze_workload("transformer_train", "data=2,model=4", rules=PAIRS, cache_only=True)
    # The Report's rule text reproduces the layout, as the text form and as Python pairs.
    text = request.planned.workload_info("transformer_train", None).rules
    assert text == "(batch,data),(mlp,model),(embed,model),(embed,data),(heads,model)," \
                   "(vocab,model),(vocab,data)"
    assert _specs(rules=text)[0] == specs
    assert _specs(rules=[list(p) for p in PAIRS])[0] == specs


def test_a_maxtext_table_on_a_smaller_mesh_places_as_flax_with_the_missing_axes_of_size_1():
    flax_linen = pytest.importorskip("flax.linen")
    # In the style of MaxText's base.yml: names the workload lacks, axes the mesh lacks.
    table = [["activation_batch", ["data", "fsdp"]], ["batch", ["data", "fsdp"]],
             ["mlp", ["fsdp_transpose", "tensor"]], ["vocab", ["tensor", "autoregressive"]],
             ["embed", ["fsdp", "sequence"]], ["embed", "tensor"], ["heads", "tensor"],
             ["kv", []], ["layers", "stage"]]
    request = explorer.Request(workload="transformer_train", mesh="data=2,tensor=4",
                               rules=table)
    logical = request.planned.workload.logical(dict(request.planned.params))
    mesh = {"data", "tensor"}
    for t in request.planned.leaves:
        flax = flax_linen.logical_to_mesh_axes(logical[t.name], [tuple(p) for p in table])
        kept = [tuple(a for a in ((e,) if isinstance(e, str) else e or ()) if a in mesh)
                for e in flax]
        spec = tuple(t.spec) or (None,) * len(kept)        # () is replicated
        assert spec == tuple(None if not k else k[0] if len(k) == 1 else k for k in kept), t.name
    # embed's first pair takes fsdp (absent: size 1), so embed stays whole and mlp gets tensor.
    assert tuple(next(t for t in request.planned.leaves if t.name == "layers.w1").spec) == \
        (None, None, "tensor")


def test_pairs_join_a_preset_and_win_where_both_name_a_dimension():
    specs, request = _specs(preset="megatron", rules=[("mlp", "data"), ("mlp", "model")])
    assert specs["layers.w1"] == (None, None, "data")
    text = request.planned.workload_info("transformer_train", "megatron").rules
    assert text.endswith(",(mlp,data),(mlp,model)")


@pytest.mark.parametrize("rules, fragment", [
    ([("batch", "data"), "mlp"], "rules[1] = 'mlp' is not a (logical name, mesh axes) pair"),
    ([("batch", {"data"})], "rules[0] = ('batch', {'data'}): mesh axes {'data'} are not None"),
    ([("optim:embed", "data")], "is scoped to tensor kind 'optim', which is unknown"),
    ([("mpl", "model")], "pairs name no logical dimension the tensors have ('mpl')"),
    ("(mpl,model)", "pairs name no logical dimension the tensors have ('mpl')"),
    ("(batch,data", "expected ')' closing the pair for 'batch' at the end"),
])
def test_bad_pairs_are_one_rule_error_before_any_compile(rules, fragment):
    with pytest.raises(explorer.RuleError) as e:
        analyze_workload("transformer_train", "data=2,model=4", rules=rules, cache_only=True)
    assert fragment in str(e.value)
    assert isinstance(e.value, explorer.InputError)
