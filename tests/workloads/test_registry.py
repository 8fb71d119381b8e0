"""workloads/registry.py: every built-in workload is listed under its own name, none defined in
the package is left out, and an unknown name is refused with the choices. (Each workload's
structure and programs are tested in tests/workloads/test_workloads.py and its neighbours.)"""

import importlib
import pkgutil

import pytest

import explorer
import explorer._src.workloads
from explorer._src.errors import WorkloadError
from explorer._src.workloads.base import Workload
from explorer._src.workloads.registry import WORKLOADS, get_workload

# The built-in workloads, in listing order (docs/architecture.md, README).
NAMES = ["matmul", "mlp", "mlp_train", "transformer", "transformer_train", "moe", "pipeline"]


def defined_in_the_package() -> dict[str, Workload]:
    """Every Workload a module of explorer/workloads defines at its top level, by name."""
    found = {}
    for info in pkgutil.iter_modules(explorer._src.workloads.__path__):
        if info.name == "registry":
            continue
        module = importlib.import_module(f"explorer._src.workloads.{info.name}")
        found.update({w.name: w for w in vars(module).values() if isinstance(w, Workload)})
    return found


def test_every_workload_is_listed_under_its_own_name_in_order():
    assert list(WORKLOADS) == NAMES
    assert all(w.name == name for name, w in WORKLOADS.items())
    assert explorer.WORKLOADS is WORKLOADS


def test_no_workload_defined_in_the_package_is_missing_from_the_registry():
    assert defined_in_the_package() == WORKLOADS


@pytest.mark.parametrize("name", NAMES)
def test_get_workload_returns_the_listed_workload(name):
    assert get_workload(name) is WORKLOADS[name]


@pytest.mark.parametrize("name, shown", [("mpl", "'mpl'"), (3, "3"), (None, "None"),
                                         ("MLP", "'MLP'")])
def test_an_unknown_workload_is_refused_with_every_choice(name, shown):
    with pytest.raises(WorkloadError) as e:
        get_workload(name)
    assert str(e.value) == (f"workload {shown} is unknown; choose one of 'matmul', 'mlp', "
                            "'mlp_train', 'transformer', 'transformer_train', 'moe', 'pipeline'")


def test_a_long_unknown_name_is_cut_in_the_message():
    with pytest.raises(WorkloadError) as e:
        get_workload("x" * 200)
    # show() keeps 80 characters: the quote, 76 x's and "...".
    assert "workload '" + "x" * 76 + "... is unknown" in str(e.value)
