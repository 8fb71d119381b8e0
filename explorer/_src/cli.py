"""The `sharding-explorer` command line. Bad input exits with status 2 and one message; a
search that evaluated no candidate (its budget ran out first) exits with status 3."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

from explorer._src.errors import ExplorerError, InputError
from explorer._src.spec.bounds import MAX_ELEMENTS, MAX_TOTAL_ELEMENTS, power_text
from explorer._src.strategy.presets import PRESETS
from explorer._src.workloads.registry import WORKLOADS, get_workload


def _key_values(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise InputError(f"{what} {item!r} is not written as NAME=VALUE")
        out[key.strip()] = value.strip()
    return out


def _seconds(text: str, name: str = "timeout") -> float:
    """--timeout (--node-timeout: `name` "node_timeout", the API argument it sets): a positive,
    finite number of seconds (argparse's float takes 'nan' and 'inf')."""
    from explorer._src.api.request import check_timeout

    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    try:
        return check_timeout(seconds, name)
    except ExplorerError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _port(text: str) -> int:
    """--port: a TCP port, 1 to 65535."""
    try:
        port = int(text)
    except ValueError:
        port = None
    if port is None or not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port {text!r} is not a whole number from 1 to 65535")
    return port


def _collective_number(text: str) -> int:
    """--what-if: a whole number; whether the Report has that collective is checked once it is
    compiled (`_what_if_index`)."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a collective's number (a whole "
                                         "number, 1 for the first)") from None


def _what_if_index(report, number: int) -> int:
    """--what-if N as an index into report.collectives: the Collectives table numbers them from
    1, the API from 0."""
    count = len(report.collectives)
    if count == 0:
        raise InputError(f"--what-if {number}: this analysis has no collectives, so no spec "
                         "change can remove one")
    if not 1 <= number <= count:
        numbered = "1 collective: #1" if count == 1 else f"{count} collectives: #1 to #{count}"
        raise InputError(f"--what-if {number}: there is no collective #{number}; this analysis "
                         f"has {numbered} in the Collectives table")
    return number - 1


def _what_if_text(search) -> str:
    """The --what-if section: the collective, then each confirmed change as the --spec flags
    that make it, with the bytes of the collective's line before and after."""
    from explorer._src.units import format_bytes

    c = search.collective
    code = f": {c.source_text}" if c.source_text else ""
    lines = [f"What if: collective #{search.index + 1}, {c.kind} over {','.join(c.axes) or '?'}"
             f", {format_bytes(c.bytes)} per device, at {c.source or 'an unknown line'}{code}"]
    if search.untried:
        return "\n".join(lines + [f"  nothing to try: {search.untried}"])
    tried = f"{search.tried} spec change{'s' if search.tried != 1 else ''} compiled"
    if not search.confirmed:
        return "\n".join(lines + [f"  {tried}; none was confirmed to move fewer bytes on this "
                                  "line"])
    lines.append(f"  {tried}; {len(search.confirmed)} confirmed, best first:")
    for change in search.confirmed:
        flags = " ".join(f"--spec {n}={s}" for n, s in change.specs.items())
        lines.append(f"  {flags}: this line {format_bytes(change.line_bytes_before)} → "
                     f"{format_bytes(change.line_bytes_after)}, all collectives "
                     f"{format_bytes(change.total_bytes_before)} → "
                     f"{format_bytes(change.total_bytes_after)} per device")
        lines.append(f"    {change.label}")
    return "\n".join(lines)


def _check_output_path(flag: str, path: str, example: str) -> None:
    """--trace, --emit-code, --save: a file that can be written, checked before the compile
    (which can take minutes) so that a mistyped folder fails at once rather than after it."""
    folder = Path(path).parent
    if Path(path).is_dir():
        raise InputError(f"{flag} {path!r} is a folder; give a file name in it, "
                         f"e.g. {os.path.join(path, example)}")
    if not folder.is_dir():
        raise InputError(f"{flag} {path!r}: the folder {str(folder)!r} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK) or \
            (Path(path).exists() and not os.access(path, os.W_OK)):
        raise InputError(f"{flag} {path!r} is not writable by this user")


def _check_output_folder(flag: str, path: str) -> None:
    """--xprof: a folder that exists or can be made, checked before the compile."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise InputError(f"{flag} {path!r} is a file; give a folder (created if missing)")
    existing = next(p for p in (folder, *folder.absolute().parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(f"{flag} {path!r}: the folder {str(existing)!r} is not writable by "
                         "this user")


def _write_output(flag: str, path: str, text: str, what: str) -> None:
    try:
        with open(path, "w") as f:
            f.write(text)
    except OSError as e:        # e.g. the disk filled up, or the folder went away meanwhile
        raise InputError(f"{flag} {path!r} could not be written: {e.strerror or e}") from None
    print(f"{what} written to {path}", file=sys.stderr)


def _strict_json(obj) -> str:
    """JSON that strict parsers read: NaN and infinities (not JSON) are written as null."""
    def finite(x):
        if isinstance(x, float) and not math.isfinite(x):
            return None
        if isinstance(x, dict):
            return {k: finite(v) for k, v in x.items()}
        if isinstance(x, list | tuple):
            return [finite(v) for v in x]
        return x

    return json.dumps(finite(obj), allow_nan=False)


# explorer.analyze's timeout=None: the compile pool's own limit (compile/pool.py's
# DEFAULT_TIMEOUT_S), written here so that `--help` imports no compile machinery;
# tests/test_cli_help.py checks that the two agree.
_DEFAULT_TIMEOUT = "120 s"

_PARAM_HELP = "a workload size param, e.g. batch=512 (see `workloads`)"


def _add_param(p: argparse.ArgumentParser, help: str = _PARAM_HELP) -> None:
    p.add_argument("--param", action="append", default=[], metavar="K=V", help=help)


def _add_run_flags(p: argparse.ArgumentParser, *, timeout_help: str, json_help: str,
                   quiet_help: str | None = None) -> None:
    """--timeout, --json and (for the commands that show progress) --quiet: the flags every
    compiling command takes."""
    p.add_argument("--timeout", type=_seconds, default=None, help=timeout_help)
    p.add_argument("--json", action="store_true", help=json_help)
    if quiet_help is not None:
        p.add_argument("--quiet", action="store_true", help=quiet_help)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sharding-explorer", description=(
        "See which collectives GSPMD/Shardy inserts for a sharded JAX program, over which mesh "
        "axes, at what size, and why."))
    sub = p.add_subparsers(dest="command")
    _app_parser(sub)
    _analyze_parser(sub)
    _search_parser(sub)
    sub.add_parser("workloads", help="list the built-in workloads, their tensors and params")
    sub.add_parser("presets", help="list the strategy presets, the mesh axes they expect and "
                   "their rules")
    sub.add_parser("targets", help="list the hardware catalog, one target per line, name first")
    _capacity_parser(sub)
    return p


def _app_parser(sub) -> None:
    app = sub.add_parser("app", help="start the interactive explorer in Voila (the default "
                         "with no command) and print its URL once its first page is ready")
    app.add_argument("--port", type=_port, default=None,
                     help="default: 8866, or a free port when 8866 is taken")
    app.add_argument("--ip", default="127.0.0.1",
                     help="address to listen on (default: this machine only; any other address "
                          "requires the token printed in the URL)")
    app.add_argument("--token", action="store_true",
                     help="require a token in the URL on loopback too")


def _analyze_parser(sub) -> None:
    a = sub.add_parser("analyze", help="compile a built-in workload on a mesh and report, or "
                       "the exploration saved in a file (--from)")
    a.add_argument("--from", dest="from_file", metavar="FILE",
                   help="analyse the exploration saved in FILE (a JSON file that the app, "
                   "Exploration.save or --save wrote): its workload, params, mesh, layout and "
                   "target, in place of those flags; checked field by field, nothing in it run")
    a.add_argument("--save", metavar="FILE",
                   help="also write this analysis's request as an exploration FILE that "
                   "--from, the app and explorer.load_exploration open")
    a.add_argument("--emit-code", metavar="FILE",
                   help="also write the layout as plain JAX code to FILE: jax.make_mesh, the "
                   "NamedShardings, jax.jit with in and out shardings, the pinned activations "
                   "and the logical_axis_rules (Report.to_code)")
    _add_workload_flags(a)
    a.add_argument("--trace", metavar="FILE",
                   help="write the predicted step timeline on --target as Chrome trace-event "
                   "JSON (open it in Perfetto, chrome://tracing or TensorBoard); with --measure "
                   "on the target's own chips, the measured run's lane beside it")
    a.add_argument("--xprof", metavar="DIR",
                   help="also write the compiled module and the predicted step (with "
                   "--target) as a run of the log folder DIR, to open with `xprof --logdir "
                   "DIR`: its memory viewer, graph viewer and trace viewer, no hardware run "
                   "(explorer.write_xprof)")
    a.add_argument("--measure", action="store_true",
                   help="also run the program on random inputs and time it (on fake CPU "
                   "devices this times this CPU; skipped over 1 GiB of inputs per device)")
    a.add_argument("--real-devices", action="store_true",
                   help="compile and --measure on this machine's own devices (e.g. its GPUs) "
                   "instead of fake CPU devices; the mesh must match their number")
    a.add_argument("--tpu-topology", metavar="GEN:SHAPE",
                   help="compile ahead of time for a TPU slice, e.g. v5e:4x4 or v4:16x16x16 "
                   "(needs the tpu extra; the mesh's device count must equal the chips)")
    a.add_argument("--compile-for", choices=["target", "cpu"],
                   help="target (the default): compile for a GPU or TPU --target's own "
                   "hardware where its compiler is installed (the gpu or tpu extra, no device "
                   "needed); cpu: on fake CPU devices, priced on the target (approximate)")
    a.add_argument("--partitioner", choices=["shardy", "gspmd"], help="default: shardy")
    a.add_argument("--axis-type", choices=["auto", "explicit", "manual"],
                   help="the type of the mesh axes that name none (default: auto)")
    _add_run_flags(a, timeout_help=f"compile time limit, seconds (default {_DEFAULT_TIMEOUT})",
                   json_help="one JSON object on stdout")
    a.add_argument("--hlo", choices=["optimized", "propagated", "stablehlo"],
                   help="also print this program text")
    a.add_argument("--why-layout", metavar="NAME",
                   help="say why tensor NAME (an input, an output or an intermediate's HLO "
                   "name) is laid out as it is: per dimension, where each mesh axis came from "
                   "and the ops it went through (Shardy only), instead of the summary")
    a.add_argument("--origins", action="store_true",
                   help="read every tensor's origins into the JSON (as --why-layout does; "
                   "about a tenth more of an analysis)")
    a.add_argument("--what-if", type=_collective_number, metavar="N",
                   help="then compile the input spec changes that might remove collective N "
                   "(its number in the Collectives table, 1 for the first) and print those a "
                   "compile confirmed moves fewer bytes on its line, with the bytes before "
                   "and after (explorer.what_if; with --json, under the key what_if)")
    a.add_argument("--extrapolate-layers", nargs="?", const=True, default=None,
                   metavar="A,B|auto",
                   help="compile the workload's stack of layers at two small layer counts "
                   "(3 and 4, or A,B) and carry the collectives, memory, cost and predicted "
                   "times on linearly to its own `layers` (explorer.analyze's extrapolate; "
                   "the output says EXTRAPOLATED first); auto (or auto:A,B): only where the full "
                   "compile's estimated time passes --timeout. A --from file's own "
                   "compile.extrapolate is run so too, and --save writes the option down")


def _add_workload_flags(a: argparse.ArgumentParser) -> None:
    """analyze's workload, its params, mesh and layout, and the target that prices it:
    what an exploration file (--from) gives instead, with --partitioner, --axis-type and
    --compile-for."""
    a.add_argument("--workload", help=f"one of: {', '.join(WORKLOADS)} (required without "
                   "--from)")
    _add_param(a)
    a.add_argument("--mesh", help="axes and sizes, e.g. data=2,model=4; an axis may name its "
                   "type, e.g. data=2:explicit,model=4 (required without --from)")
    a.add_argument("--spec", action="append", default=[], metavar="TENSOR=ENTRIES",
                   help="e.g. w1=None,model or \"x=P('data', None)\"; others are replicated "
                   "(or placed by --preset/--rules; a --spec wins over them)")
    a.add_argument("--preset", metavar="NAME",
                   help="a parallelism strategy as logical-axis rules: "
                   f"{', '.join(PRESETS)} (see `presets`)")
    a.add_argument("--rules", metavar="RULES",
                   help="logical-axis rules, e.g. batch=data,mlp=model,opt:embed=data, or "
                   "(name,axes) pairs as flax and MaxText write them, the first that fits "
                   "winning, e.g. \"(embed,fsdp),(embed,model)\"; applied after the preset's")
    a.add_argument("--activation", action="append", default=[], metavar="POINT=ENTRIES",
                   help="pin an activation at a constraint point, e.g. layer0=data,None,None, "
                   "or leave it to propagation with POINT=free (see `workloads` for points)")
    a.add_argument("--target", metavar="NAME",
                   help="predict times on this hardware, e.g. h100-8 or tpu-v5e-4x4 (see "
                   "`targets`)")
    a.add_argument("--mapping", metavar="AXES",
                   help="place mesh axes on the target's links, e.g. data=node,model=gpu "
                   "(default: innermost mesh axes on the fastest links)")
    a.add_argument("--peak", action="store_true",
                   help="predict with the vendors' peak FLOP/s and nominal link bandwidths "
                   "instead of the rates measured runs reach (the default; its notes name "
                   "each measured fraction)")


def _capacity_parser(sub) -> None:
    c = sub.add_parser("capacity", help="the largest global batch of a training workload that "
                       "fits a target, per remat and offload policy, each a compile for the "
                       "target; then the fastest strategy at the best batch")
    c.add_argument("--workload", default="transformer_train",
                   help="a training workload with a token batch (default transformer_train)")
    _add_param(c, "a workload param, e.g. layers=32 (its batch is what is searched)")
    c.add_argument("--mesh", required=True, help="axes and sizes, e.g. data=64")
    c.add_argument("--target", required=True, metavar="NAME", help="e.g. h100-8x8")
    c.add_argument("--preset", default="fsdp", help="the layout the batches use (default fsdp)")
    c.add_argument("--remat", default="none,minimal,full", metavar="P1,P2",
                   help="remat policies to try (default none,minimal,full)")
    c.add_argument("--offload", default="none", metavar="O1,O2",
                   help="offload settings to try: none, opt_state, activations (default none)")
    c.add_argument("--max-batch", type=_count, default=None, metavar="N",
                   help="the largest global batch to consider")
    c.add_argument("--no-strategy", action="store_true",
                   help="skip ranking the strategies at the best batch")
    c.add_argument("--compile-for", default="target", choices=["target", "cpu"],
                   help="target (the default): each probe compiled by the target's compiler; "
                   "cpu: on CPU devices, priced on the target")
    _add_run_flags(c, timeout_help="time limit of one compile, seconds (default "
                   f"{_DEFAULT_TIMEOUT})",
                   json_help="one JSON object on stdout", quiet_help="no progress lines on stderr")


def _capacity(args) -> int:
    from explorer._src.layout_search.capacity import largest_batch

    get_workload(args.workload)
    result = largest_batch(
        args.workload, args.mesh, args.target, _key_values(args.param, "--param"),
        preset=args.preset, remats=[r for r in args.remat.split(",") if r],
        offloads=[o for o in args.offload.split(",") if o], max_batch=args.max_batch,
        strategy=not args.no_strategy, compile_for=args.compile_for, timeout=args.timeout,
        progress=None if args.quiet else (lambda line: print(line, file=sys.stderr,
                                                             flush=True)))
    print(_strict_json(result.to_dict()) if args.json else result.text())
    return 0


def _budget(text: str) -> float:
    """--budget-s: a positive, finite number of seconds."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return seconds


def _count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= 1_000_000:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return n


def _search_parser(sub) -> None:
    s = sub.add_parser("search", help="search the shardings of a built-in workload for the "
                       "fastest predicted step on a target (docs/search.md)",
                       epilog="exit status: 0 with a result, 2 on bad input, 3 when the "
                       "search evaluated no candidate (raise --budget-s)")
    s.add_argument("--workload", required=True, help=f"one of: {', '.join(WORKLOADS)}")
    _add_param(s)
    s.add_argument("--mesh", required=True,
                   help="axes and sizes, e.g. data=2,model=4; the search also tries the other "
                   "factorisations of the device count into these axes (unless --fixed-mesh)")
    s.add_argument("--target", required=True, metavar="NAME",
                   help="rank by the predicted step on this hardware, e.g. h100-8 (see "
                   "`targets`)")
    s.add_argument("--mapping", metavar="AXES",
                   help="place mesh axes on the target's links (keeps the mesh shape fixed)")
    s.add_argument("--space", choices=["rules", "specs", "pipeline"],
                   help="what to search: logical-axis rules (default for workloads with "
                   "logical names), per-tensor specs, or pipeline stages (default for "
                   "`pipeline`)")
    s.add_argument("--names", metavar="N1,N2",
                   help="rules: the logical names to map to mesh axes (default: all the "
                   "workload uses)")
    s.add_argument("--tensors", metavar="T1,T2",
                   help="specs: the tensors whose specs to search (default: all inputs)")
    s.add_argument("--fixed-mesh", action="store_true",
                   help="search only the mesh shape given, not its other factorisations")
    s.add_argument("--budget-s", type=_budget, default=None, metavar="N",
                   help="stop starting compiles after N seconds (default: none, the search "
                   "runs to its end)")
    s.add_argument("--patience", type=_count, default=None, metavar="N",
                   help="stop after N compiles in a row that do not improve the best (a "
                   "heuristic stop; default: none)")
    s.add_argument("--no-prune", action="store_true",
                   help="compile every candidate (exhaustive) instead of skipping those whose "
                   "bounds show they cannot win")
    s.add_argument("--top", type=_count, default=None, metavar="N",
                   help="candidates to show (default: 10 in text, all with --json)")
    s.add_argument("--verify", type=_count, default=3, metavar="N",
                   help="pipeline: compile the best N plans that fit (default 3)")
    s.add_argument("--max-microbatches", type=_count, default=None, metavar="N",
                   help="pipeline: the most microbatches to try (default 32)")
    s.add_argument("--ray-address", metavar="ADDR",
                   help="compile the candidates as Ray tasks on this cluster (HOST:PORT, "
                   "ray://HOST:PORT, auto or local; needs the cluster extra)")
    s.add_argument("--node-timeout", type=lambda text: _seconds(text, "node_timeout"),
                   default=None, metavar="SECONDS",
                   help="with --ray-address: seconds each node gets to answer the check "
                   "before the search (default 120)")
    s.add_argument("--partitioner", default="shardy", choices=["shardy", "gspmd"],
                   help="the partitioner every candidate is compiled with (default shardy)")
    s.add_argument("--compile-for", default="target", choices=["target", "cpu"],
                   help="target (the default): on a GPU or TPU --target with its compiler "
                   "installed, screen every candidate by its estimate (or on CPU devices where "
                   "the program cannot be traced) and confirm the best with that compiler; "
                   "cpu: every candidate on CPU devices, priced on the target, no confirmation")
    _add_run_flags(s, timeout_help="time limit of one compile, seconds (default "
                   f"{_DEFAULT_TIMEOUT})",
                   json_help="one JSON object on stdout: candidates (best first), pareto, "
                   "comparison, stats", quiet_help="no progress bar on stderr")


class _ProgressBar:
    """A progress bar on stderr: redrawn in place on a terminal, a line per tenth otherwise."""

    WIDTH = 24

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.shown_tenth = -1
        self.drawn = False

    def __call__(self, p) -> None:
        from explorer._src.units import format_seconds

        if p.phase == "enumerate":
            return
        frac = p.done / p.total if p.total else 1.0
        filled = int(frac * self.WIDTH)
        best = format_seconds(p.best_seconds) if p.best_seconds is not None else "-"
        line = (f"[{'#' * filled}{'.' * (self.WIDTH - filled)}] {p.done}/{p.total} "
                f"compiled {p.compiled} {f'estimated {p.estimated} ' if p.estimated else ''}"
                f"pruned {p.pruned} failed {p.failed} best {best} "
                f"{p.elapsed_s:.0f}s")
        if self.tty:
            self.stream.write("\r" + line[:150].ljust(150))
            self.drawn = True
            if p.phase == "done":
                self.stream.write("\n")
        elif int(frac * 10) > self.shown_tenth or p.phase == "done":
            self.shown_tenth = int(frac * 10)
            self.stream.write(line + "\n")
        self.stream.flush()


def _search(args) -> int:
    from explorer._src.layout_search.search import search

    get_workload(args.workload)
    result = search(args.workload, mesh=args.mesh, target=args.target, mapping=args.mapping,
                    params=_key_values(args.param, "--param"), space=args.space,
                    names=args.names, tensors=args.tensors, mesh_shapes=not args.fixed_mesh,
                    budget_s=args.budget_s, prune=not args.no_prune,
                    progress=None if args.quiet else _ProgressBar(),
                    cluster=args.ray_address, node_timeout=args.node_timeout,
                    timeout=args.timeout,
                    partitioner=args.partitioner, max_microbatches=args.max_microbatches,
                    verify=args.verify, patience=args.patience,
                    compile_for=args.compile_for)
    if args.json:
        print(_strict_json(result.to_dict(top=args.top)))
    else:
        print(result.text(top=args.top or 10))
    # Nothing evaluated is no answer: a script must not read it as "nothing fits".
    return 3 if result.nothing_evaluated else 0


def _workloads_text() -> str:
    lines = ["Numeric params take values in the interval shown ([1, 256]: 1 to 256; (0, 1000]: "
             "above 0, up to 1000). Every tensor a workload makes (inputs, constraint points, "
             f"large intermediates) has at most {power_text(MAX_ELEMENTS)} elements, its inputs "
             f"{power_text(MAX_TOTAL_ELEMENTS)} in all.", ""]
    for w in WORKLOADS.values():
        params = w.resolve()
        lines.append(f"{w.name}: {w.description}")
        lines.append("  params: " + ", ".join(w.param_text(k) for k in w.defaults))
        lines.append("  tensors: " + ", ".join(
            f"{n}[{','.join(map(str, s))}]" for n, s in w.shapes(params).items()))
        points = getattr(w, "points", None)
        if points is not None:
            lines.append("  points: " + ", ".join(
                f"{n}[{','.join(d or '_' for d in p.dims)}]" for n, p in points(params).items()))
    return "\n".join(lines)


def _presets_text() -> str:
    lines = []
    for p in PRESETS.values():
        axes = ", ".join(p.requires) + (f" (optional: {', '.join(p.optional)})"
                                        if p.optional else "")
        lines.append(f"{p.name}: {p.title}")
        lines.append(f"  mesh axes: {axes}")
        if p.workloads is not None:
            lines.append(f"  workloads: {', '.join(p.workloads)}")
        lines.append(f"  rules: {p.rules}")
        lines.append(f"  expects: {p.expects}")
        lines.append(f"  source: {p.source}")
    return "\n".join(lines)


def _layout_text(info: dict) -> list[str]:
    lines = []
    if info.get("preset"):
        lines.append(f"preset {info['preset']}")
    if info.get("rules"):
        lines.append(f"rules {info['rules']}")
    if info.get("specs"):
        lines.append("specs " + " ".join(f"{n}={s}" for n, s in info["specs"].items()))
    if info.get("activations"):
        lines.append("activations " + " ".join(
            f"{n}={s}" for n, s in info["activations"].items()))
    return lines + [""] if lines else []


def _why_layout_text(report, name: str) -> str:
    """`--why-layout NAME`: the tensor's layout and one line per dimension saying why."""
    t = report.tensor(name)
    lines = [f"{t.name}: {t.spec_text} {list(t.shape)} ({t.kind})"]
    lines += [f"  {line}" for line in t.origins.text.splitlines()]
    return "\n".join(lines)


# The flags that make up analyze's request, which an exploration file (--from) gives instead.
_REQUEST_FLAGS = ("workload", "param", "mesh", "spec", "preset", "rules", "activation",
                  "target", "mapping", "peak", "partitioner", "axis_type", "compile_for")


def _from_file(args):
    """The exploration saved in --from's file (no request flag beside it), checked whole by
    the Request it makes, which the analysis then runs: its layout is planned once."""
    from explorer._src.api.exploration import load

    given = [f for f in _REQUEST_FLAGS if getattr(args, f) not in (None, [], False)]
    if given:
        raise InputError(f"--{given[0].replace('_', '-')} and --from {args.from_file}: the "
                         "file gives the whole request; drop one of them")
    exploration = load(args.from_file)
    if exploration.workload is None:
        where = exploration.function.text() if exploration.function else "not importable"
        raise InputError(f"--from {args.from_file} is an exploration of a user's function "
                         f"({where}), which a file does not carry, nor its inputs; open it "
                         "in Python: explorer.load_exploration(FILE).analyze(fn, *inputs)")
    return exploration


def _analyze(args) -> int:
    from explorer._src.api.analysis_request import Request
    from explorer._src.api.analyze import run
    from explorer._src.api.exploration import Exploration
    from explorer._src.api.workload import analyze_workload
    from explorer._src.report.summary import summary

    if not args.from_file:
        if not (args.workload and args.mesh):
            raise InputError("analyze needs --workload and --mesh, or --from FILE")
        get_workload(args.workload)
    exploration = _from_file(args) if args.from_file else None
    target = exploration.target if exploration is not None else args.target
    _check_analyze_flags(args, target)
    how = dict(timeout=args.timeout, measure=args.measure, tpu_topology=args.tpu_topology,
               real_devices=args.real_devices,
               origins=bool(args.origins or args.why_layout),
               # A Request field: run honours it, and --save writes it down with the rest.
               extrapolate=False if args.extrapolate_layers is None
               else args.extrapolate_layers)
    flags = dict(specs=_key_values(args.spec, "--spec"),
                 params=_key_values(args.param, "--param"), preset=args.preset,
                 rules=args.rules, activations=_key_values(args.activation, "--activation"),
                 partitioner=args.partitioner or "shardy", axis_type=args.axis_type or "auto",
                 target=args.target, mapping=args.mapping, peak=args.peak,
                 compile_for=args.compile_for or "target", **how)
    if exploration is not None:
        # Only the run flags given: the request `load` checked (and planned) is the one run.
        report = run(exploration.request(**{k: v for k, v in how.items() if v}))
    elif args.save:
        # One Request: analysed, and written down as the exploration --save saves.
        request = Request(workload=args.workload, mesh=args.mesh, **flags)
        report = run(request)
        exploration = Exploration.of(request)
    else:
        report = analyze_workload(args.workload, args.mesh, **flags)
    _write_files(args, report, exploration, target)
    # A --what-if past the Report's collectives is refused before anything is printed.
    what_if = _what_if_index(report, args.what_if) if args.what_if is not None else None
    if args.json:
        if args.why_layout:
            report.tensor(args.why_layout)      # an unknown name is an error here too
        out = report.to_dict(texts=bool(args.hlo))
        if what_if is not None:
            out["what_if"] = _what_ifs(report, what_if, args, exploration).to_dict()
        print(_strict_json(out))
        return 0
    if report.extrapolated is not None:
        print(report.extrapolated.text() + "\n")
    if args.why_layout:
        print(_why_layout_text(report, args.why_layout))
    else:
        layout = report.workload.to_dict() if report.workload else {}
        print("\n".join(_layout_text(layout) + [summary(report)]))
        if args.hlo:
            text = {"optimized": report.optimized_hlo, "propagated": report.propagated_hlo,
                    "stablehlo": report.stablehlo}[args.hlo]
            print(f"\n{args.hlo} HLO\n{text}")
    if what_if is not None:
        sys.stdout.flush()          # the summary shows while the changes compile
        print("\n" + _what_if_text(_what_ifs(report, what_if, args, exploration)))
    return 0


def _check_analyze_flags(args, target: str | None) -> None:
    """The flags of analyze that cannot be honoured, refused before the compile (which can
    take minutes) rather than after it."""
    if args.trace and not target:
        raise InputError(f"--trace {args.trace} needs --target: the timeline is predicted "
                         "for a target, e.g. --target h100-8 (see `targets`)")
    for flag, path, example in (("--trace", args.trace, "trace.json"),
                                ("--emit-code", args.emit_code, "layout.py"),
                                ("--save", args.save, "exploration.json")):
        if path:
            _check_output_path(flag, path, example)
    if args.xprof:
        _check_output_folder("--xprof", args.xprof)
    if args.what_if is not None and (args.tpu_topology or args.real_devices):
        raise InputError("--what-if compiles each change on the mesh's CPU devices or for "
                         "the --target, so its numbers would not compare with a "
                         f"{'--tpu-topology' if args.tpu_topology else '--real-devices'} "
                         "compile; drop one of them")


def _write_files(args, report, exploration, target: str | None) -> None:
    """What analyze writes beside its output: --trace, --emit-code, --xprof and --save."""
    if args.trace:
        from explorer._src.report.op_comparison import chrome_trace

        if report.trace is None:
            raise ExplorerError(f"no trace for --target {target}: "
                                + "; ".join(report.estimate.compute.notes or
                                            ("its compiled program has no schedule",)))
        _write_output("--trace", args.trace, json.dumps(chrome_trace(report)), "trace")
    if args.emit_code:
        _write_output("--emit-code", args.emit_code, report.to_code(), "code")
    if args.xprof:
        from explorer._src.report.xprof import write_xprof

        written = write_xprof(report, args.xprof)
        for note in written.notes:
            print(f"--xprof: {note}", file=sys.stderr)
        print(f"XProf run {written.run} written to {written.folder}; open it with "
              f"{written.command}", file=sys.stderr)
    if args.save:
        _write_output("--save", args.save, exploration.to_json(), "exploration")


def _what_ifs(report, index: int, args, exploration):
    """explorer.what_if's search for collective `index`, each change compiled as the report
    was (its mesh, partitioner, target and --compile-for)."""
    from explorer._src.api.what_if import what_if_search

    compile_for = args.compile_for or (exploration.compile_for if exploration else "target")
    return what_if_search(report, index, compile_for=compile_for, timeout=args.timeout)


def main(argv: list[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()        # here, not at exit, so that a closed pipe is caught below
        return code
    except BrokenPipeError:
        # The reader stopped reading (`sharding-explorer targets | head -1`). As Python's
        # signal docs advise (note on SIGPIPE): stdout to /dev/null, so that the flush at exit
        # does not raise again, and exit 1 without a traceback.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


def _main(argv: list[str] | None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command in (None, "app"):
            from explorer._src.ui.serve import serve

            return serve(getattr(args, "port", None), getattr(args, "ip", "127.0.0.1"),
                         token=True if getattr(args, "token", False) else None)
        if args.command == "targets":
            from explorer._src.cost.catalog.names import targets

            print("\n".join(t.describe() for t in targets().values()))
            return 0
        if args.command == "workloads":
            print(_workloads_text())
            return 0
        if args.command == "presets":
            print(_presets_text())
            return 0
        if args.command == "search":
            return _search(args)
        if args.command == "capacity":
            return _capacity(args)
        return _analyze(args)
    except ExplorerError as e:
        print(f"sharding-explorer: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
