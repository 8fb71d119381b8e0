"""Explorations that can be shared: saved as a small JSON file (or a link's text), loaded with
every field checked, and analysed again to the same Report through the API and the CLI.
Hostile files are refused with one InputError naming the field, and nothing in them is run."""

import json
import os
import sys
from dataclasses import replace

import pytest

import explorer
from explorer._src.api.exploration import (
    APP_TABS,
    MAX_FILE_BYTES,
    AppState,
    Exploration,
    FunctionRef,
    from_link,
    load,
    loads,
)


def without_timing(report) -> dict:
    """The Report as the CLI's --json writes it (lists, NaN as null), less its timings."""
    from explorer._src.cli import _strict_json

    d = json.loads(_strict_json(report.to_dict()))
    d.pop("timing")
    return d


# The MLP on 8 devices, data parallel by a preset, its hidden features over model by a rule
# given on top, w2 given its spec by hand and the hidden activation left to propagation where
# the rules would pin it.
REQUEST = dict(mesh="data=2,model=4", preset="dp", rules="mlp=model",
               specs={"w2": "model,None"}, activations={"hidden": "free"}, target="h100-8",
               compile_for="cpu")


@pytest.fixture(scope="module")
def report():
    return explorer.analyze_workload("mlp", **REQUEST)


def test_an_exploration_is_read_back_from_its_report(report):
    saved = Exploration.from_report(report, compile_for="cpu", app=AppState("Collectives", "w1"))
    # The preset's table (batch=data) is not repeated in the rules given over it, the spec
    # and the freed point are those given by hand, and the target's default mapping is left out.
    assert saved == Exploration(
        mesh="data=2,model=4", workload="mlp",
        params={"batch": 256, "d_model": 1024, "d_ff": 4096, "dtype": "float32"},
        preset="dp", rules="mlp=model", specs={"w2": "model,None"},
        activations={"hidden": "free"}, compile_for="cpu", target="h100-8",
        app=AppState("Collectives", "w1"))


def test_a_saved_exploration_loads_and_analyses_to_the_same_report(report, tmp_path):
    path = tmp_path / "lab1.json"
    saved = Exploration.from_report(report, compile_for="cpu", app=AppState("Memory", "x"))
    saved.save(path)
    loaded = load(path)
    assert loaded == saved
    assert without_timing(loaded.analyze()) == without_timing(report)
    # A link carries the same exploration.
    assert from_link(saved.to_link()) == saved


def test_the_cli_analyses_a_saved_exploration_and_saves_its_flags_as_one(report, tmp_path,
                                                                         cli):
    path = tmp_path / "from_flags.json"
    code_path = tmp_path / "layout.py"
    code, out, err = cli(["analyze", "--workload", "mlp", "--mesh", REQUEST["mesh"],
                          "--preset", "dp", "--rules", "mlp=model", "--spec", "w2=model,None",
                          "--activation", "hidden=free", "--target", "h100-8",
                          "--compile-for", "cpu", "--param", "batch=256",
                          "--save", str(path), "--emit-code", str(code_path), "--json"])
    assert code == 0, err
    assert without_timing(report) == {k: v for k, v in json.loads(out).items()
                                      if k != "timing"}
    # The file is the Request the flags made, written down (Exploration.of): a param given at
    # its default (batch=256 is the MLP's) asks nothing more, and is not written.
    assert load(path) == replace(Exploration.from_report(report, compile_for="cpu"), params={})
    assert code_path.read_text() == report.to_code()
    code, out, err = cli(["analyze", "--from", str(path), "--json"])
    assert code == 0, err
    assert without_timing(report) == {k: v for k, v in json.loads(out).items()
                                      if k != "timing"}


def test_the_cli_refuses_request_flags_beside_a_file(tmp_path, cli):
    path = tmp_path / "e.json"
    Exploration(mesh="data=2", workload="matmul").save(path)
    code, out, err = cli(["analyze", "--from", str(path), "--mesh", "data=4"])
    assert code == 2
    assert err.strip() == (f"sharding-explorer: error: --mesh and --from {path}: the file "
                           "gives the whole request; drop one of them")
    code, out, err = cli(["analyze", "--json"])
    assert (code, err.strip()) == (2, "sharding-explorer: error: analyze needs --workload and "
                                      "--mesh, or --from FILE")


def double(x):
    """A user's function that can be imported by name (this test module)."""
    return x * 2


@pytest.mark.slow
def test_a_users_function_is_carried_by_its_module_path_and_never_imported_unasked(tmp_path,
                                                                                   cli):
    x = explorer.TensorSpec("x", (16, 8), spec="data,None")
    report = explorer.analyze(double, x, mesh="data=2")
    saved = Exploration.from_report(report, double)
    assert saved.function == FunctionRef(double.__module__, "double")
    assert saved.specs == {"x": "data,None"}
    path = tmp_path / "fn.json"
    saved.save(path)
    loaded = load(path)
    with pytest.raises(explorer.InputError, match=r"this exploration is of the user's function "
                       r".*:double, which a file does not carry; pass it: .*, where "
                       r"exploration.function.load\(\) imports it \(running that module's "
                       r"code\)"):
        loaded.analyze()
    # Given the function and its inputs (the specs come from the file), it is the same request.
    again = loaded.analyze(double, replace(x, spec=()))
    assert without_timing(again) == without_timing(report)
    code, out, err = cli(["analyze", "--from", str(path)])
    assert code == 2 and "is an exploration of a user's function" in err

    def local(x):                     # as a notebook's: no module path to carry
        return x

    assert Exploration.from_report(report, local).function is None
    # Without fn= the cause is said then, not later as a function that cannot be imported.
    with pytest.raises(explorer.InputError, match=r"this Report is of a user's function, which "
                       r"a Report does not carry; pass it: Exploration.from_report\(report, "
                       r"fn=your_function\)"):
        Exploration.from_report(report)


def step_in_place(w, x):
    """A user's function whose new `w` may take the old one's buffer (donated)."""
    return w - 0.1 * (x.T @ (x @ w)), x @ w


@pytest.mark.slow
def test_a_users_donation_is_carried_by_the_file_and_analyses_the_same(tmp_path):
    w = explorer.TensorSpec("w", (64, 64), spec="None,None")
    x = explorer.TensorSpec("x", (32, 64), spec="data,None")
    report = explorer.analyze(step_in_place, w, x, mesh="data=2", donate="^w$")
    assert report.donated == ("w",)
    # 64 x 64 float32, replicated: the new w takes the old one's 16384 bytes (hand-computed).
    assert report.memory.aliased == 64 * 64 * 4
    saved = Exploration.from_report(report, step_in_place)
    assert saved.donate == ("w",) and saved.to_dict()["request"]["donate"] == ["w"]
    path = tmp_path / "donated.json"
    saved.save(path)
    loaded = load(path)
    assert loaded.donate == ("w",)
    again = loaded.analyze(step_in_place, replace(w, spec=()), replace(x, spec=()))
    assert again.donated == ("w",) and again.memory.aliased == report.memory.aliased
    code = report.to_code()
    assert "# The analysis donated these inputs (explorer.analyze's donate=): 'w'." in code


def test_a_function_is_imported_only_when_asked(tmp_path, monkeypatch):
    marker = tmp_path / "imported"
    (tmp_path / "shared_lab_module.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n\ndef step(x):\n    return x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    text = json.dumps({"format": "sharding-explorer exploration", "version": 1,
                       "request": {"function": {"module": "shared_lab_module",
                                                "qualname": "step"}, "mesh": "data=2"}})
    loaded = loads(text)
    with pytest.raises(explorer.InputError, match="which a file does not carry"):
        loaded.analyze()
    assert not marker.exists() and "shared_lab_module" not in sys.modules
    step = loaded.function.load()
    assert marker.exists() and step(3) == 3
    sys.modules.pop("shared_lab_module")


def test_an_exploration_is_a_request_written_down_and_makes_it_again():
    request = explorer.Request(workload="mlp", mesh="data=2,model=4",
                               params={"batch": 64, "d_model": 1024}, preset="dp",
                               rules="mlp=model", specs={"w2": ("model", None)},
                               activations={"hidden": None}, target="h100-8",
                               compile_for="cpu", timeout=600)
    e = Exploration.of(request, AppState("Memory", "w1"))
    # d_model=1024 is the MLP's default (see the first test): not written; a point left to
    # propagation is written "free"; a spec as its text.
    assert e == Exploration(mesh="data=2,model=4", workload="mlp", params={"batch": 64},
                            preset="dp", rules="mlp=model", specs={"w2": "model,None"},
                            activations={"hidden": "free"}, target="h100-8",
                            compile_for="cpu", timeout=600.0, app=AppState("Memory", "w1"))
    # The target's default limit, as the app fills it in, is left out.
    assert Exploration.of(request, default_timeout=600).timeout is None
    again = loads(e.to_json()).request()
    planned = again.planned
    # By hand: the preset's batch=data splits x's rows, the rule mlp=model w1's columns, and
    # w2 is as given.
    assert [(t.name, tuple(t.spec)) for t in planned.leaves] == [
        ("x", ("data", None)), ("w1", (None, "model")), ("w2", ("model", None))]
    assert planned.mesh.sizes == (2, 4) and planned.timeout == 600
    assert (again.target, str(again.compile_for)) == ("h100-8", "cpu")


def test_a_users_function_request_is_written_down_by_its_path_and_input_specs():
    x = explorer.TensorSpec("x", (16, 8), spec="data,None")
    e = Exploration.of(explorer.Request(fn=double, inputs=(x,), mesh="data=2"))
    assert e.function == FunctionRef(double.__module__, "double") and e.workload is None
    assert e.specs == {"x": "data,None"}
    with pytest.raises(explorer.InputError, match="which a file does not carry"):
        e.request()
    made = e.request(double, replace(x, spec=()))
    assert [tuple(t.spec) for t in made.planned.leaves] == [("data", None)]


def test_the_app_tabs_are_the_apps():
    pytest.importorskip("ipywidgets")
    from explorer._src.ui.app import TAB_TITLES

    assert tuple(TAB_TITLES) == APP_TABS


GOOD = {"format": "sharding-explorer exploration", "version": 1,
        "request": {"workload": "mlp", "mesh": "data=2,model=4"}}


def with_(**changes):
    """GOOD with `changes`: top-level keys, or request.KEY for the request's."""
    d = json.loads(json.dumps(GOOD))
    for key, value in changes.items():
        if key.startswith("request_"):
            d["request"][key.removeprefix("request_")] = value
        else:
            d[key] = value
    return json.dumps(d)


@pytest.mark.parametrize("text, fragment", [
    ("{", "is not JSON (Expecting property name"),
    ("[1, 2]", "field the exploration is [1, 2], not an object with keys from 'format'"),
    (with_(format="pickle"), "field 'format' is 'pickle', not 'sharding-explorer exploration'"),
    (with_(version=2), "field 'version' is 2; this explorer reads version 1"),
    (with_(version=True), "field 'version' is True"),
    (with_(exec="print(1)"), "field the exploration has unknown key 'exec'; its keys are "
                             "'format', 'version', 'request', 'target', 'compile', 'app'"),
    (with_(request___import__="os"), "field request has unknown key '__import__'"),
    (with_(request_mesh=5), "field request.mesh is 5, not text"),
    (with_(request_mesh="data=4096"), "field request.mesh: "),
    (with_(request_workload="nope"), "field request.workload: "),
    (with_(request_params={"batches": 8}), "field request.params has unknown key 'batches'; "
                                           "its keys are 'batch', 'd_model', 'd_ff', 'dtype'"),
    (with_(request_params={"batch": 10 ** 30}), "more than 20 digits"),
    (with_(request_params={"batch": 2 ** 40}), "field request.params: "),
    (with_(request_params={"batch": [1]}), "field request.params.batch is [1]; a param is"),
    (with_(request_specs={"x": "__import__('os').system('id')"}),
     "field request.specs.x: cannot read spec"),
    (with_(request_specs={"w3": "data,None"}), "field request.specs names 'w3', which the "
                                               "workload lacks; its names are 'x', 'w1', 'w2'"),
    (with_(request_specs={"x": "expert,None"}), "field request: "),
    (with_(request_preset="zero9"), "field request.preset: "),
    (with_(request_rules="mlp=model;import os"), "field request.rules: "),
    (with_(request_activations={"layer0": "data"}), "field request.activations names "
                                                    "'layer0', which the workload lacks"),
    (with_(request_function={"module": "os", "qualname": "system"}),
     "request has both 'workload' and 'function'"),
    (with_(request_donate=["w1"]), "field request.donate belongs to a user's function's "
                                   "exploration; a built-in workload donates its state by"),
    (json.dumps({**GOOD, "request": {"function": {"module": "m", "qualname": "f"},
                                     "mesh": "data=2", "donate": "w"}}),
     "field request.donate is 'w', not a list of input names"),
    (json.dumps({**GOOD, "request": {"function": {"module": "m", "qualname": "f"},
                                     "mesh": "data=2", "donate": [3]}}),
     "field request.donate entry is 3, not text"),
    (with_(target={"name": "h100-8", "mapping": "data=moon"}), "field target: "),
    (with_(target={"name": "h100-8", "peak": "yes"}), "field target.peak is 'yes'"),
    (with_(app={"tab": "Shell"}), "field app.tab is 'Shell'; the tabs are 'Placement', "),
    (with_(app={"tensor": "w1\x1b[2J"}), "field app.tensor holds a control character"),
    (with_(request_rules="x" * 5000), "field request.rules has 5000 characters; at most 4096"),
    ('{"format": 1, "format": 2}', "key 'format' appears twice in one object"),
    (with_(request_params={"batch": float("nan")}), "NaN is not a number JSON allows"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    (json.dumps({**GOOD, "app": {"tab": [[[[["x"]]]]]}}), "nested more than 4 levels deep"),
])
def test_a_bad_or_hostile_file_is_one_input_error_naming_the_field(text, fragment, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(explorer.InputError) as caught:
        load(path)
    assert fragment in str(caught.value)
    assert str(caught.value).startswith(f"exploration {str(path)!r}")


def test_a_function_path_that_is_not_a_python_name_is_refused():
    text = json.dumps({**GOOD, "request": {"function": {"module": "os; import sys",
                                                        "qualname": "system"},
                                           "mesh": "data=2"}})
    with pytest.raises(explorer.InputError, match="field request.function.module is 'os; import "
                       "sys', not a dotted Python name"):
        loads(text)


def test_a_huge_file_or_one_that_is_no_file_is_refused_unread(tmp_path):
    big = tmp_path / "big.json"
    big.write_text(" " * (MAX_FILE_BYTES + 1))
    with pytest.raises(explorer.InputError, match=f"has {MAX_FILE_BYTES + 1} bytes; an "
                       f"exploration file has at most {MAX_FILE_BYTES}"):
        load(big)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)                     # reading one would block until a writer came
    with pytest.raises(explorer.InputError, match="is not a regular file"):
        load(fifo)
    with pytest.raises(explorer.InputError, match="could not be read: No such file"):
        load(tmp_path / "missing.json")


def test_a_link_that_is_too_long_or_not_base64_is_refused():
    with pytest.raises(explorer.InputError, match="at most 16384 characters"):
        from_link("A" * 20_000)
    with pytest.raises(explorer.InputError, match="is not base64url"):
        from_link("a")
