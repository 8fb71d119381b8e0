"""explorer.analyze's `extrapolate`: a stack of identical layers compiled at two small layer
counts and carried on linearly, held against the full compile of the same model.

The slow tests compile each model three times (at 3, 4 and its own layer count) and compare
the extrapolated Report with the full one: every collective's count and bytes exactly, and the
memory and predicted times within the error measured here and written in docs/cost-model.md
("Extrapolated layers"), with a margin for what the compilers round.
"""

from __future__ import annotations

from collections import Counter

import pytest

import explorer
from explorer._src.api.extrapolate import check_extrapolate
from explorer._src.compile.tpu import libtpu_installed

# The largest relative errors measured (docs/cost-model.md, "Extrapolated layers"), each with
# a margin: the temporaries, which libtpu's buffer assignment does not grow linearly in the
# layers (5.7% off at 8 layers for tpu-v5e-2x4), the arguments and outputs, which a TPU pads
# (0.5%), the memory in all (2.8%) and the predicted times (0.15%).
BOUNDS = {"memory.temporaries": 0.10, "memory.arguments": 0.02, "memory.outputs": 0.02,
          "memory.total": 0.05}
TIME_ERROR = 0.01


def test_the_option_forms_read():
    assert check_extrapolate(False) is None and check_extrapolate(None) is None
    assert check_extrapolate(True) == ("on", (3, 4))
    assert check_extrapolate("auto") == ("auto", (3, 4))
    assert check_extrapolate("2,4") == ("on", (2, 4))
    assert check_extrapolate("auto:2, 5") == ("auto", (2, 5))
    assert check_extrapolate((3, 6)) == ("on", (3, 6))


@pytest.mark.parametrize("bad", ["sometimes", "4,2", (0, 2), (2, 2), "2", (2.0, 3), [1]])
def test_a_bad_option_is_named(bad):
    with pytest.raises(explorer.InputError, match="extrapolate="):
        check_extrapolate(bad)


def test_a_function_has_no_layers_to_count():
    def f(x):
        return x * 2

    with pytest.raises(explorer.InputError, match="built-in workload's stack of layers"):
        explorer.analyze(f, explorer.TensorSpec("x", (8, 8), "float32", "data,None"),
                         mesh="data=2", extrapolate=True)


def test_a_workload_without_layers_is_refused_naming_its_params():
    with pytest.raises(explorer.InputError, match="has no layer count.*experts"):
        explorer.analyze_workload("moe", "data=2,model=4", extrapolate=True)


def test_a_measured_run_is_not_extrapolated():
    with pytest.raises(explorer.InputError, match="extrapolate with measure=True"):
        explorer.analyze_workload("transformer_train", "data=2,model=4", preset="megatron",
                                  params={"layers": 8}, measure=True, extrapolate=True)


def _counts(report: explorer.Report) -> Counter:
    """Each collective's kind, mesh axes and bytes, counted by the times a step runs it."""
    out: Counter = Counter()
    for c in report.collectives:
        out[(c.kind, c.axes, c.bytes)] += c.runs
    return out


def _relative(a: float, b: float) -> float:
    return abs(a - b) / abs(b) if b else abs(a)


def errors(ext: explorer.Report, full: explorer.Report) -> dict[str, float]:
    """The extrapolated Report's relative error against the full compile's, per figure."""
    out = {f"memory.{f}": _relative(getattr(ext.memory, f), getattr(full.memory, f))
           for f in ("arguments", "outputs", "temporaries", "total")}
    out["flops"] = _relative(ext.cost.flops, full.cost.flops)
    e, f = ext.estimate, full.estimate
    for name in ("step_lower_seconds", "step_upper_seconds", "step_trace_seconds",
                 "comm_seconds"):
        if getattr(f, name) is not None:
            out[name] = _relative(getattr(e, name), getattr(f, name))
    return out


def check_against_full(workload: str, mesh: str, layers: int, **kwargs):
    full = explorer.analyze_workload(workload, mesh, params={**kwargs.pop("params", {}),
                                                             "layers": layers}, **kwargs)
    ext = explorer.analyze_workload(workload, mesh, params=dict(full.workload.params),
                                    extrapolate=True, **kwargs)
    assert full.extrapolated is None
    assert ext.extrapolated is not None and ext.extrapolated.from_layers == (3, 4)
    assert ext.extrapolated.layers == layers and ext.workload.params["layers"] == layers
    assert tuple(ext.to_dict()["extrapolated"]["from_layers"]) == (3, 4)
    # Collectives per layer: every kind, axes and size run as often as in the full compile.
    assert _counts(ext) == _counts(full)
    assert ext.cost.collective_bytes == full.cost.collective_bytes
    # The stacked weights' shapes, as the full compile has them.
    shapes = {t.name: t.shape for t in full.tensors if t.kind != explorer.TensorRole.INTERMEDIATE}
    for t in ext.tensors:
        if t.name in shapes:
            assert t.shape == shapes[t.name], t.name
    measured = errors(ext, full)
    print(workload, mesh, layers, kwargs.get("target"), {k: round(v, 4)
                                                          for k, v in measured.items()})
    for name, err in measured.items():
        assert err <= BOUNDS.get(name, TIME_ERROR), (name, err, measured)
    return ext, full


LLAMA_LIKE = {"mlp": "swiglu", "kv_heads": 2, "d_model": 128, "heads": 4, "d_head": 32,
              "d_ff": 256}


@pytest.mark.slow
@pytest.mark.parametrize("mesh,preset,params", [
    ("data=2,model=4", "megatron", {}),                         # scanned, tensor parallel
    ("data=4,model=2", "fsdp_tp", LLAMA_LIKE),                  # Llama-shaped, FSDP + TP
    ("data=8", "fsdp", {}),                                     # FSDP
])
def test_extrapolated_matches_the_full_compile_on_cpu_devices(mesh, preset, params):
    check_against_full("transformer_train", mesh, 8, preset=preset, params=params,
                       target="tpu-v5e-2x4", compile_for="cpu", use_cache=False)


@pytest.mark.slow
@pytest.mark.skipif(not libtpu_installed(), reason="needs libtpu (the tpu extra)")
@pytest.mark.parametrize("mesh,preset,params", [
    ("data=2,model=4", "megatron", {}),
    ("data=4,model=2", "fsdp_tp", LLAMA_LIKE),
])
def test_extrapolated_matches_the_full_compile_for_a_tpu_slice(mesh, preset, params):
    ext, full = check_against_full("transformer_train", mesh, 8, preset=preset, params=params,
                                   target="tpu-v5e-2x4", use_cache=False)
    assert ext.ahead_of_time and full.ahead_of_time


@pytest.mark.slow
def test_an_unrolled_stack_whose_collectives_combine_otherwise_is_refused():
    # scan_layers=false: one copy of each layer, whose gradient all-reduces XLA's combiner
    # merges into one collective named by all its parts, a different one at each layer count.
    with pytest.raises(explorer.InputError, match="cannot extrapolate"):
        explorer.analyze_workload("transformer_train", "data=8", preset="fsdp",
                                  params={"layers": 6, "scan_layers": "false"},
                                  extrapolate=True)


@pytest.mark.slow
def test_auto_compiles_in_full_under_the_time_limit():
    report = explorer.analyze_workload("transformer_train", "data=2,model=4", preset="megatron",
                                       params={"layers": 6}, extrapolate="auto",
                                       timeout=3600)
    assert report.extrapolated is None and report.workload.params["layers"] == 6
