"""The examples in the public docstrings run as written: every `>>>` line is executed and its
output compared with the docstring's, so an example that drifts from the code fails here."""

import doctest
import importlib

import pytest

# The modules whose docstrings hold examples. analyze's, analyze_workload's and the Report's
# compile a matmul and the Megatron MLP on 8 fake CPU devices in a worker (about a second
# each); the Report's examples are then answered from this process's cache. what_if's compiles
# an MLP and two changes of its layout. A Request's and a Session's examples check and plan
# only: nothing compiles.
MODULES = ["explorer._src.api.analyze", "explorer._src.api.analysis_request",
           "explorer._src.api.session",
           "explorer._src.api.workload", "explorer._src.api.what_if",
           "explorer._src.report.report", "explorer._src.spec.mesh", "explorer._src.spec.tensor",
           "explorer._src.cost.catalog.names"]


@pytest.mark.parametrize("name", MODULES)
def test_every_docstring_example_of_the_module_runs_as_written(name):
    # On a failure, doctest prints the example, what it expected and what it got (pytest shows
    # the captured output).
    results = doctest.testmod(importlib.import_module(name))
    assert results.attempted > 0, f"{name} has no examples to run"
    assert results.failed == 0, f"{results.failed} of {results.attempted} examples in {name} failed"
