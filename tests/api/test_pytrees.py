"""Any pytree in: the abstract state an Equinox module, a Flax linen model, an optax optimizer or
a plain dict gives (`jax.eval_shape`) is analysed as it is, each leaf named by its key path.

The names below are worked out by hand from how each library nests its state. The train step
is defined inside its test and traced in this process, as a notebook's is; the Equinox
class is defined at module level, as a library's is."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import explorer
from explorer._src.api.pytrees import leaf_name, named_inputs, tensor_leaves
from explorer._src.spec.tensor import TensorSpec


class TwoLayer(eqx.Module):
    """16 -> 64 -> 16 features. An eqx.nn.Linear's weight is (out, in)."""

    layers: list

    def __init__(self, key):
        k0, k1 = jax.random.split(key)
        self.layers = [eqx.nn.Linear(16, 64, key=k0), eqx.nn.Linear(64, 16, key=k1)]

    def __call__(self, x):
        x = jax.nn.relu(jax.vmap(self.layers[0])(x))
        return jax.vmap(self.layers[1])(x)


MODEL = TwoLayer(jax.random.key(0))
PARAMS, STATIC = eqx.partition(MODEL, eqx.is_array)
ABSTRACT_PARAMS = jax.eval_shape(lambda: PARAMS)
OPTIMIZER = optax.adamw(1e-3)
ABSTRACT_OPT = jax.eval_shape(OPTIMIZER.init, ABSTRACT_PARAMS)
X = jax.ShapeDtypeStruct((32, 16), jnp.float32)

PARAM_NAMES = ["layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias"]
# adamw = chain(scale_by_adam, add_decayed_weights, scale_by_learning_rate): a tuple whose
# element 0 is ScaleByAdamState(count, mu, nu), mu and nu shaped like the params; the other two
# states are empty.
OPT_NAMES = (["0.count"] + [f"0.mu.{n}" for n in PARAM_NAMES]
             + [f"0.nu.{n}" for n in PARAM_NAMES])
# Megatron's MLP: the first weight split by its output features, the second by its input ones.
MEGATRON = {r"layers\.0\.weight$": "model,None", r"layers\.1\.weight$": "None,model"}


def names(args):
    return [t.name for a in args for t in tensor_leaves(a)]


def test_an_equinox_model_and_its_adamw_state_are_named_by_their_key_paths():
    def train_step(params, opt_state, x):
        return params, opt_state, x

    args = named_inputs(train_step, (ABSTRACT_PARAMS, ABSTRACT_OPT, X))
    assert names(args) == PARAM_NAMES + OPT_NAMES + ["x"]
    leaves = {t.name: t for a in args for t in tensor_leaves(a)}
    assert leaves["layers.0.weight"] == TensorSpec("layers.0.weight", (64, 16), "float32")
    assert leaves["0.count"] == TensorSpec("0.count", (), "int32")
    # The structure stays the user's: an Equinox module holding TensorSpecs.
    assert isinstance(args[0], TwoLayer)


def test_a_flax_linen_param_dict_and_a_plain_dict_are_named_by_their_keys():
    linen = pytest.importorskip("flax.linen")

    class Mlp(linen.Module):
        @linen.compact
        def __call__(self, x):
            return linen.Dense(4, name="out")(linen.relu(linen.Dense(8, name="hidden")(x)))

    variables = jax.eval_shape(Mlp().init, jax.random.key(0), jnp.zeros((2, 3)))
    batch = {"tokens": jax.ShapeDtypeStruct((2, 3), jnp.int32),
             "mask": np.zeros((2, 3), np.bool_)}

    def forward(variables, batch):
        return batch

    args = named_inputs(forward, (variables, batch))
    # dicts flatten in sorted key order: hidden before out, bias before kernel, mask first.
    assert names(args) == ["params.hidden.bias", "params.hidden.kernel", "params.out.bias",
                           "params.out.kernel", "mask", "tokens"]
    assert [t.shape for t in tensor_leaves(args[0])] == [
        (8,), (3, 8), (4,), (8, 4)]


def test_two_arguments_of_one_structure_get_their_parameter_names_in_front():
    def apply(params, grads):
        return params

    args = named_inputs(apply, (ABSTRACT_PARAMS, ABSTRACT_PARAMS))
    assert names(args) == [f"params.{n}" for n in PARAM_NAMES] + [
        f"grads.{n}" for n in PARAM_NAMES]


def test_a_whole_argument_is_named_by_its_parameter_or_its_position():
    def scale(x, factor):
        return x * factor

    assert names(named_inputs(scale, (X, X))) == ["x", "factor"]
    # A lambda over *args has no names for them.
    assert names(named_inputs(lambda *a: a, (X, {"w": X}))) == ["arg0", "w"]


def test_key_paths_are_simplified_to_dotted_parts():
    from jax.tree_util import DictKey, GetAttrKey, SequenceKey

    assert leaf_name((DictKey("layers"), SequenceKey(0), DictKey("w1"))) == "layers.0.w1"
    assert leaf_name((GetAttrKey("layers"), SequenceKey(0), GetAttrKey("w1"))) == "layers.0.w1"


def test_a_leaf_that_carries_a_named_sharding_keeps_its_spec():
    mesh = jax.make_mesh((2, 4), ("data", "model"))
    sharded = jax.ShapeDtypeStruct((32, 16), jnp.float32,
                                   sharding=NamedSharding(mesh, P("data")))
    array = jax.device_put(np.zeros((8, 4), np.float32), NamedSharding(mesh, P(None, "model")))
    plain = np.zeros((4,), np.float32)
    args = named_inputs(lambda x, w, b: x, (sharded, array, plain))
    # P("data") on a rank-2 leaf reads as ("data", None), as jax reads a short spec.
    assert [t.spec for t in args] == [("data", None), (None, "model"), ()]


@pytest.mark.slow
def test_a_leaf_that_is_not_an_array_is_held_fixed_and_a_bad_dtype_is_one_clear_error():
    params = {"w": X, "activation": "gelu"}
    report = explorer.analyze(lambda params: getattr(jax.nn, params["activation"])(params["w"]),
                              params, mesh="data=2")
    assert [t.name for t in report.tensors if t.kind == "input"] == ["w"]
    with pytest.raises(explorer.TensorError,
                       match=r"input 'w': dtype 'float64' is not supported; choose one of"):
        named_inputs(lambda w: w, ({"w": np.zeros(3, np.float64)},))


def test_a_pytree_class_defined_in_a_function_is_traced_where_it_was_made():
    class Local(eqx.Module):       # as a notebook's class would be: not importable by name
        w: jax.Array

    report = explorer.analyze(lambda m: m.w * 2, Local(X), mesh="data=2")
    assert [t.name for t in report.tensors if t.kind == "input"] == ["w"]


@pytest.mark.slow
def test_an_equinox_adamw_train_step_compiles_with_regex_specs_on_its_key_paths():
    static, optimizer = STATIC, OPTIMIZER

    def train_step(params, opt_state, x):
        def loss(p):
            return jnp.mean(eqx.combine(p, static)(x) ** 2)

        grads = jax.grad(loss)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return eqx.apply_updates(params, updates), opt_state

    mesh = jax.make_mesh((2, 4), ("data", "model"))
    x = jax.ShapeDtypeStruct((32, 16), jnp.float32, sharding=NamedSharding(mesh, P("data")))
    report = explorer.analyze(train_step, ABSTRACT_PARAMS, ABSTRACT_OPT, x,
                              mesh="data=2,model=4", specs=MEGATRON)
    inputs = [t for t in report.tensors if t.kind == "input"]
    assert [t.name for t in inputs] == PARAM_NAMES + OPT_NAMES + ["x"]
    # The patterns find the weights and Adam's moments of them (re.search), the sharding x
    # carried stays, the rest is replicated.
    specs = {t.name: t.spec_text for t in inputs}
    for prefix in ("", "0.mu.", "0.nu."):
        assert specs[prefix + "layers.0.weight"] == "model,None"
        assert specs[prefix + "layers.1.weight"] == "None,model"
        assert specs[prefix + "layers.0.bias"] == "replicated"
    assert specs["x"] == "data,None"
    # Worked out by hand: the second matmul contracts the model-split features (a partial sum
    # over model), and every gradient sums over the data-split batch.
    assert {(c.kind, c.axes) for c in report.collectives} == {
        ("all-reduce", ("model",)), ("all-reduce", ("data",))}
    # The names of the Report's JSON (the CLI's --json) are the same.
    assert [t["name"] for t in report.to_dict()["tensors"] if t["kind"] == "input"] == \
        PARAM_NAMES + OPT_NAMES + ["x"]

    # The app lists the same names and compiles the same request (the cache answers it).
    pytest.importorskip("ipywidgets")
    from explorer.ui import explore

    app = explore(train_step, ABSTRACT_PARAMS, ABSTRACT_OPT, x, mesh="data=2,model=4",
                  specs=MEGATRON, debounce=None)
    try:
        assert [t.name for t in app.source.tensors()] == PARAM_NAMES + OPT_NAMES + ["x"]
        assert [t.name for t in app.report.tensors if t.kind == "input"] == \
            PARAM_NAMES + OPT_NAMES + ["x"]
    finally:
        app.close()


@pytest.mark.slow
def test_the_search_places_a_leaf_of_an_equinox_model_by_its_name():
    static = STATIC

    def forward(params, x):
        return eqx.combine(params, static)(x)

    result = explorer.search(forward, ABSTRACT_PARAMS, X, mesh="data=2,model=4",
                             target="h100-8", tensors=["layers.0.weight"], mesh_shapes=False,
                             compile_for="cpu")
    assert set(result.candidates[0].specs) == set(PARAM_NAMES + ["x"])
    tried = {c.specs["layers.0.weight"] for c in result.candidates}
    assert {"replicated", "model,None", "None,model"} <= tried
