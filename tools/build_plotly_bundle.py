"""Build explorer/_src/ui/static/plotly_widget.js: plotly.py's FigureWidget code with a plotly.js of
only the trace types the app draws.

Run by hand, with node and npm on the PATH (nothing else needs them):

    .venv/bin/python tools/build_plotly_bundle.py

plotly ships its FigureWidget's page code as one file, `plotly/package_data/widgetbundle.js`:
plotly.py's `js/src/widget.ts` bundled by esbuild with the whole of plotly.js (about 5 MB; every
trace type). The app draws three trace types (explorer/ui: heatmaps, scatter, bar), and a page
load spent about 1.7 s evaluating that file before the first heatmap showed (docs/performance.md,
"First result on a page load"). This script builds the same widget code the same way, against a
plotly.js of those three trace types, built from plotly.js's own sources (`plotly.js/lib/core`,
which holds scatter and every component, with `lib/bar` and `lib/heatmap` registered, as
plotly.js's partial bundles are made), with plotly.js's esbuild settings.

tools/plotly_widget/ holds the inputs: `widget.ts` and `tsconfig.json` from plotly.py (v7.0,
commit 7788d74be8a5; unchanged since April 2025; MIT, LICENSE.txt), and the npm packages pinned
in package.json and package-lock.json. The script installs them (`npm ci`) in a temporary
folder, builds, and, before writing anything, builds plotly's own file from the same inputs (the
full plotly.js in place of the partial one) and checks it is byte for byte the installed
plotly's `widgetbundle.js`: the widget code sent to the page is plotly's own. A plotly upgrade
that changes that file fails the check; then update the pins (plotly.js: the version in
widgetbundle.js's `src/version.js`) and, where plotly.py changed it, widget.ts.

The written file starts with a comment holding the plotly version it was built for and the trace
types it draws; explorer/_src/ui/figure.py reads it and sends plotly's own bundle instead where the
installed plotly is another version or a figure draws another trace type.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INPUTS = ROOT / "tools" / "plotly_widget"
OUT = ROOT / "explorer" / "_src" / "ui" / "static" / "plotly_widget.js"
# The trace types the app draws (explorer/_src/ui/*.py: go.Heatmap, add_scatter, add_bar); scatter
# is
# in plotly.js's core.
TRACES = ("bar", "heatmap", "scatter")
HEADER = "/* sharding-explorer plotly widget bundle {} */\n"

# plotly.py's `build:widget` script (js/package.json), less the alias.
WIDGET_ARGS = ["src/widget.ts", "--bundle", "--format=esm", "--minify", "--log-level=warning"]
# plotly.js's esbuild-config.js, as its dist and partial bundles are built: its plugins inline
# maplibre-gl's CSS (required only when a map trace is registered: none here, so it is left
# out), compile WebGL shaders (for gl traces: none here) and set process.env.NODE_DEBUG (read by
# none of the modules bundled here; checked below).
PLOTLY_ARGS = ["plotly-partial.js", "--bundle", "--format=cjs", "--minify", "--target=es2016",
               "--define:global=window", "--define:define.amd=false",
               "--alias:regl=@plotly/regl", "--alias:stream=stream-browserify",
               "--loader:.css=empty", "--log-level=warning"]


def plotly_widget_bundle() -> Path:
    import plotly
    return Path(plotly.__file__).parent / "package_data" / "widgetbundle.js"


def run(cmd: list[str], cwd: Path) -> None:
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, cwd=cwd, check=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=OUT, help=f"default: {OUT.relative_to(ROOT)}")
    args = ap.parse_args()
    import plotly

    pins = json.loads((INPUTS / "package.json").read_text())["dependencies"]
    shipped = plotly_widget_bundle()
    embedded = re.search(r'"src/version\.js"\(\w+\)\{"use strict";\w+\.version="([^"]+)"',
                         shipped.read_text(encoding="utf-8"))
    if embedded is None or embedded.group(1) != pins["plotly.js"]:
        sys.exit(f"plotly {plotly.__version__} ships plotly.js "
                 f"{embedded.group(1) if embedded else '(not found)'}; "
                 f"tools/plotly_widget/package.json pins {pins['plotly.js']}")
    npm = shutil.which("npm")
    if npm is None:
        sys.exit("npm is needed (e.g. apt-get install nodejs npm)")

    with tempfile.TemporaryDirectory(prefix="plotly-widget-") as tmp:
        work = Path(tmp)
        (work / "src").mkdir()
        shutil.copy(INPUTS / "widget.ts", work / "src" / "widget.ts")
        for name in ("tsconfig.json", "package.json", "package-lock.json"):
            shutil.copy(INPUTS / name, work / name)
        # esbuild's install script only checks its binary, which comes in @esbuild/<platform>.
        run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"], work)
        esbuild = str(work / "node_modules" / ".bin" / "esbuild")

        # plotly's own file from these inputs: the check that the widget code is plotly's.
        run([esbuild, *WIDGET_ARGS, "--alias:plotly.js=plotly.js/dist/plotly",
             "--outfile=check.js"], work)
        if (work / "check.js").read_bytes() != shipped.read_bytes():
            sys.exit(f"these inputs do not rebuild {shipped} byte for byte: plotly "
                     f"{plotly.__version__}'s widget code differs from tools/plotly_widget/")

        (work / "plotly-partial.js").write_text(
            "var Plotly = require('plotly.js/lib/core');\n"
            "Plotly.register([" + ", ".join(f"require('plotly.js/lib/{t}')" for t in TRACES
                                             if t != "scatter") + "]);\n"
            "module.exports = Plotly;\n")
        banner = (f"/*! plotly.js v{pins['plotly.js']} ({', '.join(TRACES)}) | Copyright "
                  "Plotly, Inc. | MIT License | built by tools/build_plotly_bundle.py */")
        run([esbuild, *PLOTLY_ARGS, f"--banner:js={banner}", "--outfile=plotly-partial.min.js"],
            work)
        partial = (work / "plotly-partial.min.js").read_text(encoding="utf-8")
        if "process.env" in partial:
            sys.exit("the partial plotly.js reads process.env: plotly.js's environment plugin "
                     "would be needed")
        run([esbuild, *WIDGET_ARGS, f"--alias:plotly.js={work / 'plotly-partial.min.js'}",
             "--outfile=widget.js"], work)
        body = (work / "widget.js").read_text(encoding="utf-8")

    drawn = sorted(set(re.findall(r'moduleType:"trace",name:"(\w+)"', body)))
    if drawn != sorted(TRACES):
        sys.exit(f"the bundle registers {drawn}, not {sorted(TRACES)}")
    info = {"plotly": plotly.__version__, "plotly.js": pins["plotly.js"], "traces": drawn}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(HEADER.format(json.dumps(info)) + body, encoding="utf-8")
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.2f} MB; plotly's: "
          f"{shipped.stat().st_size / 1e6:.2f} MB): {json.dumps(info)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
