"""The `sharding-explorer` command line. Bad input exits with status 2 and one message."""

from __future__ import annotations

import argparse
import json
import sys

from ._errors import ExplorerError
from ._workloads import WORKLOADS, get_workload


def _key_values(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ExplorerError(f"{what} {item!r} is not written as NAME=VALUE")
        out[key.strip()] = value.strip()
    return out


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sharding-explorer", description=(
        "See which collectives GSPMD/Shardy inserts for a sharded JAX program, over which mesh "
        "axes, at what size, and why."))
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("analyze", help="compile a built-in workload on a mesh and report")
    a.add_argument("--workload", required=True, help=f"one of: {', '.join(WORKLOADS)}")
    a.add_argument("--param", action="append", default=[], metavar="K=V",
                   help="a workload size param, e.g. batch=512 (see `workloads`)")
    a.add_argument("--mesh", required=True, help="axes and sizes, e.g. data=2,model=4")
    a.add_argument("--spec", action="append", default=[], metavar="TENSOR=ENTRIES",
                   help="e.g. w1=None,model or \"x=P('data', None)\"; others are replicated")
    a.add_argument("--partitioner", default="shardy", choices=["shardy", "gspmd"])
    a.add_argument("--axis-type", default="auto", choices=["auto", "explicit"])
    a.add_argument("--timeout", type=float, default=None, help="compile time limit, seconds")
    a.add_argument("--json", action="store_true", help="one JSON object on stdout")
    a.add_argument("--hlo", choices=["optimized", "propagated", "stablehlo"],
                   help="also print this program text")
    sub.add_parser("workloads", help="list the built-in workloads, their tensors and params")
    return p


def _workloads_text() -> str:
    lines = []
    for w in WORKLOADS.values():
        params = w.resolve()
        lines.append(f"{w.name}: {w.description}")
        lines.append("  params: " + " ".join(f"{k}={v}" for k, v in w.defaults.items()))
        lines.append("  tensors: " + ", ".join(
            f"{n}[{','.join(map(str, s))}]" for n, s in w.shapes(params).items()))
    return "\n".join(lines)


def _analyze(args) -> int:
    from ._summary import summary
    from ._workloads import analyze_workload

    get_workload(args.workload)
    report = analyze_workload(args.workload, args.mesh, specs=_key_values(args.spec, "--spec"),
                              params=_key_values(args.param, "--param"),
                              partitioner=args.partitioner, axis_type=args.axis_type,
                              timeout=args.timeout)
    if args.json:
        print(json.dumps(report.to_dict(texts=bool(args.hlo))))
    else:
        print(summary(report))
        if args.hlo:
            text = {"optimized": report.optimized_hlo, "propagated": report.propagated_hlo,
                    "stablehlo": report.stablehlo}[args.hlo]
            print(f"\n{args.hlo} HLO\n{text}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "workloads":
            print(_workloads_text())
            return 0
        return _analyze(args)
    except ExplorerError as e:
        print(f"sharding-explorer: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
