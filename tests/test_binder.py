"""binder/jupyter_server_config.py: the app at explorer-app/ on Binder is the standalone Voila
of `sharding-explorer app` (explorer._src.ui.serve.voila_command), started and proxied by
jupyter-server-proxy. No server is started here."""

import runpy
from pathlib import Path

import pytest

pytest.importorskip("voila")
traitlets_config = pytest.importorskip("traitlets.config")

from explorer._src.ui.serve import app_notebook, voila_command  # noqa: E402

BINDER = Path(__file__).resolve().parents[1] / "binder"
CONFIG = BINDER / "jupyter_server_config.py"
# What jupyter-server-proxy hands a command callable: the port it chose and the Jupyter
# server's base URL (on mybinder.org, /user/<name>/).
PORT, BASE_URL = 43117, "/user/ada-lovelace-abc123/"


def servers() -> dict:
    """The file as the Jupyter server loads it: a script that fills `get_config()`."""
    config = traitlets_config.Config()
    runpy.run_path(str(CONFIG), init_globals={"get_config": lambda: config})
    return config.ServerProxy.servers


# Voila's login cookie, named apart from the Jupyter server's, which it would otherwise clear.
COOKIE = "--IdentityProvider.cookie_name=sharding-explorer-app"


def test_the_proxy_starts_the_command_of_sharding_explorer_app_under_the_proxied_path():
    app = servers()["explorer-app"]
    command = app["command"](PORT, BASE_URL)
    assert command == [*voila_command(PORT, base_url=f"{BASE_URL}explorer-app/",
                                      behind_proxy=True), COOKIE]
    # The same Voila as `sharding-explorer app` (which passes no base_url), plus the prefix and
    # the cookie, and with Voila's Host check off (the Jupyter server in front checks Host,
    # Origin and its login; the proxy forwards the public Host): the preheated kernel, its
    # refill delay, the culler that spares it, the app notebook.
    prefix = f"--Voila.base_url={BASE_URL}explorer-app/"
    remote = "--ServedVoila.allow_remote_access=True"
    assert remote in command and remote not in voila_command(PORT)
    assert [arg for arg in command if arg not in (prefix, COOKIE, remote)] == voila_command(PORT)
    assert prefix in command and f"--port={PORT}" in command
    assert {"--preheat_kernel=True", "--pool_size=2", "--VoilaKernelManager.fill_delay=5"} \
        <= set(command)
    assert str(app_notebook()) in command
    # Voila's routes carry the prefix, so the proxy must forward the full path.
    assert app["absolute_url"] is True
    # The proxy formats every argument with {port}, {base_url}, {unix_socket}: a brace in one
    # would be mangled or raise.
    assert [a.format(port=1, base_url="/x/", unix_socket="") for a in command] == command


def test_without_a_base_url_the_command_is_unchanged():
    assert not [arg for arg in voila_command(PORT) if arg.startswith("--Voila.base_url")]


def test_jupyter_server_proxy_accepts_the_entry_and_routes_explorer_app():
    proxy_config = pytest.importorskip("jupyter_server_proxy.config")
    process = proxy_config.ServerProcess(name="explorer-app", **servers()["explorer-app"])
    assert process.timeout >= 30          # Voila's imports, from a cold disk on Binder
    assert process.launcher_entry.path_info == "explorer-app/"
    handlers = proxy_config.make_handlers(BASE_URL, [process])
    assert handlers and all(h[0].startswith(f"{BASE_URL}explorer-app") for h in handlers)
    # The handler calls the command with the arguments it asks for, by name.
    from jupyter_server_proxy.utils import call_with_asked_args

    assert call_with_asked_args(process.command, {"port": PORT, "base_url": BASE_URL,
                                                  "unix_socket": ""}) \
        == [*voila_command(PORT, base_url=f"{BASE_URL}explorer-app/", behind_proxy=True),
            COOKIE]


def test_the_proxied_voila_gets_the_served_limits_and_the_kernels_settings(monkeypatch,
                                                                           tmp_path):
    """As `sharding-explorer app` gives its Voila: the limits a page or a link is held to, and
    the kernels' IPython folder whose settings keep a comm error's traceback off the page."""
    import json
    import tempfile

    from explorer._src.spec.bounds import SERVED_DEFAULTS, SERVED_LIMITS_ENV
    from explorer._src.ui.serve import KERNEL_CONFIG

    for env in SERVED_LIMITS_ENV.values():
        monkeypatch.delenv(env, raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))     # its folder made in tmp_path
    environment = servers()["explorer-app"]["environment"]()
    assert Path(environment["IPYTHONDIR"]).parent == tmp_path
    assert {k: v for k, v in environment.items() if k != "IPYTHONDIR"} \
        == SERVED_DEFAULTS.environment()
    config = Path(environment["IPYTHONDIR"]) / "profile_default" / "ipython_kernel_config.json"
    assert json.loads(config.read_text()) == KERNEL_CONFIG


def test_postbuild_installs_the_config_where_the_jupyter_server_reads_it():
    post_build = (BINDER / "postBuild").read_text()
    assert 'cp binder/jupyter_server_config.py "${HOME}/.jupyter/jupyter_server_config.py"' \
        in post_build
    assert "jupyter-server-proxy==" in (BINDER / "requirements.txt").read_text()
