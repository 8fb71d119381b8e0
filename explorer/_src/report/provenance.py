"""Which compiler wrote a Report's program, in words a newcomer reads, and whether its numbers
are the target's own or an approximation."""

from __future__ import annotations

from explorer._src.compile.tpu import tpu_backend_slices
from explorer._src.cost.catalog.names import get_target
from explorer._src.report.report import Report


def compiled_by(report: Report) -> str:
    """"compiled for 64 × NVIDIA H100 80GB HBM3 by XLA's GPU compiler (no GPU needed)", or
    "compiled for 8 CPU devices", without the target it is priced on."""
    n = report.mesh.device_count
    kind = report.device_kind or report.backend
    if report.ahead_of_time and report.backend == "gpu":
        return f"compiled for {n} × {kind} by XLA's GPU compiler (no GPU needed)"
    slices = tpu_backend_slices(report.backend) if report.ahead_of_time else None
    if slices is not None and slices[1] > 1:
        return (f"compiled for {slices[1]} {slices[0]} slices joined by the data-center network "
                f"({n} × {kind}) by the TPU compiler, libtpu (no TPU needed)")
    if report.ahead_of_time:
        topology = report.backend.removeprefix("tpu").strip()
        return (f"compiled for a {topology} slice ({n} × {kind}) by the TPU compiler, "
                "libtpu (no TPU needed)")
    if report.backend == "cpu":
        return f"compiled for {n} CPU device{'s' if n != 1 else ''}"
    return f"compiled for this machine's {n} {kind} device{'s' if n != 1 else ''}"


def compiled_with(report: Report) -> str:
    """"jax 0.10.2, compiler libtpu 0.0.42.1": the jax that lowered the program and the
    compiler's package that wrote it, with their versions; "" for a Report saved before they
    were recorded."""
    return ", ".join(p for p in (f"jax {report.jax_version}" if report.jax_version else "",
                                 f"compiler {report.compiler}" if report.compiler else "") if p)


def provenance(report: Report) -> str:
    """One sentence for the app's status and the CLI: what compiled the program and, when it
    is priced on hardware its compiler did not write it for, that the numbers are approximate
    and why (`compiled_with` says with which versions)."""
    text = compiled_by(report)
    if not report.approximation or report.estimate is None:
        return text
    target = get_target(report.estimate.target)
    return (f"{text}, priced on {target.chips} × {target.chip.name}: approximate, not the "
            f"program the {target.family.upper()} compiler writes ({report.approximation})")
