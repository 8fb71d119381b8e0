"""sharding-explorer: see what GSPMD/Shardy did to a sharded JAX program.

A function is compiled on abstract, sharded inputs (or a built-in workload, its tensors placed
by a strategy), and what the partitioner did is read back per device: the collectives it
inserted and why, where each block of each tensor lies, memory and cost, and on a hardware
target the predicted step time. Nothing is allocated and no accelerator is needed: programs
compile on fake CPU devices in a worker process.

- `analyze(fn, *tensor_specs, mesh=...)` and `analyze_workload(name, mesh, preset=...)` return
  a Report; both build a `Request` (one validated, planned analysis), which `analyze(request)`
  takes as it is; `targets()` and `get_target()` name the hardware a Report can be priced on.
- `what_if(report, collective=i)` compiles the spec changes that might remove collective i and
  returns those a compile confirmed.
- A request is made of TensorSpecs and a MeshSpec (`parse_spec` and `parse_mesh` read their
  text); a Report holds frozen, JSON-able dataclasses, every one of them exported here.
- Every error the explorer raises is an ExplorerError whose message names the value at
  fault, the rule and the choices.

The public surface is what this module lists in `__all__`: the functions, the request types
(TensorSpec, MeshSpec), the Report and every type a Report holds, and the errors. Everything is
defined in the private package explorer._src (one subpackage per stage of the pipeline: spec,
hlo, cost, compile, workloads, report, strategy, api, layout_search), free to change between
releases; this module, explorer.ui (the app) and explorer.cli (the command line) are its public
faces, and only re-export. The core imports no UI library and returns plain data.
"""

# First, before anything can import jax: on a machine with no GPU or TPU, the user's jax on the CPU.
from explorer._src import quiet_jax as _quiet_jax  # noqa: F401 - imported for what its import does
from explorer._src.api.analysis_request import Request
from explorer._src.api.analyze import analyze, clear_cache
from explorer._src.api.exploration import AppState, Exploration, FunctionRef
from explorer._src.api.exploration import load as load_exploration
from explorer._src.api.request import PARTITIONERS
from explorer._src.api.session import Edit, Result, Session, TimeSpent
from explorer._src.api.targeting import CompileFor
from explorer._src.api.what_if import WhatIf, what_if
from explorer._src.api.workload import analyze_workload
from explorer._src.compile.device_profile import MeasuredEvent
from explorer._src.compile.pool import WorkerPool
from explorer._src.compile.protocol import Partitioner
from explorer._src.cost.catalog.names import get_target, targets
from explorer._src.cost.catalog.types import SortingRates, Target, VectorUnit
from explorer._src.cost.collectives import CollectiveBound, CollectiveTime
from explorer._src.cost.compute import Bound, ComputeTime, Float32Matmuls
from explorer._src.cost.coverage import TimeBasis
from explorer._src.cost.estimate import Estimate
from explorer._src.cost.mapping import AxisMapping, Tier
from explorer._src.cost.memory_fit import MemoryFit
from explorer._src.cost.ranges import RangePart, StepRange
from explorer._src.errors import (
    CompileAbandoned,
    CompileError,
    DivisibilityError,
    DuplicateAxisError,
    ExplorerError,
    InputError,
    JaxVersionError,
    MappingError,
    MeshError,
    PresetError,
    RankError,
    RuleError,
    SpecError,
    TargetError,
    TensorError,
    UnknownAxisError,
    WorkerError,
    WorkerLost,
    WorkloadError,
)
from explorer._src.hlo.collectives import CollectiveKind
from explorer._src.hlo.groups import RingDirection
from explorer._src.layout_search.capacity import (
    BatchProbe,
    CapacityResult,
    PolicyCapacity,
    largest_batch,
)
from explorer._src.layout_search.connect import ClusterSize
from explorer._src.layout_search.result import (
    Candidate,
    CandidateStatus,
    CollectiveCost,
    CollectiveGroup,
    Comparison,
    CompiledBy,
    Progress,
    SearchPhase,
    SearchResult,
    SearchSpace,
    SearchStats,
    StopReason,
    TimeSource,
)
from explorer._src.layout_search.search import search
from explorer._src.report.compare import ReportComparison, compare
from explorer._src.report.origins import (
    AxisOrigin,
    DimOrigin,
    LayoutConflict,
    OriginKind,
    Origins,
    PathStep,
)
from explorer._src.report.report import (
    Buffer,
    BufferKind,
    Collective,
    CompilerWarning,
    Cost,
    Extrapolation,
    Memory,
    MemoryKind,
    MemoryPoint,
    MemoryTimeline,
    MemoryVerdict,
    Report,
    TensorInfo,
    TensorRole,
    Timing,
    WorkloadInfo,
)
from explorer._src.report.summary import summary
from explorer._src.report.trace import StepTrace, TraceEvent, TraceLane
from explorer._src.report.why import Evidence, Operand, OperandRole, Reason, Why
from explorer._src.report.xprof import XprofRun, write_xprof
from explorer._src.spec.mesh import AxisType, MeshSpec, parse_mesh
from explorer._src.spec.tensor import TensorSpec, parse_spec
from explorer._src.strategy.presets import PRESETS, Preset, get_preset
from explorer._src.strategy.rules import LOGICAL_NAMES, Rules, logical_spec, parse_rules
from explorer._src.workloads.base import Workload
from explorer._src.workloads.registry import WORKLOADS

__all__ = [
    # analysis
    "analyze", "analyze_workload", "clear_cache", "PARTITIONERS", "Partitioner", "CompileFor",
    "WorkerPool", "Request", "Session", "Edit", "Result", "TimeSpent",
    # the request
    "TensorSpec", "parse_spec", "MeshSpec", "AxisType", "parse_mesh",
    # built-in workloads and strategies
    "WORKLOADS", "Workload", "PRESETS", "Preset", "get_preset",
    "Rules", "parse_rules", "logical_spec", "LOGICAL_NAMES",
    # the Report and what it holds
    "Report", "Collective", "CollectiveKind", "TensorInfo", "TensorRole", "Memory", "Cost",
    "Timing", "WorkloadInfo", "Buffer", "MemoryVerdict", "CompilerWarning",
    "Why", "Reason", "Evidence", "Operand", "OperandRole", "RingDirection",
    "Origins", "DimOrigin", "AxisOrigin", "OriginKind", "PathStep", "LayoutConflict",
    "MemoryTimeline", "MemoryPoint", "BufferKind", "MeasuredEvent", "Extrapolation", "MemoryKind",
    # a Report as text, and two Reports compared
    "summary", "compare", "ReportComparison",
    # open in XProf or TensorBoard
    "write_xprof", "XprofRun",
    # predictions
    "targets", "get_target", "Target", "Estimate", "CollectiveTime", "ComputeTime", "MemoryFit",
    "Bound", "CollectiveBound", "AxisMapping", "Tier", "StepTrace", "TraceEvent", "TraceLane",
    "VectorUnit", "SortingRates", "Float32Matmuls", "StepRange", "RangePart", "TimeBasis",
    # spec changes a compile confirmed would remove a collective
    "what_if", "WhatIf",
    # explorations that can be shared
    "Exploration", "AppState", "FunctionRef", "load_exploration",
    # strategy search
    "search", "SearchResult", "Candidate", "CandidateStatus", "CollectiveCost",
    "CollectiveGroup", "Comparison", "Progress", "SearchStats", "ClusterSize", "SearchSpace",
    "SearchPhase", "StopReason", "TimeSource", "CompiledBy",
    # the largest batch that fits
    "largest_batch", "CapacityResult", "PolicyCapacity", "BatchProbe",
    # errors
    "ExplorerError", "InputError", "CompileError", "DivisibilityError", "DuplicateAxisError",
    "JaxVersionError",
    "MappingError", "MeshError", "PresetError", "RankError", "RuleError", "SpecError",
    "TargetError",
    "TensorError", "UnknownAxisError", "WorkerError", "WorkerLost", "CompileAbandoned",
    "WorkloadError",
]
