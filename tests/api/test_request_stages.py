"""A Request's stages, as jax's own jit -> trace -> Lowered -> Compiled: a Request is checked
when it is made and nothing more; `plan()` places its inputs (once per Request), `lower()`
traces it (once per plan), and an edit (dataclasses.replace) makes again only the stages whose
inputs changed. The expected shard specs and collectives are worked out by hand from the shapes
and the mesh; plain jax decides whether a function traces."""

import dataclasses
import pickle

import jax
import pytest

import explorer
from explorer import Request, TensorSpec
from explorer._src.api import analysis_request, analyze
from explorer._src.compile import lowering
from explorer._src.lru import Lru

MESH = "data=2,model=4"


@pytest.fixture
def counted(monkeypatch):
    """Calls of each stage's work: the layout plan (`plan`), a function's inputs named
    (`named_inputs`) and the trace (`trace_and_lower`); nothing planned or traced by earlier
    tests is reused."""
    monkeypatch.setattr(analysis_request, "_LAYOUTS", Lru(analysis_request.LAYOUTS_KEPT))
    monkeypatch.setattr(lowering, "_LOWERED", Lru(lowering.LOWERED_MEMO_SIZE))
    calls = {"plan": 0, "named_inputs": 0, "trace_and_lower": 0}
    for module, name in ((analysis_request, "plan"), (analysis_request, "named_inputs"),
                         (lowering, "trace_and_lower")):
        real = getattr(module, name)

        def count(*a, _real=real, _name=name, **k):
            calls[_name] += 1
            return _real(*a, **k)
        monkeypatch.setattr(module, name, count)
    return calls


def matmul(x, w):
    return x @ w


def other_matmul(x, w):
    return (x @ w) * 2


X = TensorSpec("x", (256, 1024), "float32", "data,model")
W = TensorSpec("w", (1024, 512), "float32", "model,None")


def test_a_function_request_is_traced_once_and_an_edit_of_the_target_traces_nothing(counted):
    # Compiled on CPU devices whatever the target (compile_for="cpu"): a target whose own
    # compiler is installed is lowered for its platform, another program.
    request = Request(fn=matmul, inputs=(X, W), mesh=MESH, compile_for="cpu")
    assert counted == {"plan": 0, "named_inputs": 0, "trace_and_lower": 0}   # checked only
    planned = request.plan()
    assert counted["named_inputs"] == 1 and counted["trace_and_lower"] == 0
    lowered = planned.lower()
    assert planned.lower() is lowered and request.plan() is planned
    assert counted["trace_and_lower"] == 1
    assert lowered.platform == "cpu" and [o.shape for o in lowered.outputs] == [(256, 512)]

    for changes in ({"target": "h100-8"}, {"target": "h100-8", "mapping": "data=gpu:2,model=gpu:4"},
                    {"timeout": 30}):
        edited = dataclasses.replace(request, **changes)
        again = edited.plan()
        assert again.lower().stablehlo == lowered.stablehlo
        assert counted == {"plan": 0, "named_inputs": 1, "trace_and_lower": 1}, changes
    # Each plan holds its own request's compile: the mapping and timeout are the edit's.
    assert request.plan().mapping is None
    mapped = dataclasses.replace(request, target="h100-8", mapping="data=gpu:2,model=gpu:4")
    assert mapped.plan().mapping.to_dict() == {"data": "gpu:2", "model": "gpu:4"}
    assert dataclasses.replace(request, timeout=30).plan().timeout == 30.0

    # New specs: the inputs placed again and traced again (the layout is in the program).
    respecced = dataclasses.replace(request, inputs=(X, TensorSpec("w", (1024, 512), "float32",
                                                                   "None,model")))
    assert [t.spec for t in respecced.plan().leaves] == [("data", "model"), (None, "model")]
    respecced.plan().lower()
    assert counted["named_inputs"] == 2 and counted["trace_and_lower"] == 2
    # A new function: traced again.
    dataclasses.replace(request, fn=other_matmul).plan().lower()
    assert counted["trace_and_lower"] == 3


def test_a_workload_edit_plans_again_only_where_the_layout_reads_the_change(counted):
    request = Request(workload="mlp", mesh=MESH, preset="megatron")
    planned = request.plan()
    assert counted["plan"] == 1
    retargeted = dataclasses.replace(request, target="h100-8", compile_for="cpu", timeout=60)
    assert retargeted.plan().layout is planned.layout           # the same plan, not a new one
    assert counted["plan"] == 1
    lowered = planned.lower()
    assert retargeted.plan().lower().stablehlo == lowered.stablehlo
    assert counted["trace_and_lower"] == 1
    # A hand-set spec over the preset: planned again, w2 now split by columns as w1 is.
    respecced = dataclasses.replace(request, specs={"w2": "None,model"})
    assert [t.spec for t in respecced.plan().leaves] == [("data", None), (None, "model"),
                                                         (None, "model")]
    assert counted["plan"] == 2


def test_errors_that_need_no_plan_come_when_the_request_is_made():
    with pytest.raises(explorer.SpecError, match="spec 1.5 of tensor 'x'"):
        Request(workload="mlp", mesh=MESH, specs={"x": 1.5})
    with pytest.raises(explorer.PresetError, match="megatorn"):
        Request(workload="mlp", mesh=MESH, preset="megatorn")
    with pytest.raises(explorer.SpecError):
        Request(fn=matmul, inputs=(X, W), mesh=MESH, specs={"(": "data"})


def test_errors_that_need_the_plan_or_the_trace_come_from_plan_lower_and_analyze():
    # 1024 rows of w over data=3 do not divide: known once the layout is planned.
    bad_spec = Request(fn=matmul, inputs=(X, TensorSpec("w", (1024, 512), "float32",
                                                        "None,data")),
                       mesh="data=3,model=4")
    with pytest.raises(explorer.DivisibilityError):
        bad_spec.plan()
    with pytest.raises(explorer.DivisibilityError):
        explorer.analyze(bad_spec)

    def wrong_rank(x, w):
        return x @ w @ w            # (256, 512) @ (1024, 512): jax refuses it when traced

    with pytest.raises(TypeError):
        jax.eval_shape(wrong_rank, jax.ShapeDtypeStruct((256, 1024), "float32"),
                       jax.ShapeDtypeStruct((1024, 512), "float32"))
    request = Request(fn=wrong_rank, inputs=(X, W), mesh=MESH)     # made: nothing traced
    planned = request.plan()                                        # planned: still nothing
    with pytest.raises(explorer.CompileError, match="wrong_rank"):
        planned.lower()
    with pytest.raises(explorer.CompileError, match="wrong_rank"):
        explorer.analyze(wrong_rank, X, W, mesh=MESH)


def test_a_pickled_request_keeps_its_plan_and_lowered_program():
    request = Request(fn=matmul, inputs=(X, W), mesh=MESH, target="h100-8")
    copy = pickle.loads(pickle.dumps(request))
    assert copy.fn is None and copy.context is None             # neither travels
    assert copy.device_count == 8
    assert copy.plan().key == request.plan().key
    assert copy.plan().lowered.stablehlo == request.plan().lowered.stablehlo
    assert [t.spec for t in copy.plan().leaves] == [("data", "model"), ("model", None)]
    # A workload's plan holds the workload's functions: Ray sends it with cloudpickle.
    cloudpickle = pytest.importorskip("cloudpickle")
    workload = Request(workload="mlp", mesh=MESH, preset="megatron")
    sent = pickle.loads(cloudpickle.dumps(workload))
    assert sent.context is None and sent.plan().key == workload.plan().key
    # Run where it arrives: one all-reduce over model of each device's (256 / 2, 1024)
    # float32 partial sum.
    [ar] = explorer.analyze(sent).collectives
    assert (ar.axes, ar.bytes) == (("model",), 128 * 1024 * 4)


def test_a_cache_hit_is_one_copy_of_the_report_and_priced_once(monkeypatch):
    from explorer._src.report import predict

    priced = {"n": 0}
    real = predict.with_target

    def count(*a, **k):
        priced["n"] += 1
        return real(*a, **k)
    monkeypatch.setattr(predict, "with_target", count)
    request = Request(workload="mlp", mesh=MESH, preset="megatron", target="h100-8",
                      compile_for="cpu")
    first = explorer.analyze(request)
    again = explorer.analyze(request)
    edited = explorer.analyze(dataclasses.replace(request, timeout=30))
    assert again.timing.cached and edited.timing.cached
    assert priced["n"] <= 1                 # at most once (none where an earlier test priced it)
    # The same prediction every time: one all-reduce over model of 128 x 1024 float32.
    for r in (first, again, edited):
        [ar] = r.collectives
        assert (ar.axes, ar.bytes) == (("model",), 128 * 1024 * 4)
        assert ar.est_seconds == first.collectives[0].est_seconds
    # Another mapping is another prediction.
    remapped = explorer.analyze(dataclasses.replace(request, peak=True))
    assert remapped.estimate != first.estimate
    analyze.clear_cache()
