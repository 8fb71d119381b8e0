"""Bad input is a ValueError everywhere: the search's, the command line's and the app's checks
raise InputError (or a subclass), so that `except ValueError` around a call catches them as it
catches the validators'. A plain ExplorerError is left only where the failure is not the
user's value (a missing extra, an unreachable cluster), each named below with why."""

import ast
import re
from pathlib import Path

import pytest

import explorer
from explorer import TensorSpec
from explorer._src.cli import _analyze, _key_values, _parser
from explorer._src.errors import InputError, TargetError

PACKAGE = Path(__file__).resolve().parents[1] / "explorer" / "_src"

# The modules whose bad-input errors are InputErrors: the search, the app, the command line
# and the built-in workloads and strategies.
CHECKED = ("layout_search", "ui", "cli.py", "workloads", "strategy")

# (module, a literal fragment of the message, why it is not bad input). Each names one site.
NOT_INPUT = [
    ("layout_search/cluster.py", "needs Ray, which is not installed",
     "the cluster extra is missing: the environment, not the address"),
    ("layout_search/connect.py", "cannot connect to the Ray cluster at",
     "ray.init failed: a cluster that is down or unreachable from here"),
    ("layout_search/connect.py", "no Ray cluster answers at",
     "nothing accepts a TCP connection at the address: a cluster that is down or unreachable"),
    ("layout_search/connect.py", "cannot compile on the Ray cluster at",
     "a node lacks jax or the explorer's dependencies: the cluster's environment"),
    ("cli.py", "no trace for --target",
     "the request was valid; the compiled program gave no schedule to draw"),
]


def _checked_files() -> list[Path]:
    out = []
    for part in CHECKED:
        path = PACKAGE / part
        out.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return out


def _plain_explorer_errors(path: Path) -> list[tuple[int, list[str]]]:
    """(line, the message's string literals) of every `raise ExplorerError(...)` in the file."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Raise) or node.exc is None:
            continue
        call = node.exc
        func = call.func if isinstance(call, ast.Call) else call
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if name != "ExplorerError":
            continue
        literals = [c.value for arg in getattr(call, "args", []) for c in ast.walk(arg)
                    if isinstance(c, ast.Constant) and isinstance(c.value, str)]
        out.append((node.lineno, literals))
    return out


@pytest.mark.slow
def test_no_plain_explorer_error_is_raised_but_the_allowed_environment_failures():
    found = {(path.relative_to(PACKAGE).as_posix(), line): literals
             for path in _checked_files() for line, literals in _plain_explorer_errors(path)}
    unexplained = [site for site, literals in found.items()
                   if not any(site[0] == module and any(fragment in s for s in literals)
                              for module, fragment, _ in NOT_INPUT)]
    assert unexplained == [], ("raise InputError (or a subclass) for bad input; a failure "
                               "that is not the user's value goes in NOT_INPUT with why")
    # The allow-list names live sites only: each entry matches exactly one raise.
    for module, fragment, _ in NOT_INPUT:
        matches = [site for site, literals in found.items()
                   if site[0] == module and any(fragment in s for s in literals)]
        assert len(matches) == 1, (module, fragment, matches)


SMALL_MLP = dict(mesh="data=2,model=2", target="h100-4")


@pytest.mark.parametrize("kwargs, message", [
    (dict(names=["nope"]), "logical name 'nope' is not one that workload 'mlp' uses"),
    (dict(budget_s=0), "budget_s=0 is not a positive number of seconds"),
    (dict(space="pipeline"), "space 'pipeline' chooses the stages of workload 'pipeline'"),
    (dict(space="everything"), "space 'everything' is not one of"),
    (dict(verify=0), "verify=0 is not a whole number from 1 to 100"),
    (dict(names=["batch"], tensors=["x"]), "tensors= chooses the tensors of a specs search"),
    (dict(max_microbatches=4), "max_microbatches applies to the pipeline search"),
    (dict(names=["batch"], cluster="  "), "cluster '  ' is not a Ray address"),
])
def test_a_bad_search_argument_is_a_value_error_raised_before_any_compile(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)) as caught:
        explorer.search("mlp", **{**SMALL_MLP, **kwargs})
    assert isinstance(caught.value, InputError)


def test_a_search_without_a_target_is_a_target_error():
    with pytest.raises(TargetError, match="which needs a target"):
        explorer.search("mlp", mesh="data=2,model=2", target=None)


def test_params_given_to_a_function_search_is_a_value_error():
    with pytest.raises(ValueError, match="params are a built-in workload's"):
        explorer.search(lambda x: x, TensorSpec("x", (8, 8)), mesh="data=2,model=2",
                        target="h100-4", params={"batch": 8})


def test_a_spec_not_written_as_name_value_is_a_value_error():
    with pytest.raises(ValueError, match=re.escape("--spec 'w1' is not written as NAME=VALUE")):
        _key_values(["w1"], "--spec")


def test_a_trace_without_a_target_is_a_value_error_raised_before_any_compile():
    args = _parser().parse_args(["analyze", "--workload", "mlp", "--mesh", "data=2",
                                 "--trace", "step.json"])
    with pytest.raises(ValueError, match=re.escape("--trace step.json needs --target")):
        _analyze(args)


def test_the_suggest_tabs_budget_box_refuses_a_non_positive_number_as_a_value_error():
    pytest.importorskip("ipywidgets")
    from explorer._src.ui.suggest.job import parse_budget

    for text in ("soon", "0", "-3", "inf"):
        with pytest.raises(ValueError, match=re.escape(f"budget {text!r} is not a positive")):
            parse_budget(text)


def test_a_function_source_of_something_not_callable_is_a_value_error():
    pytest.importorskip("ipywidgets")
    from explorer._src.ui.sources import FunctionSource

    with pytest.raises(ValueError, match="42 is not a function"):
        FunctionSource(42, [])


def test_a_suggest_job_without_a_target_is_a_target_error():
    pytest.importorskip("ipywidgets")
    from explorer._src.spec.mesh import parse_mesh
    from explorer._src.ui.sources import AppRequest, FunctionSource, Placement
    from explorer._src.ui.suggest.job import make_job

    source = FunctionSource(lambda x: x, [TensorSpec("x", (8, 8))])
    request = AppRequest(mesh=parse_mesh("data=2,model=2"), specs={}, pinned={},
                      placement=Placement({}), params={}, preset=None, rules=None,
                      partitioner="shardy", target=None, mapping=None, measure=False,
                      unavailable=None)
    with pytest.raises(TargetError, match="needs a target: pick one under target"):
        make_job(source, request, "specs", (), True, None)
