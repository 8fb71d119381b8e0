"""Sphinx configuration: the docs site, built with `sphinx-build -W docs docs/_build/html`.

Pages are Markdown (MyST); notebooks under notebooks/ are executed at build time by myst-nb,
errors not allowed, each cell under a timeout.
"""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
# The tutorials call jax directly next to the explorer; give them 8 fake CPU devices, as Binder
# does. The explorer's own compile workers choose their device counts themselves.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

project = "sharding-explorer"
author = "the sharding-explorer developers"
extensions = ["clihelp", "myst_nb", "sphinx.ext.autodoc", "sphinx.ext.napoleon",
              "sphinx.ext.viewcode"]
exclude_patterns = ["_build", "screenshots", "**/.ipynb_checkpoints"]
html_theme = "furo"
html_title = "sharding-explorer"
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3

# Notebooks: executed at build time; an error fails the build (with -W).
nb_execution_mode = "force"
nb_execution_timeout = 180
nb_execution_raise_on_error = True
nb_execution_show_tb = True

autodoc_member_order = "bysource"
autodoc_typehints = "description"
# Cross-references to jax objects in docstrings are not resolved here. A field typed `bytes`
# (Report.hlo_proto) also matches the `bytes` attributes of Collective, Buffer and others;
# Sphinx calls that ambiguous (ref.python), though the builtin is meant.
suppress_warnings = ["myst.xref_missing", "ref.python"]
