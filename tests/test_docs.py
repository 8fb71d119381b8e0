"""The docs site builds with warnings as errors, as `sphinx-build -W docs docs/_build/html` does
(tutorial notebooks included, executed at build time by myst-nb)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_docs_build_with_warnings_as_errors(tmp_path):
    pytest.importorskip("myst_nb", reason="the docs extra is not installed")
    p = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                        str(ROOT / "docs"), str(tmp_path / "html")],
                       capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stderr[-4000:]
    html = (tmp_path / "html" / "cli.html").read_text()
    assert "sharding-explorer analyze" in html      # the CLI page, rendered from the parser
    assert "analyze_workload" in (tmp_path / "html" / "api.html").read_text()
