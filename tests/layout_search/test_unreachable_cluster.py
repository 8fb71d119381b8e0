"""A cluster address where nothing listens fails the search within seconds, with one message
naming the address, instead of Ray's GCS client retrying it for many minutes: before Ray is
asked to connect, something must accept a TCP connection at the address's host and port
(connect.probe_address), for 'HOST:PORT' (the GCS) and 'ray://HOST:PORT' (Ray Client) alike.

The searches run in a subprocess with a generous time limit, so that a regression fails the
test instead of hanging it; nothing here asserts on elapsed time."""

import json
import socket
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

from explorer._src.errors import ExplorerError
from explorer._src.layout_search import connect as connect_module
from explorer._src.layout_search.connect import (
    CONNECT_TIMEOUT_S,
    CONNECT_WINDOW_S,
    REFUSED_WINDOW_S,
    connect,
    probe_address,
)

# Far above the seconds the check takes (and the import of the explorer and Ray), far below the
# minutes Ray's own retries take.
SUBPROCESS_LIMIT_S = 120

SEARCH = """
import json, sys
import explorer
{before}
try:
    explorer.search("mlp", mesh="data=4", target="h100-4", cluster=sys.argv[1])
except Exception as e:
    print(json.dumps({{"type": type(e).__name__, "explorer": isinstance(e, explorer.ExplorerError),
                      "message": str(e)}}))
else:
    print(json.dumps(None))
"""


def _search_in_subprocess(address: str, before: str = "") -> dict:
    script = textwrap.dedent(SEARCH).format(before=textwrap.dedent(before))
    try:
        done = subprocess.run([sys.executable, "-c", script, address], capture_output=True,
                              text=True, timeout=SUBPROCESS_LIMIT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"explorer.search(cluster={address!r}) gave no error within "
                    f"{SUBPROCESS_LIMIT_S} s")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _refused_message(address: str, port: int) -> str:
    return (f"no Ray cluster answers at {address!r}: nothing accepted a TCP "
            f"connection there (connection refused: nothing is listening on port {port}; "
            "ConnectionRefusedError: ")


@pytest.mark.parametrize("address", ["127.0.0.2:1", "ray://127.0.0.2:1"])
@pytest.mark.slow
def test_a_search_on_an_address_where_nothing_listens_fails_naming_it(address):
    pytest.importorskip("ray")
    error = _search_in_subprocess(address)
    assert error is not None, "the search succeeded"
    assert error["type"] == "ExplorerError" and error["explorer"]
    message = error["message"]
    assert message.startswith(_refused_message(address, 1))
    if address.startswith("ray://"):
        assert "`ray start --head` (its Ray Client server listens on 10001; " \
               "`--ray-client-server-port=1` for this port)" in message
    else:
        assert "start the head with `ray start --head --port=1`" in message
    assert "the address `ray status` prints" in message and "\n" not in message


@pytest.mark.slow
def test_an_unreachable_address_fails_as_fast_after_an_earlier_connection():
    """A process that connected to a cluster before (here: Ray in this process, started and
    stopped, as a search with cluster='local' does) fails the same way."""
    pytest.importorskip("ray")
    before = """
    import ray
    from explorer._src.layout_search.connect import connect
    assert connect(ray, "local")
    ray.shutdown()
    """
    error = _search_in_subprocess("127.0.0.2:1", before)
    assert error is not None and error["type"] == "ExplorerError"
    assert error["message"].startswith(_refused_message("127.0.0.2:1", 1))


class NoRay:
    """Ray as connect() uses it, recording any ray.init."""

    def __init__(self, initialized: bool = False):
        self.initialized = initialized
        self.inits: list[dict] = []

    def is_initialized(self) -> bool:
        return self.initialized

    def init(self, **options):
        self.inits.append(options)


@pytest.fixture
def closed_port():
    """A port of 127.0.0.2 bound and not listening: a connection to it is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.2", 0))
        yield s.getsockname()[1]


@pytest.fixture
def listening_port():
    with socket.socket() as s:
        s.bind(("127.0.0.2", 0))
        s.listen(4)
        yield s.getsockname()[1]


@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_ray_is_not_asked_to_connect_where_nothing_listens(closed_port, scheme):
    fake = NoRay()
    address = f"{scheme}127.0.0.2:{closed_port}"
    with pytest.raises(ExplorerError) as caught:
        connect(fake, address)
    assert str(caught.value).startswith(_refused_message(address, closed_port))
    assert fake.inits == []


@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_an_address_where_something_listens_is_passed_on_to_ray(listening_port, scheme,
                                                                monkeypatch):
    monkeypatch.setattr(connect_module, "reread_auth", lambda: None)
    fake = NoRay()
    assert connect(fake, f"{scheme}127.0.0.2:{listening_port}") is True
    assert [o["address"] for o in fake.inits] == [f"{scheme}127.0.0.2:{listening_port}"]


def test_a_connection_already_held_is_used_without_checking_the_address():
    fake = NoRay(initialized=True)
    assert connect(fake, "127.0.0.2:1") is False and fake.inits == []


@pytest.mark.parametrize("address", ["auto", "local", "anyscale://my-cluster"])
def test_addresses_ray_finds_itself_are_not_checked(address, monkeypatch):
    def no_connection(*args, **kwargs):
        raise AssertionError("tried a TCP connection")
    monkeypatch.setattr(socket, "create_connection", no_connection)
    probe_address(address)


class Clock:
    """time.monotonic and time.sleep, and socket.create_connection answering `answers` in
    turn (an exception, or None to accept), each try taking its timeout when it times out."""

    def __init__(self, answers):
        self.now = 0.0
        self.answers = list(answers)
        self.tries: list[tuple[tuple[str, int], float]] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def create_connection(self, target, timeout):
        self.tries.append((target, timeout))
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, TimeoutError):
            self.now += timeout
        if answer is not None:
            raise answer
        return socket.socket()


@pytest.fixture
def clock(monkeypatch):
    def make(answers):
        fake = Clock(answers)
        monkeypatch.setattr(connect_module, "time", SimpleNamespace(
            monotonic=fake.monotonic, sleep=fake.sleep))
        monkeypatch.setattr(connect_module.socket, "create_connection", fake.create_connection)
        return fake
    return make


def test_a_refusal_is_tried_again_briefly_and_a_timeout_for_the_whole_window(clock):
    refused = clock([ConnectionRefusedError(111, "Connection refused")])
    with pytest.raises(ExplorerError, match="connection refused"):
        probe_address("[::1]:6390")
    assert {t for t, _ in refused.tries} == {("::1", 6390)}
    assert 1 < len(refused.tries) and refused.now <= REFUSED_WINDOW_S

    timed_out = clock([TimeoutError("timed out")])
    with pytest.raises(ExplorerError, match=r"\(timed out: no answer from the host"):
        probe_address("ray://head.example.com:10001")
    assert {t for t, _ in timed_out.tries} == {("head.example.com", 10001)}
    assert all(0 < timeout <= CONNECT_TIMEOUT_S for _, timeout in timed_out.tries)
    assert 1 < len(timed_out.tries) and REFUSED_WINDOW_S < timed_out.now <= CONNECT_WINDOW_S + 1


def test_a_head_that_starts_listening_within_the_window_is_found(clock):
    starting = clock([ConnectionRefusedError(111, "Connection refused"), None])
    probe_address("127.0.0.2:6390")
    assert len(starting.tries) == 2
