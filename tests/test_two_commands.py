"""The README's test command is the one .ci/run runs: they drifted once (an extra installed by
one and not the other), so a fresh machine following the README ran a different suite."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _command(text: str) -> str:
    (line,) = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("apt-get update")]
    return line


def test_the_readmes_test_command_is_the_one_ci_runs():
    assert _command((ROOT / "README.md").read_text()) == _command((ROOT / ".ci/run").read_text())


def test_ci_installs_every_extra_the_project_declares():
    import tomllib
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
                 ["optional-dependencies"])
    installed = _command((ROOT / ".ci/run").read_text()).split("-e '.[", 1)[1].split("]", 1)[0]
    assert set(installed.split(",")) == extras - {"all"}        # `all` is the others together
