"""Error types. Each names the offending value, the rule, and the valid choices or the fix.

Every one is an ExplorerError. Bad input is also a ValueError (InputError and its subclasses),
so that generic callers can catch it; a compile that failed or a worker that was lost is a
RuntimeError instead, so that `except ValueError` around a call never swallows a crash. Input
errors carry their objects (mesh, tensor, axis) so that a UI can point at the widget at fault,
as jax's DuplicateSpecError does.
"""

from __future__ import annotations

from enum import Enum


class ExplorerError(Exception):
    """Base of every error the explorer raises: bad input, a failed compile, a lost worker."""


class InputError(ExplorerError, ValueError):
    """A value the explorer cannot accept; the message names it, the rule and the choices."""


class MeshError(InputError):
    """The mesh text or mapping is invalid.

    Attributes:
        axis: the mesh axis at fault, where one is; else None.
    """

    def __init__(self, message: str, *, axis: str | None = None):
        super().__init__(message)
        self.axis = axis


class SpecError(InputError):
    """A tensor's PartitionSpec does not fit the mesh or the tensor.

    Attributes:
        tensor: the tensor whose spec it is, where known; else None.
        axis: the mesh axis at fault, where one is; else None.
        mesh: the MeshSpec the spec was checked against, where it was; else None.
    """

    def __init__(self, message: str, *, tensor: str | None = None, axis: str | None = None,
                 mesh=None):
        super().__init__(message)
        self.tensor = tensor
        self.axis = axis
        self.mesh = mesh


class UnknownAxisError(SpecError):
    """A spec names an axis the mesh lacks."""


class DuplicateAxisError(SpecError):
    """A spec uses one mesh axis for two dimensions."""


class RankError(SpecError):
    """A spec's entry count differs from the tensor's number of dimensions."""


class DivisibilityError(SpecError):
    """A dimension is not divisible by the product of the axes it is split over."""


class TensorError(InputError):
    """A tensor's name, shape or dtype is invalid.

    Attributes:
        tensor: the tensor's name, where it has one; else None.
    """

    def __init__(self, message: str, *, tensor: str | None = None):
        super().__init__(message)
        self.tensor = tensor


class RuleError(InputError):
    """A logical-axis rule is malformed, names an unknown logical name, kind or mesh axis.

    Attributes:
        rule: the rule at fault as text, where one is; else None.
        axis: the mesh axis at fault, where one is; else None.
        mesh: the MeshSpec the rules were checked against, where they were; else None.
    """

    def __init__(self, message: str, *, rule: str | None = None, axis: str | None = None,
                 mesh=None):
        super().__init__(message)
        self.rule = rule
        self.axis = axis
        self.mesh = mesh


class PresetError(RuleError):
    """An unknown preset, or a preset that does not fit the mesh or the workload."""


class TargetError(InputError):
    """An unknown hardware target, or a mesh-to-hardware mapping that does not fit the target.

    Attributes:
        target: the target's name, where known; else None.
        axis: the mesh axis at fault, where one is; else None.
    """

    def __init__(self, message: str, *, target: str | None = None, axis: str | None = None):
        super().__init__(message)
        self.target = target
        self.axis = axis


class MappingError(TargetError):
    """A mesh-to-hardware mapping that does not fit the target (names the limit it breaks)."""


class WorkloadError(InputError):
    """An unknown workload, or a bad workload parameter."""


class CompileError(ExplorerError, RuntimeError):
    """jax or XLA rejected the program; the message is theirs."""


class WorkerError(ExplorerError, RuntimeError):
    """The compile worker crashed, was killed, or ran past its time limit."""


class CompileAbandoned(WorkerError):
    """A compile given up by its caller (compile/pool.py's `abandoned_when`): its worker was
    stopped, and no verdict on the program was made."""


class WorkerLost(WorkerError):
    """The compile worker died or was killed before it answered (not a time limit): it gave
    no verdict on the program, so the same request may be sent again to a fresh worker."""


class JaxVersionError(ExplorerError, RuntimeError):
    """The installed jax is older than the explorer supports, or lacks a private piece its
    compile needs (a release newer than the newest tested may move one); the message names
    the version, the supported range and each missing piece."""


def choices(values) -> str:
    """Valid choices as a short, quoted, comma-separated list for messages; an enum member is
    quoted as its value ('auto', not <AxisType.AUTO: 'auto'>), as the user writes it."""
    return ", ".join(repr(v.value if isinstance(v, Enum) else v) for v in values) or "(none)"


# Each error is raised, printed in a traceback and pickled under its public name
# (explorer.InputError), not under this private module's.
for _error in [v for v in list(globals().values())
               if isinstance(v, type) and issubclass(v, ExplorerError)]:
    _error.__module__ = "explorer"
del _error
