"""A served app that cannot be turned against its server (issue 53, item 3; the threat model is
in docs/reliability.md, "Serving to a room"):

- a page cannot name a Ray cluster: the Suggest tab offers the clusters the server's operator
  lists (EXPLORER_CLUSTERS) and this machine, and a value the server does not list is refused;
- a served app refuses a request whose Host is not the server's own name and a websocket
  whose Origin is another site's, and a forged comm_open gets no traceback back;
- what a link or a page asks for is held to the server's limits (a compile's time limit, the
  program's size);
- the report cache accepts a folder of the user's made under umask 002;
- a 100,000-character rules or spec text gives a short error that names it.

The server tests start `sharding-explorer app` as tests/ui/test_serve.py does, wait for states
(the server answering, a page's kernel id, a reply to a message), never for a time, and stop
it."""

import asyncio
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
import warnings
from html import unescape

import pytest

import explorer
from explorer._src.api import diskcache
from explorer._src.api.diskcache import DiskCache
from explorer._src.api.exploration import Exploration, from_link
from explorer._src.errors import ExplorerError, InputError
from explorer._src.layout_search.connect import configured_clusters
from explorer._src.spec.bounds import SERVED_DEFAULTS, SERVED_LIMITS_ENV, TEXT_SHOWN
from explorer._src.spec.tensor import parse_spec
from explorer._src.strategy.rules import parse_rules

HUGE = "x" * 100_000
# An error about a value that long: the value shown cut (TEXT_SHOWN characters), and the message's
# own words around it.
MESSAGE_MOST = 3 * TEXT_SHOWN + 400


@pytest.fixture
def served(monkeypatch):
    """This process as a served app's kernel: the limits `sharding-explorer app` sets."""
    for env, value in SERVED_DEFAULTS.environment().items():
        monkeypatch.setenv(env, value)
    return SERVED_DEFAULTS


@pytest.fixture
def not_served(monkeypatch):
    for env in SERVED_LIMITS_ENV.values():
        monkeypatch.delenv(env, raising=False)


# ---------------------------------------------------------------------------- clusters

def test_the_clusters_come_from_the_servers_list(monkeypatch):
    monkeypatch.delenv("EXPLORER_CLUSTERS", raising=False)
    assert configured_clusters() == ()
    monkeypatch.setenv("EXPLORER_CLUSTERS", " ray://head.example:10001, 10.0.0.5:6379,,"
                                            "ray://head.example:10001")
    assert configured_clusters() == ("ray://head.example:10001", "10.0.0.5:6379")
    monkeypatch.setenv("EXPLORER_CLUSTERS", "10.0.0.5:6379,evil example:1")
    with pytest.raises(InputError, match="cluster 'evil example:1' is not a Ray address: .* "
                                         "or remove it from EXPLORER_CLUSTERS"):
        configured_clusters()


@pytest.fixture
def suggest(monkeypatch):
    """The app's Suggest tab, on a server that lists one Ray cluster."""
    pytest.importorskip("ipywidgets")
    pytest.importorskip("plotly")
    from explorer._src.ui.app import TAB_TITLES
    from explorer.ui import Explorer

    monkeypatch.setenv("EXPLORER_CLUSTERS", "127.0.0.2:6390")
    app = Explorer(workload="mlp", mesh="data=2,model=4", target="h100-8",
                   params={"batch": 64, "d_model": 64, "d_ff": 256}, debounce=None)
    app.tabs.selected_index = TAB_TITLES.index("Suggest")
    yield app.suggest
    app.close()


def test_a_page_chooses_among_the_servers_clusters_and_cannot_name_one(suggest, monkeypatch):
    import traitlets

    view = suggest
    assert list(view.cluster_w.options) == [("this machine", None),
                                            ("127.0.0.2:6390", "127.0.0.2:6390")]
    assert view.cluster_w.value is None and not view.cluster_w.disabled
    # What the page's widget sends is an index among those options, never an address: a
    # value is not a state a page can set, and an index past the options is refused, in the
    # kernel.
    view.cluster_w.set_state({"value": "ray://attacker.example:10001"})
    assert view.cluster_w.value is None
    with pytest.raises(traitlets.TraitError):
        view.cluster_w.set_state({"index": 2})
    # Labels forged by a page change no value: the values never leave the kernel.
    view.cluster_w.set_state({"_options_labels": ("ray://attacker.example:10001",) * 2})
    view.cluster_w.set_state({"index": 1})
    assert view.cluster_w.value == "127.0.0.2:6390"
    # A cluster the server no longer lists is refused at Start, naming it and the choices; no
    # search starts (nothing connects to it).
    monkeypatch.setenv("EXPLORER_CLUSTERS", "")
    view.start_w.click()
    assert not view.running and view.job is None
    assert unescape(view.message.value) == (
        "cluster '127.0.0.2:6390' is not one this server offers; choose 'this machine' (the "
        "server's operator lists clusters in EXPLORER_CLUSTERS)")
    # Refreshed, the tab offers this machine alone, and says why.
    view.refresh()
    assert list(view.cluster_w.options) == [("this machine", None)]
    assert view.cluster_w.disabled and "no Ray cluster is offered" in view.cluster_note.value


def test_the_api_still_takes_any_address_from_its_python_caller():
    # The API's caller is the server's user: cluster= is checked as before, not listed.
    with pytest.raises(InputError, match="cluster 'not an address' is not a Ray address"):
        explorer.search("mlp", mesh="data=2,model=4", target="h100-8",
                        cluster="not an address")


# ---------------------------------------------------------------------------- limits

def _link(**fields) -> str:
    return Exploration(mesh="data=2,model=4", **fields).to_link()


def test_an_oversized_link_is_capped_by_the_servers_limits(served, monkeypatch):
    # 256 layers is within the workload's bounds, above the server's.
    big = _link(workload="transformer_train", params={"layers": 256, "scan_layers": "false"})
    with pytest.raises(InputError) as e:
        from_link(big)
    assert str(e.value).startswith("the exploration link asks for ")
    assert "this server allows at most" in str(e.value) and "EXPLORER_MAX_" in str(e.value)
    with pytest.raises(InputError, match=r"asks for 256 layers; this server allows at most "
                                         r"64 \(its operator sets EXPLORER_MAX_LAYERS\)"):
        from_link(Exploration(mesh="stage=4", workload="pipeline",
                              params={"layers": 256}).to_link())
    # A day's compile limit is lowered to the server's most; a smaller one is kept.
    assert from_link(_link(workload="mlp", timeout=86400)).timeout == served.timeout_s
    assert from_link(_link(workload="mlp", timeout=30)).timeout == 30
    monkeypatch.setenv("EXPLORER_MAX_DEVICES", "16")
    with pytest.raises(InputError, match="asks for 32 mesh devices; this server allows at "
                                         "most 16"):
        from_link(Exploration(mesh="data=32", workload="mlp").to_link())


def test_the_same_link_opens_whole_where_the_app_is_not_served(not_served):
    # A Python user or the CLI: held to the bounds only.
    link = from_link(Exploration(mesh="stage=4", workload="pipeline", params={"layers": 256},
                                 timeout=86400).to_link())
    assert link.params == {"layers": 256} and link.timeout == 86400


def test_the_pages_time_limit_and_program_are_held_to_the_servers_limits(served, monkeypatch):
    pytest.importorskip("ipywidgets")
    from explorer.ui import Explorer

    monkeypatch.setenv("EXPLORER_MAX_COMPILE_S", "60")
    app = Explorer(workload="mlp", mesh="data=2,model=4", debounce=None)
    try:
        # The target's default (120 s on CPU devices) is lowered to the server's most.
        assert app.request.timeout == 60 and not app.request.timeout_given
        app.sidebar.timeout_w.value = "86400"
        assert unescape(app.sidebar.timeout_error.value).endswith(
            "the time limit asks for 86400 s of compile time; this server allows at most 60 "
            "(its operator sets EXPLORER_MAX_COMPILE_S)")
        assert app.request.timeout == 60              # the last good request stays
        app.sidebar.timeout_w.value = "30"
        assert app.sidebar.timeout_error.value == "" and app.request.timeout == 30
        # A program larger than the server allows is refused where it is edited.
        monkeypatch.setenv("EXPLORER_MAX_DEVICES", "4")
        app.mesh_editor.row("model").size_w.value = 8
        assert "asks for 16 mesh devices; this server allows at most 4" in unescape(
            app.mesh_editor.error.value)
    finally:
        app.close()


# ---------------------------------------------------------------------------- disk cache

def test_a_cache_folder_made_under_umask_002_is_used(tmp_path, monkeypatch):
    old = os.umask(0o002)
    try:
        cache = DiskCache(tmp_path / "new" / "cache")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new" / "cache").stat().st_mode) == 0o700
    assert cache.get("nothing") is None


def test_a_group_writable_folder_of_the_users_is_accepted_and_a_world_writable_one_refused(
        tmp_path, monkeypatch):
    group = tmp_path / "group"
    group.mkdir()
    group.chmod(0o775)                       # as `mkdir` makes it under umask 002
    DiskCache(group)
    world = tmp_path / "world"
    world.mkdir()
    world.chmod(0o777)
    with pytest.raises(PermissionError, match=f"every user may write to {world} .mode 777.; "
                                              "the report cache needs a folder others cannot "
                                              "write to"):
        DiskCache(world)
    # Said once, as one warning, however often the cache is asked for.
    monkeypatch.setenv("EXPLORER_DISK_CACHE", "1")
    monkeypatch.setenv("EXPLORER_CACHE_DIR", str(world))
    diskcache._default.pop(world, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert diskcache.default_cache() is None and diskcache.default_cache() is None
    assert len([w for w in caught if "report cache" in str(w.message)]) == 1
    diskcache._default.pop(world, None)


# ---------------------------------------------------------------------------- bounded errors

@pytest.mark.parametrize("call, names", [
    (lambda: parse_rules(HUGE), "cannot read rules 'xxxx"),
    (lambda: parse_rules(f"{HUGE}=data", ("batch",)), "names logical dimension 'xxxx"),
    (lambda: parse_rules(f"({HUGE}"), "cannot read rules '(xxxx"),
    (lambda: parse_spec(HUGE + ")"), "cannot read spec 'xxxx"),
    (lambda: parse_spec(f"P({HUGE}"), "spec 'P(xxxx"),
    (lambda: explorer.analyze_workload("transformer", mesh="data=2,model=4", rules=HUGE),
     "cannot read rules 'xxxx"),
    (lambda: explorer.analyze_workload("mlp", mesh="data=2,model=4", specs={"w1": HUGE}),
     "axis 'xxxx"),
    (lambda: explorer.analyze_workload("mlp", mesh="data=2,model=4",
                                       specs={"w1": f"{HUGE},None"}), "axis 'xxxx"),
], ids=["rules", "rule", "rules-pair", "spec", "spec-P", "analyze-rules", "analyze-spec",
        "analyze-axis"])
def test_a_huge_rules_or_spec_value_gives_a_short_error_naming_it(call, names):
    with pytest.raises(ExplorerError) as e:
        call()
    message = str(e.value)
    assert len(message) <= MESSAGE_MOST, len(message)
    assert names in message and "..." in message


# ---------------------------------------------------------------------------- the server

def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def app_server():
    """`sharding-explorer app` on a free loopback port, as tests/ui/test_serve.py starts it;
    yields (process, port) once Voila answers, and stops it."""
    pytest.importorskip("voila")
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "explorer._src.cli", "app", "--port",
                             str(port)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == f"sharding-explorer app: http://127.0.0.1:{port}/"
        from explorer._src.ui.serve import wait_until_serving

        wait_until_serving(f"http://127.0.0.1:{port}/voila/static/", proc)
        yield proc, port
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _get(port: int, headers: dict) -> tuple[int, str]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=300) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""


def _kernel_id(page: str) -> str:
    found = re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", page)
    assert found, "the page names no kernel"
    return found.group(0)


async def _websocket(port: int, kernel: str, headers: dict):
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    return await websocket_connect(HTTPRequest(
        f"ws://127.0.0.1:{port}/api/kernels/{kernel}/channels", headers=headers))


def _message(msg_type: str, content: dict) -> dict:
    return {"header": {"msg_id": uuid.uuid4().hex, "username": "probe",
                       "session": uuid.uuid4().hex, "msg_type": msg_type, "version": "5.3",
                       "date": ""},
            "parent_header": {}, "metadata": {}, "content": content, "channel": "shell",
            "buffers": []}


async def _replies_to(conn, msg: dict) -> list[dict]:
    """The messages the kernel sends about `msg` until it is idle again after it (the state
    every request ends in), then a kernel_info_request's idle (a second state, so that output
    sent late is in)."""
    await conn.write_message(json.dumps(msg))
    probe = _message("kernel_info_request", {})
    await conn.write_message(json.dumps(probe))
    out: list[dict] = []
    while True:
        raw = await conn.read_message()
        assert raw is not None, "the kernel's websocket closed"
        m = json.loads(raw)
        parent = m.get("parent_header", {}).get("msg_id")
        if parent == msg["header"]["msg_id"]:
            out.append(m)
        if parent == probe["header"]["msg_id"] and m["msg_type"] == "kernel_info_reply":
            return out


@pytest.mark.slow
def test_a_served_app_refuses_a_foreign_host_and_a_foreign_origin(app_server):
    proc, port = app_server
    # DNS rebinding: a page of evil.example re-points its name at 127.0.0.1. Refused before
    # anything runs; the server's own names are served.
    assert _get(port, {"Host": "evil.example"})[0] == 403
    assert _get(port, {"Host": f"evil.example:{port}"})[0] == 403
    status, page = _get(port, {"Host": f"localhost:{port}"})
    assert status == 200
    kernel = _kernel_id(page)

    async def scenario():
        from tornado.httpclient import HTTPClientError

        for headers in ({"Origin": "http://evil.example"},
                        {"Origin": f"http://evil.example:{port}"},
                        {"Host": "evil.example", "Origin": "http://evil.example"}):
            with pytest.raises(HTTPClientError) as e:
                await _websocket(port, kernel, headers)
            assert e.value.code == 403, headers
        # The page's own origin gets the kernel.
        conn = await _websocket(port, kernel, {"Origin": f"http://127.0.0.1:{port}"})
        try:
            # A forged comm_open the kernel refuses: the page hears that the comm closed, and
            # nothing of the kernel's traceback.
            forged = _message("comm_open", {
                "comm_id": uuid.uuid4().hex, "target_name": "jupyter.widget",
                "data": {"state": {"_model_name": "NoSuchModel"}}})
            replies = await _replies_to(conn, forged)
            # Voila refuses a page's execute_request: no code of a page's runs.
            run = _message("execute_request", {"code": "import os; print(os.getpid())",
                                               "silent": False, "store_history": False,
                                               "user_expressions": {}, "allow_stdin": False})
            await conn.write_message(json.dumps(run))
            ran = await _replies_to(conn, _message("kernel_info_request", {}))
        finally:
            conn.close()
        return replies, ran

    replies, ran = asyncio.run(scenario())
    kinds = [m["msg_type"] for m in replies]
    assert "comm_close" in kinds and "stream" not in kinds and "error" not in kinds, kinds
    assert "Traceback" not in json.dumps(replies)
    assert not [m for m in ran if m["msg_type"] in ("stream", "execute_result")]


@pytest.mark.slow
def test_the_served_apps_kernels_get_the_servers_limits(app_server):
    psutil = pytest.importorskip("psutil")
    proc, port = app_server
    deadline = time.monotonic() + 300
    while True:           # the preheated kernels, started by Voila once it serves
        kernels = [p for p in psutil.Process(proc.pid).children(recursive=True)
                   if "ipykernel" in " ".join(p.cmdline())]
        if kernels or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert kernels, "Voila started no kernel"
    environment = kernels[0].environ()
    for env, value in SERVED_DEFAULTS.environment().items():
        assert environment.get(env) == value
    assert os.path.isfile(os.path.join(environment["IPYTHONDIR"], "profile_default",
                                       "ipython_kernel_config.json"))
