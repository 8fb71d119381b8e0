"""sharding-explorer: see what GSPMD/Shardy did to a sharded JAX program.

The core (this package minus explorer.ui) imports no UI library and returns plain data.
"""

from ._analyze import PARTITIONERS as PARTITIONERS
from ._analyze import analyze as analyze
from ._analyze import clear_cache as clear_cache
from ._errors import CompileError as CompileError
from ._errors import DivisibilityError as DivisibilityError
from ._errors import DuplicateAxisError as DuplicateAxisError
from ._errors import ExplorerError as ExplorerError
from ._errors import MappingError as MappingError
from ._errors import MeshError as MeshError
from ._errors import PresetError as PresetError
from ._errors import RankError as RankError
from ._errors import RuleError as RuleError
from ._errors import SpecError as SpecError
from ._errors import TargetError as TargetError
from ._errors import TensorError as TensorError
from ._errors import UnknownAxisError as UnknownAxisError
from ._errors import WorkerError as WorkerError
from ._errors import WorkloadError as WorkloadError
from ._hardware import get_target as get_target
from ._hardware import targets as targets
from ._mesh import MeshSpec as MeshSpec
from ._mesh import parse_mesh as parse_mesh
from ._presets import PRESETS as PRESETS
from ._presets import Preset as Preset
from ._presets import get_preset as get_preset
from ._report import Collective as Collective
from ._report import Report as Report
from ._report import TensorInfo as TensorInfo
from ._rules import LOGICAL_NAMES as LOGICAL_NAMES
from ._rules import Rules as Rules
from ._rules import logical_spec as logical_spec
from ._rules import parse_rules as parse_rules
from ._spec import TensorSpec as TensorSpec
from ._spec import parse_spec as parse_spec
from ._worker import WorkerPool as WorkerPool
from ._workloads import WORKLOADS as WORKLOADS
from ._workloads import analyze_workload as analyze_workload

__all__ = [name for name in dir() if not name.startswith("_")]
