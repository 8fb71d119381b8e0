"""`sharding-explorer app` as a server: SIGTERM stops Voila, its kernels and their compile
workers; a token, when asked for, is required; the default port falls back when taken."""

import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

psutil = pytest.importorskip("psutil")
pytest.importorskip("voila")

from explorer._src.ui.serve import DEFAULT_PORT, is_loopback  # noqa: E402

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(*extra: str):
    """`sharding-explorer app` on a free port, once it has printed its URL; the server must
    take a connection at once (one try: the URL is printed when the server answers)."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "explorer._src.cli", "app", "--port", str(port),
                             *extra], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    line = proc.stdout.readline().strip()
    assert line.startswith("sharding-explorer app: http://"), (line, proc.poll())
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
    return proc, port, line.removeprefix("sharding-explorer app: ")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None          # a redirect (to a login page) is the answer itself


def _status(url: str) -> int:
    try:
        return urllib.request.build_opener(_NoRedirect).open(url, timeout=240).status
    except urllib.error.HTTPError as e:
        return e.code


def test_sigterm_stops_voila_its_kernel_and_the_compile_workers():
    proc, port, url = _start()
    try:
        assert url == f"http://127.0.0.1:{port}/"
        # Loading the page runs the app notebook in a kernel, which starts a compile worker.
        assert _status(url) == 200
        deadline = time.time() + 180
        while True:       # the kernel runs the app notebook, whose first compile starts a worker
            tree = psutil.Process(proc.pid).children(recursive=True)
            names = " ".join(" ".join(p.cmdline()) for p in tree if p.is_running())
            if "explorer._src.compile.worker" in names or time.time() > deadline:
                break
            time.sleep(1)
        assert "voila" in names and "ipykernel" in names and "explorer._src.compile.worker" in names
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        gone, alive = psutil.wait_procs(tree, timeout=30)
        assert alive == [], [" ".join(p.cmdline()) for p in alive]
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_token_is_required_when_asked_for():
    proc, port, url = _start("--token")
    try:
        base, _, token = url.partition("?token=")
        assert base == f"http://127.0.0.1:{port}/" and len(token) >= 24
        # Without the token the app page sends to a login page; with it, the app is served.
        assert _status(base) in (302, 401, 403)
        assert _status(f"{base}?token={token}") == 200
        assert _status(f"{base}?token=wrong{token}") in (302, 401, 403)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


def test_the_printed_url_answers_at_once_with_the_app_page():
    # The URL is printed once Voila serves and its preheated kernels have run the notebook:
    # its first request is answered (no retry), with the page.
    proc, port, url = _start()
    try:
        with urllib.request.urlopen(url, timeout=240) as page:
            assert page.status == 200 and b"explorer" in page.read().lower()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


def test_loopback_is_recognised():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3")


def test_the_default_port_falls_back_to_a_free_one_when_taken():
    from explorer._src.ui.serve import port_is_free

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", DEFAULT_PORT))
        except OSError:
            pytest.skip(f"port {DEFAULT_PORT} is in use on this machine")
        s.listen()
        assert not port_is_free(DEFAULT_PORT)
