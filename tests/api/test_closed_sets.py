"""The closed sets of a request, the partitioner and what it compiles for, as their enums
(explorer.Partitioner, explorer.CompileFor; issue 52): every public signature takes the enum or
its name, an Exploration holds the enum and writes its name, so that a file saved before loads
to the same exploration and saves to the same text. An unknown name is one InputError naming
it and the choices."""

import pytest

import explorer
from explorer import CompileFor, Exploration, Partitioner
from explorer._src.api.exploration import loads

# A file as an exploration was saved before its fields were enums: json.dumps(indent=1) of
# the fields that differ from their defaults.
SAVED = """{
 "format": "sharding-explorer exploration",
 "version": 1,
 "request": {
  "workload": "mlp",
  "mesh": "data=2,model=4",
  "partitioner": "gspmd",
  "compile_for": "cpu"
 },
 "target": {
  "name": "h100-8"
 },
 "app": {
  "tab": "Memory"
 }
}
"""


def test_a_file_saved_before_loads_to_enums_and_saves_the_same_text(tmp_path):
    path = tmp_path / "saved.json"
    path.write_text(SAVED)
    e = explorer.load_exploration(path)
    assert e.partitioner is Partitioner.GSPMD and e.compile_for is CompileFor.CPU
    assert e.to_json() == SAVED
    again = tmp_path / "again.json"
    e.save(again)
    assert again.read_text() == SAVED
    # The Request it makes has them too.
    request = e.request()
    assert request.planned.partitioner is Partitioner.GSPMD
    assert request.compile_for == "cpu"


def test_an_exploration_holds_the_enum_whichever_form_it_was_given():
    by_name = Exploration(mesh="data=2,model=4", workload="mlp", partitioner="gspmd",
                          compile_for="cpu")
    by_enum = Exploration(mesh="data=2,model=4", workload="mlp",
                          partitioner=Partitioner.GSPMD, compile_for=CompileFor.CPU)
    assert type(by_name.partitioner) is Partitioner and type(by_name.compile_for) is CompileFor
    assert by_name == by_enum and by_name.to_json() == by_enum.to_json()
    assert by_name.to_dict()["request"]["partitioner"] == "gspmd"
    assert type(by_name.to_dict()["request"]["partitioner"]) is str
    # The defaults are the enums, and a file leaves them out.
    default = Exploration(mesh="data=2,model=4", workload="mlp")
    assert default.partitioner is Partitioner.SHARDY and default.compile_for is CompileFor.TARGET
    assert not {"partitioner", "compile_for"} & set(default.to_dict()["request"])
    # Written down from a Request: the Request's names become the enums.
    made = Exploration.of(explorer.Request(workload="mlp", mesh="data=2,model=4",
                                           partitioner="gspmd", compile_for="cpu"))
    assert made.partitioner is Partitioner.GSPMD and made.compile_for is CompileFor.CPU
    assert loads(made.to_json()) == made


def test_an_unknown_name_is_one_input_error_naming_it_and_the_choices():
    with pytest.raises(explorer.InputError,
                       match=r"partitioner 'xla' is not one of 'shardy', 'gspmd'"):
        Exploration(mesh="data=2,model=4", partitioner="xla")
    with pytest.raises(explorer.InputError,
                       match=r"compile_for='gpu' is not one of 'target', 'cpu'"):
        Exploration(mesh="data=2,model=4", compile_for="gpu")
    text = SAVED.replace('"gspmd"', '"xla"')
    with pytest.raises(explorer.InputError, match=r"request.partitioner.*'xla'.*'shardy'"):
        loads(text)


@pytest.mark.slow
def test_the_app_opens_on_the_enums():
    pytest.importorskip("ipywidgets")
    from explorer.ui import Explorer

    app = Explorer(mesh="data=2,model=4", partitioner=Partitioner.GSPMD,
                   compile_for=CompileFor.CPU, debounce=None, wait=False)
    try:
        assert app.partitioner_w.value == "gspmd" and app.sidebar.cpu_w.value is True
    finally:
        app.close()


def test_the_app_refuses_an_unknown_name_before_any_widget():
    pytest.importorskip("ipywidgets")
    from explorer.ui import Explorer

    for wrong, message in ((dict(partitioner="xla"), r"partitioner 'xla' is not one of"),
                           (dict(compile_for="gpu"), r"compile_for='gpu' is not one of")):
        with pytest.raises(explorer.InputError, match=message):
            Explorer(mesh="data=2,model=4", debounce=None, wait=False, **wrong)
