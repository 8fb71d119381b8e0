"""Property test of the whole input surface: random meshes, shapes, dtypes, specs, params,
mappings, timeouts and targets, valid and invalid, through the API (TensorSpec, parse_mesh,
parse_spec, parse_rules, analyze, analyze_workload) and the CLI's argument handling
(explorer._src.cli.main in this process).

The property: every case ends in a result (a TensorSpec, a MeshSpec, a Report, or None for a
cache_only miss) or in one explorer error with a non-empty message, within a time bound. A raw
exception (TypeError, OverflowError, ...) or a hang fails the test, and hypothesis shrinks it to
the smallest input that does it. The CLI exits 0 or 2, never with a traceback, and its --json
output is strict JSON.

Most cases fail validation or use cache_only=True, so nothing compiles; a few percent are valid
requests on meshes of 1 or 2 devices, compiled for real, with functions defined in this file
(traced in this process).

The default run is about 2,800 cases. For a longer run (25 times as many):

    HYPOTHESIS_PROFILE=long pytest tests/api/test_fuzz.py
"""

import contextlib
import io
import json
import math
import os
import signal

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

import explorer
from explorer import (
    ExplorerError,
    MeshSpec,
    Report,
    TensorSpec,
    analyze,
    analyze_workload,
    parse_mesh,
    parse_rules,
    parse_spec,
)
from explorer._src.api.pytrees import is_array_like
from explorer._src.cost.catalog.names import targets_with_chips
from explorer._src.spec.bounds import MAX_ELEMENTS, MAX_MESH_DEVICES, MAX_RANK
from explorer._src.spec.tensor import DTYPE_ALIASES, DTYPE_BYTES
from explorer._src.workloads.registry import WORKLOADS

# Thousands of cases: CI runs them all; the inner loop skips them.
pytestmark = pytest.mark.slow

# --- run length ---------------------------------------------------------------------------------

settings.register_profile("long", deadline=None, print_blob=True)
LONG = os.environ.get("HYPOTHESIS_PROFILE") == "long"
if LONG:
    settings.load_profile("long")


def cases(n: int) -> settings:
    """n examples (25 n under the long profile); no per-example deadline: a first compile
    starts a worker process, and the time bound below is what catches a hang."""
    return settings(max_examples=n * (25 if LONG else 1), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


# --- the property -------------------------------------------------------------------------------

class Hang(BaseException):
    """Raised by the alarm; a BaseException so that no `except Exception` can swallow it."""


@contextlib.contextmanager
def time_bound(seconds: int):
    """Fail a case that does not answer within `seconds`: a hang guard, far above the time any
    case takes (validation answers in milliseconds; a compile of these tiny programs in
    under a second, plus a few seconds to start a worker)."""
    def alarm(*_):
        raise Hang(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def answer(call, seconds: int = 60):
    """The call's result, or the ExplorerError it raised (checked to carry a message). Any
    other exception propagates and fails the case."""
    with time_bound(seconds):
        try:
            result = call()
        except ExplorerError as e:
            assert str(e).strip(), f"{type(e).__name__} with an empty message"
            result = e
    # --hypothesis-show-statistics lists how the cases ended.
    event(type(result).__name__)
    return result


# --- building blocks ----------------------------------------------------------------------------

def usually(valid, invalid, one_in: int = 5):
    """`valid`, except one time in `one_in`: `invalid`. With every part of a request drawn so,
    most cases get past the first checks and break (or not) deeper in."""
    return st.integers(1, one_in).flatmap(lambda i: invalid if i == 1 else valid)


AXES = ["data", "model", "d", "expert", "stage"]
JUNK = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=6),
                 st.binary(max_size=4), st.lists(st.integers(-2, 9), max_size=3),
                 st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
                 st.just(object()), st.sampled_from([10 ** 30, 2 ** 64, -(2 ** 63)]),
                 # More digits than Python prints; built by a map so that hypothesis can still
                 # describe the strategy.
                 st.just(5000).map(lambda n: 10 ** n))
KEY_JUNK = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=6),
                     st.tuples(st.integers(0, 3)), st.just(object()))    # dict keys must hash
HUGE = st.sampled_from([2 ** 31, 2 ** 48, 2 ** 49, 2 ** 62, 2 ** 63, 2 ** 64, 10 ** 30])
NON_FINITE = st.sampled_from([float("nan"), float("inf"), float("-inf")])

# Meshes: a dict or text over the usual axis names with small sizes, or something broken.
GOOD_MESH_DICTS = st.dictionaries(st.sampled_from(AXES), st.sampled_from([1, 2, 4, 8]),
                                  min_size=1, max_size=3)
BAD_MESHES = st.one_of(
    st.dictionaries(st.one_of(st.sampled_from(AXES), st.text(max_size=6), KEY_JUNK),
                    st.one_of(st.integers(-2, 9), HUGE, st.sampled_from([2 ** 11, 2 ** 21]),
                              JUNK), max_size=4),
    st.lists(st.tuples(st.text(max_size=5), st.text("0123456789+-x. ", max_size=25)),
             max_size=4).map(lambda kv: ",".join(f"{k}={v}" for k, v in kv)),
    st.text(max_size=20), JUNK,
    st.builds(lambda n: {f"a{i}": 1 for i in range(n)}, st.integers(0, 20)))
MESHES = usually(st.one_of(GOOD_MESH_DICTS,
                           GOOD_MESH_DICTS.map(lambda m: ",".join(f"{k}={v}"
                                                                  for k, v in m.items()))),
                 BAD_MESHES)
TINY_MESHES = st.sampled_from(["d=1", "d=2", {"data": 2}, "data=1,model=2"])

# Tensors.
DIMS = st.one_of(st.integers(-3, 0), HUGE, st.floats(), st.booleans(), st.none(),
                 st.text(max_size=3))
GOOD_SHAPES = st.lists(st.one_of(st.sampled_from([1, 2, 4, 8, 16, 64, 2 ** 20]),
                                 st.integers(1, 100)), max_size=4).map(tuple)
SHAPES = usually(GOOD_SHAPES, st.one_of(st.lists(st.one_of(st.integers(1, 8), DIMS),
                                                 max_size=MAX_RANK + 3).map(tuple), DIMS, JUNK))
DTYPES = usually(st.sampled_from(list(DTYPE_BYTES) + list(DTYPE_ALIASES)),
                 st.one_of(st.sampled_from(["float64", "complex64", "", "F32", "int4"]), JUNK))
SPEC_TEXT = st.one_of(st.text("datmodelNone_(),'\" =:P", max_size=24), st.text(max_size=12),
                      st.sampled_from(["data,None", "None,model", "(data,model)", "P('d', None)",
                                       "d", "", "model", "P(", "(data", "data,,"]))
GOOD_ENTRIES = st.one_of(st.none(), st.sampled_from(AXES),
                         st.lists(st.sampled_from(AXES), max_size=2).map(tuple))
BAD_ENTRIES = st.one_of(st.text(max_size=4), st.lists(JUNK, max_size=2), JUNK)
SPECS = usually(st.one_of(st.none(), st.lists(GOOD_ENTRIES, max_size=4).map(tuple)),
                st.one_of(SPEC_TEXT, st.lists(usually(GOOD_ENTRIES, BAD_ENTRIES), max_size=4),
                          JUNK))
NAMES = usually(st.sampled_from(["x", "w", "y", "b"]), st.one_of(st.text(max_size=4), JUNK))

# The rest of a request.
TIMEOUTS = usually(st.one_of(st.none(), st.integers(1, 600), st.floats(0.5, 600)),
                   st.one_of(st.floats(), NON_FINITE, st.integers(-5, 10 ** 20), HUGE,
                             st.text(max_size=4), st.booleans(), JUNK))
MAPPING_VALUES = st.one_of(
    st.sampled_from(["gpu", "node", "x", "y", "gpu:2", "gpu:0", "node:3", "gpu:" + "9" * 5000]),
    st.tuples(st.sampled_from(["gpu", "node", "x"]), st.one_of(st.integers(-1, 9), JUNK)),
    st.lists(st.one_of(st.sampled_from(["gpu", "node:2"]), st.tuples(st.text(max_size=3),
                                                                      st.integers(0, 9))),
             max_size=3),
    st.tuples(st.tuples(st.just("gpu"), st.integers(1, 8), st.integers(1, 2))), JUNK)
MAPPINGS = st.one_of(st.dictionaries(st.one_of(st.sampled_from(AXES), KEY_JUNK), MAPPING_VALUES,
                                     max_size=3),
                     st.sampled_from(["d=gpu", "data=node,model=gpu", "d=gpu:2", "data=x+y",
                                      "d=", "=gpu", "d=gpu:x"]), st.text(max_size=16), JUNK)
BAD_TARGETS = st.one_of(st.text(max_size=16), st.just("tpu-v5e-" + "9" * 5000 + "x4"),
                        st.sampled_from(["h100-8x0", "tpu-v9-4x4", "h1000-8"]), JUNK)


def targets_for(devices: int):
    """A target and mapping: usually none, or a catalog target with this many devices and its
    default mapping; sometimes a wrong or broken one."""
    fitting = targets_with_chips(devices) + ["cpu"]
    good = st.tuples(st.one_of(st.none(), st.sampled_from(fitting)), st.none())
    bad = st.one_of(st.tuples(st.one_of(BAD_TARGETS, st.sampled_from(["h100-8", "h100-8x2"])),
                              st.none()),
                    st.tuples(st.sampled_from(fitting + ["h100-8x2"]), MAPPINGS),
                    st.tuples(st.none(), MAPPINGS))
    return usually(good, bad)


def good_params(workload):
    """In-bounds values for some of a workload's params: small ones, the defaults, the ends of
    the bounds (whose combinations may still pass the element bound, or not)."""
    choices_ = {}
    for key, default in workload.defaults.items():
        if key in workload.bounds:
            b = workload.bounds[key]
            ends = [b.high] + ([b.low] if not b.low_open else [])
            small = [1, 2, 4, 8] if isinstance(default, int) else [0.5, 1.0, 2.0]
            choices_[key] = st.sampled_from([default, *small, *ends])
        elif key in workload.options:
            choices_[key] = st.sampled_from(workload.options[key])
        elif key == "dtype":
            choices_[key] = st.sampled_from(["float32", "bfloat16", "bf16"])
        else:
            choices_[key] = st.sampled_from([default, "", "1,2,3"])
    return st.lists(st.sampled_from(list(choices_)), max_size=3, unique=True).flatmap(
        lambda keys: st.fixed_dictionaries({k: choices_[k] for k in keys}))


PARAM_NAMES = sorted({k for w in WORKLOADS.values() for k in w.defaults})
BAD_PARAM_VALUES = st.one_of(st.integers(-5, 2 ** 70), st.floats(), NON_FINITE, HUGE,
                             st.sampled_from(["nan", "inf", "-inf", "1e3", "2.5", "", "9" * 5000,
                                              "bf16", "1,2,3", "interleaved"]),
                             st.text(max_size=5), st.booleans(), st.none(),
                             st.lists(st.integers(0, 10), max_size=3))
BAD_PARAMS = st.one_of(
    st.dictionaries(st.one_of(st.sampled_from(PARAM_NAMES), st.text(max_size=4), KEY_JUNK),
                    BAD_PARAM_VALUES, min_size=1, max_size=3),
    st.lists(st.tuples(st.sampled_from(PARAM_NAMES), st.integers(1, 8)), max_size=2), JUNK)
RULES = st.one_of(st.text("batchmlpdemodl=,:()_ ", max_size=30),
                  st.sampled_from(["batch=data", "mlp=model", "opt:embed=data", "batch=(data,d)",
                                   "embed=None", "mpl=model", "batch=fsdp", "experts=expert"]),
                  st.dictionaries(st.one_of(st.sampled_from(["batch", "mlp", "opt:embed"]),
                                            KEY_JUNK),
                                  st.one_of(st.sampled_from(AXES), st.none(), JUNK), max_size=3),
                  JUNK)
PARTITIONERS = usually(st.sampled_from(["shardy", "gspmd"]), JUNK)
AXIS_TYPES = usually(st.sampled_from(["auto", "explicit"]), st.one_of(st.text(max_size=5), JUNK))


def total(*args):
    """A user's function: the sum of every input, as float32."""
    import jax
    import jax.numpy as jnp

    return sum((jnp.sum(x.astype(jnp.float32)) for x in jax.tree.leaves(args)),
               jnp.float32(0))


def broken(*args):
    raise ValueError("a bug in the user's function")


@st.composite
def tensor_specs(draw, axes=AXES):
    """A TensorSpec over `axes`, or (when constructing it fails) its raw parts, as a user might
    pass them."""
    entries = usually(st.one_of(st.none(), st.sampled_from(axes)), BAD_ENTRIES, one_in=10)
    specs = st.one_of(st.none(), st.lists(entries, max_size=4).map(tuple), SPECS)
    parts = (draw(NAMES), draw(SHAPES), draw(DTYPES), draw(specs))
    try:
        return TensorSpec(*parts)
    except ExplorerError:
        return parts


@st.composite
def input_trees(draw, axes=AXES):
    """The positional args of analyze: TensorSpecs (named apart, usually) in a pytree."""
    leaves = draw(st.lists(tensor_specs(axes), max_size=4))
    if draw(st.integers(0, 4)):
        seen = set()
        leaves = [t for t in leaves if not (getattr(t, "name", None) in seen
                                            or seen.add(getattr(t, "name", None)))]
    form = draw(st.sampled_from(["flat", "flat", "list", "dict", "mixed_keys", "nested"]))
    if form == "flat":
        return tuple(leaves)
    if form == "list":
        return (list(leaves),)
    if form == "dict":
        return ({f"k{i}": t for i, t in enumerate(leaves)},)
    if form == "mixed_keys":
        return ({(i if i % 2 else f"k{i}"): t for i, t in enumerate(leaves)},)
    tree = leaves
    for _ in range(draw(st.integers(0, 70))):
        tree = [tree]
    return (tree,)


# --- the request's parts ------------------------------------------------------------------------

@cases(500)
@given(name=NAMES, shape=SHAPES, dtype=DTYPES, spec=SPECS)
def test_tensorspec(name, shape, dtype, spec):
    t = answer(lambda: TensorSpec(name, shape, dtype, spec), seconds=10)
    if isinstance(t, TensorSpec):
        assert len(t.shape) <= MAX_RANK
        assert all(type(d) is int and d >= 1 for d in t.shape)
        assert math.prod(t.shape) <= MAX_ELEMENTS
        assert t.dtype in DTYPE_BYTES


@cases(400)
@given(mesh=MESHES, axis_type=AXIS_TYPES)
def test_parse_mesh(mesh, axis_type):
    m = answer(lambda: parse_mesh(mesh, axis_type), seconds=10)
    if isinstance(m, MeshSpec):
        assert all(type(s) is int and s >= 1 for s in m.sizes)
        assert m.device_count <= MAX_MESH_DEVICES


@cases(300)
@given(text=usually(SPEC_TEXT, JUNK))
def test_parse_spec(text):
    spec = answer(lambda: parse_spec(text), seconds=10)
    if not isinstance(spec, ExplorerError):
        assert all(e is None or isinstance(e, str) or
                   (isinstance(e, tuple) and all(isinstance(a, str) for a in e)) for e in spec)


@cases(300)
@given(rules=st.one_of(st.none(), RULES))
def test_parse_rules(rules):
    answer(lambda: parse_rules(rules), seconds=10)


# --- analyze and analyze_workload ---------------------------------------------------------------

def _held_fixed(tree) -> bool:
    """Whether `tree` has a leaf that is no input: neither a TensorSpec nor array-like."""
    import jax

    return any(not isinstance(x, TensorSpec) and not is_array_like(x)
               for x in jax.tree.leaves(tree, is_leaf=lambda x: isinstance(x, TensorSpec)))


@cases(600)
@given(data=st.data())
def test_analyze(data):
    # One case in 25 is a valid request on a mesh of 1 or 2 devices, compiled for real.
    if data.draw(st.integers(0, 24), label="compile") == 0:
        fn = data.draw(st.sampled_from([total, broken]), label="fn")
        mesh = data.draw(TINY_MESHES, label="mesh")
        args = data.draw(input_trees(list(parse_mesh(mesh).names)), label="args")
        r = answer(lambda: analyze(fn, *args, mesh=mesh, timeout=120), seconds=300)
        if isinstance(r, explorer.SpecError | explorer.TensorError):   # a bad input, say so
            return
        # A function that raises while jax traces it is the user's bug, reported as such; so
        # is `total` given leaves that are no arrays (held fixed, as a closure would hold them).
        fails = fn is broken or any(_held_fixed(a) for a in args)
        assert isinstance(r, explorer.CompileError if fails else Report), r
        if fails:
            assert "raised while it was traced" in str(r), r
        return
    mesh = data.draw(MESHES, label="mesh")
    try:
        axes, devices = list(parse_mesh(mesh).names), parse_mesh(mesh).device_count
    except ExplorerError:
        axes, devices = AXES, 8
    target, mapping = data.draw(targets_for(devices), label="target, mapping")
    kwargs = {
        "partitioner": data.draw(PARTITIONERS, label="partitioner"),
        "axis_type": data.draw(AXIS_TYPES, label="axis_type"),
        "timeout": data.draw(TIMEOUTS, label="timeout"),
        "target": target, "mapping": mapping,
        "measure": data.draw(usually(st.booleans(), JUNK), label="measure"),
        "tpu_topology": data.draw(usually(st.none(), st.one_of(
            st.sampled_from(["v5e:2x2", "v4:2x2x2", "v5e:2"]), st.text(max_size=8), JUNK)),
            label="tpu_topology"),
        "real_devices": data.draw(usually(st.just(False), st.one_of(st.just(True), JUNK)),
                                  label="real_devices"),
    }
    fn = data.draw(usually(st.just(total), JUNK), label="fn")
    args = data.draw(input_trees(axes), label="args")
    r = answer(lambda: analyze(fn, *args, mesh=mesh, cache_only=True, **kwargs), seconds=30)
    assert r is None or isinstance(r, Report | ExplorerError)


@cases(500)
@given(data=st.data())
def test_analyze_workload(data):
    if data.draw(st.integers(0, 24), label="compile") == 0:
        # A valid request for a small workload on a mesh of 1 or 2 devices, compiled for real.
        name = data.draw(st.sampled_from(["matmul", "mlp", "mlp_train"]), label="name")
        sizes = ("m", "k", "n") if name == "matmul" else ("batch", "d_model", "d_ff")
        params = {k: data.draw(st.sampled_from([4, 8, 16]), label=k) for k in sizes}
        mesh = data.draw(st.sampled_from(["d=1", "d=2"]), label="mesh")
        target = data.draw(st.sampled_from([None, "cpu"]), label="target")
        r = answer(lambda: analyze_workload(name, mesh, params=params, timeout=120,
                                            target=target), seconds=300)
        assert isinstance(r, Report), r
        return
    name = data.draw(usually(st.sampled_from(list(WORKLOADS)), JUNK), label="name")
    workload = WORKLOADS.get(name) if isinstance(name, str) else None
    mesh = data.draw(usually(st.one_of(st.sampled_from(["stage=4", "expert=8", "data=2,model=4",
                                                        "stage=4,data=2"]), MESHES),
                             BAD_MESHES), label="mesh")
    try:
        devices = parse_mesh(mesh).device_count
    except ExplorerError:
        devices = 8
    target, mapping = data.draw(targets_for(devices), label="target, mapping")
    tensors = list(workload.shapes(workload.resolve())) if workload else ["x"]
    points = list(workload.points(workload.resolve())) if workload and workload.points else []
    kwargs = {
        "params": data.draw(usually(good_params(workload) if workload else st.none(),
                                    BAD_PARAMS), label="params"),
        "specs": data.draw(usually(st.none(), st.one_of(st.dictionaries(
            st.one_of(st.sampled_from(tensors), st.text(max_size=3)), SPECS, max_size=3),
            JUNK)), label="specs"),
        "preset": data.draw(usually(st.none(), st.one_of(st.sampled_from(list(explorer.PRESETS)),
                                                         JUNK), one_in=3), label="preset"),
        "rules": data.draw(usually(st.none(), RULES, one_in=3), label="rules"),
        "activations": data.draw(usually(st.none(), st.one_of(st.dictionaries(
            st.one_of(st.sampled_from(points + ["hidden", "nowhere"]), KEY_JUNK),
            st.one_of(SPECS, st.just("free")), max_size=3), JUNK)), label="activations"),
        "timeout": data.draw(TIMEOUTS, label="timeout"),
        "target": target, "mapping": mapping,
        "partitioner": data.draw(PARTITIONERS, label="partitioner"),
    }
    r = answer(lambda: analyze_workload(name, mesh, cache_only=True, **kwargs), seconds=30)
    assert r is None or isinstance(r, Report | ExplorerError)


# --- the command line ---------------------------------------------------------------------------

def _valid_port(text: str) -> bool:
    try:
        return 1 <= int(text) <= 65535
    except ValueError:
        return False


TOKENS = st.one_of(st.text(max_size=8), st.sampled_from([
    "--json", "--hlo", "optimized", "--measure", "--spec", "--param", "--mesh", "--workload",
    "--timeout", "--target", "--mapping", "--preset", "--rules", "--activation", "-h", "--",
    "--partitioner", "gspmd", "--axis-type", "explicit", "x=d,None", "batch=8", "d=2"]))
BAD_PIECES = st.one_of(
    st.tuples(st.just("--timeout"), st.sampled_from(["nan", "inf", "-inf", "-1", "0", "1e400",
                                                    "soon", "", "86401", "9" * 400])),
    st.tuples(st.just("--param"), st.builds(lambda k, v: f"{k}={v}",
                                            st.sampled_from(PARAM_NAMES + ["depth"]),
                                            st.sampled_from(["nan", "inf", "-1", "0", "1e3",
                                                             "9" * 5000, "2.5", "", "lots"]))),
    st.tuples(st.just("--mesh"), st.sampled_from(["d=0", "d=two", "a=64,b=64", "",
                                                  "d=" + "9" * 5000, "d=2,d=2", "1x=2"])),
    st.tuples(st.just("--spec"), st.sampled_from(["w1=None,modle", "x", "x=d,d", "zz=d",
                                                  "x=" + "(" * 50, "x=P('d'"])),
    st.tuples(st.just("--target"), st.sampled_from(["h1000-8", "tpu-v5e-" + "9" * 5000 + "x4",
                                                    "h100-8"])),
    st.tuples(st.just("--mapping"), st.sampled_from(["d=gpu:" + "9" * 5000, "d=tpu",
                                                     "d=gpu:x"])),
    st.tuples(st.just("--preset"), st.sampled_from(["zero4", "pp", "megatron"])),
    st.tuples(st.just("--rules"), st.sampled_from(["mpl=model", "batch=", "a:b:c=d"])),
    st.tuples(st.just("--activation"), st.sampled_from(["layer0", "lyr0=d", "hidden=5,5"])),
    st.tuples(st.just("--tpu-topology"), st.sampled_from(["v9:4x4", "v5e:" + "9" * 5000,
                                                          "v5e:2x2x2"])),
    st.tuples(st.just("--workload"), st.sampled_from(["resnet", "", "MLP"])),
    st.tuples(st.just("--bogus"), st.text(max_size=4)))


@st.composite
def argvs(draw):
    command = draw(st.sampled_from(["analyze"] * 6 + ["app", "workloads", "presets",
                                                      "targets"]))
    if command == "app":
        # A valid port would start Voila and block; argument handling is what is tested.
        port = draw(st.one_of(st.text(max_size=6), st.sampled_from(["-5", "0", "65536", "1e3"]))
                    .filter(lambda p: not _valid_port(p)))
        return ["app", "--port", port, *draw(st.lists(TOKENS, max_size=2))]
    if command != "analyze":
        return [command, *draw(st.lists(TOKENS, max_size=1))]
    workload = draw(st.sampled_from(["matmul", "mlp"]))
    argv = ["analyze", "--workload", workload, "--mesh", draw(st.sampled_from(["d=1", "d=2"])),
            "--param", "m=8" if workload == "matmul" else "batch=8", "--param",
            "k=8" if workload == "matmul" else "d_model=8", "--param",
            "n=8" if workload == "matmul" else "d_ff=8"]
    if draw(st.booleans()):
        argv += ["--spec", "x=d,None"]
    if draw(st.booleans()):
        argv += ["--json"]
    if draw(st.booleans()):
        argv += ["--target", "cpu"]
    # One case in 25 stays valid and compiles; the others break at least one piece.
    if draw(st.integers(0, 24)) == 0:
        return argv
    pieces = draw(st.lists(BAD_PIECES, min_size=1, max_size=3))
    for flag, value in pieces:
        argv += [flag, value]
    argv += draw(st.lists(TOKENS, max_size=2))
    return argv


def _reject_constant(name):
    raise ValueError(f"{name} is not JSON")


@cases(400)
@given(argv=argvs())
def test_cli_arguments(argv):
    from explorer._src.cli import main

    assume(argv[0] != "app" or "-h" not in argv)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), time_bound(300):
        try:
            code = main(argv)
        except SystemExit as e:        # argparse: 2 for bad arguments, 0 for --help
            code = e.code
    assert code in (0, 2), (code, err.getvalue()[-2000:])
    assert "Traceback" not in err.getvalue()
    if code == 2:
        assert "error:" in err.getvalue()
    elif argv[0] == "analyze" and "--json" in argv and "-h" not in argv and "--hlo" not in argv:
        json.loads(out.getvalue(), parse_constant=_reject_constant)
