"""The public surface is chosen, not computed: explorer.__all__ is pinned here, and every type a
Report holds (and an Estimate, which a Report holds) is part of it, so users and benchmarks never
need a private import to name what the API returns."""

import dataclasses
import enum
import inspect
import types
import typing
from pathlib import Path

import pytest

import explorer

PINNED = {
    "analyze", "analyze_workload", "clear_cache", "PARTITIONERS", "Partitioner", "CompileFor",
    "WorkerPool", "Request", "Session", "Edit", "Result", "TimeSpent",
    "TensorSpec", "parse_spec", "MeshSpec", "AxisType", "parse_mesh",
    "WORKLOADS", "Workload", "PRESETS", "Preset", "get_preset",
    "Rules", "parse_rules", "logical_spec", "LOGICAL_NAMES",
    "Report", "Collective", "CollectiveKind", "TensorInfo", "TensorRole", "Memory", "Cost",
    "Timing", "WorkloadInfo", "Buffer", "MemoryVerdict", "CompilerWarning",
    "Why", "Reason", "Evidence", "Operand", "OperandRole", "RingDirection",
    "Origins", "DimOrigin", "AxisOrigin", "OriginKind", "PathStep", "LayoutConflict",
    "MemoryTimeline", "MemoryPoint", "BufferKind", "MeasuredEvent", "write_xprof", "XprofRun",
    "MemoryKind",
    "Extrapolation",
    "summary", "compare", "ReportComparison",
    "targets", "get_target", "Target", "Estimate", "CollectiveTime", "ComputeTime", "MemoryFit",
    "Bound", "CollectiveBound", "AxisMapping", "Tier", "StepTrace", "TraceEvent", "TraceLane",
    "VectorUnit", "SortingRates", "Float32Matmuls", "StepRange", "RangePart", "TimeBasis",
    "what_if", "WhatIf",
    "Exploration", "AppState", "FunctionRef", "load_exploration",
    "search", "SearchResult", "Candidate", "CandidateStatus", "CollectiveCost",
    "CollectiveGroup", "Comparison", "Progress", "SearchStats", "ClusterSize", "SearchSpace",
    "SearchPhase", "StopReason", "TimeSource", "CompiledBy",
    "largest_batch", "CapacityResult", "PolicyCapacity", "BatchProbe",
    "ExplorerError", "InputError", "CompileError", "DivisibilityError", "DuplicateAxisError",
    "JaxVersionError", "MappingError", "MeshError", "PresetError", "RankError", "RuleError",
    "SpecError",
    "TargetError",
    "TensorError", "UnknownAxisError", "WorkerError", "WorkerLost", "CompileAbandoned",
    "WorkloadError",
}


def test_all_is_the_pinned_list_and_each_name_exists():
    assert set(explorer.__all__) == PINNED
    assert len(explorer.__all__) == len(PINNED), "a name is listed twice"
    for name in explorer.__all__:
        assert getattr(explorer, name) is not None


def _held_types(cls, seen):
    """The explorer classes reachable from a dataclass's field annotations."""
    if cls in seen:
        return
    seen.add(cls)
    hints = typing.get_type_hints(cls)
    for hint in hints.values():
        stack = [hint]
        while stack:
            h = stack.pop()
            stack.extend(typing.get_args(h))
            if isinstance(h, type) and h.__module__.startswith("explorer"):
                if dataclasses.is_dataclass(h):
                    _held_types(h, seen)
                elif issubclass(h, enum.Enum):
                    seen.add(h)


def test_every_type_a_report_holds_is_public():
    held = set()
    _held_types(explorer.Report, held)
    assert explorer.Collective in held and explorer.Estimate in held   # the walk reaches them
    missing = sorted(c.__name__ for c in held if getattr(explorer, c.__name__, None) is not c)
    assert missing == [], f"types a Report holds but explorer does not export: {missing}"


def test_every_error_is_public_and_an_explorer_error():
    import explorer._src.errors as errors

    for name, obj in vars(errors).items():
        if isinstance(obj, type) and issubclass(obj, Exception) \
                and obj.__module__ == "explorer":
            assert issubclass(obj, explorer.ExplorerError)
            assert getattr(explorer, name) is obj, f"{name} is not exported"


def test_except_value_error_catches_bad_input_but_not_a_lost_worker():
    from explorer._src.compile.protocol import WorkerKey

    with pytest.raises(ValueError, match="size 0"):
        explorer.parse_mesh("data=0")
    pool = explorer.WorkerPool(python="/nonexistent/bin/python3")
    try:
        with pytest.raises(explorer.WorkerError, match="interpreter .* was not found"):
            try:
                pool.warm(WorkerKey.fake_cpu(2))
            except ValueError:
                pytest.fail("except ValueError caught a worker that could not start")
    finally:
        pool.close()
    # A compile that jax or XLA refused is no bad argument either.
    assert not issubclass(explorer.CompileError, ValueError)
    assert issubclass(explorer.CompileError, RuntimeError)


def test_no_module_objects_leak_into_the_surface():
    assert not [n for n in explorer.__all__ if isinstance(getattr(explorer, n), types.ModuleType)]


ROOT = Path(__file__).resolve().parents[1]
# What a user reads: the README, the tutorials (not the app's own page, notebooks/app.ipynb,
# which is the app's code) and the examples.
USER_FILES = [ROOT / "README.md",
              *(p for p in sorted((ROOT / "notebooks").glob("*.ipynb")) if p.name != "app.ipynb"),
              *sorted((ROOT / "examples").glob("*.py"))]


@pytest.mark.parametrize("path", USER_FILES, ids=lambda p: p.name)
def test_what_users_read_imports_nothing_private(path):
    assert "explorer._src" not in path.read_text()


def test_the_public_names_docstrings_send_users_to_no_private_module():
    import explorer.ui

    sent = [(face.__name__, name) for face in (explorer, explorer.ui) for name in face.__all__
            if "explorer._src" in (inspect.getdoc(getattr(face, name)) or "")]
    assert sent == []
