"""The catalog's other targets: Graphcore's Bow-2000 (4 IPUs joined by IPU-Links) and the CPU
host the explorer compiles on (no sourced speeds)."""

from __future__ import annotations

from explorer._src.cost.catalog.sources import BOW_2000, GB, gbit_per_s
from explorer._src.cost.catalog.types import (
    Chip,
    Link,
    LinkKind,
    PhysicalAxis,
    Target,
    TargetFamily,
)

# ---------------------------------------------------------------------------------------------
# Graphcore Bow-2000: 4 Bow IPUs in a 1U machine.

BOW_IPU = Chip(
    "Bow IPU",
    {
        "float16": 1.4e15 / 4,   # FLOP/s; "4x Bow IPUs, 1.4 petaFLOPS FP16.16 AI compute" BOW_2000
    },
    memory_bytes=3.6 * GB / 4,   # bytes; "3.6GB In-Processor-Memory" for 4 IPUs, BOW_2000
    # No public figure for In-Processor-Memory bandwidth was found: no memory roofline.
    memory_bandwidth=None,
    memory_kind="In-Processor-Memory",
    source=BOW_2000,
)
# bytes/s; "IPU-Link - 512Gbps for communication within Bow Pods" BOW_2000. The datasheet does
# not say per IPU or per direction, nor the wiring; we take it as each IPU's one-way egress
# into an any-to-any fabric. No public latency figure: no latency floor.
IPU_LINK = Link(LinkKind.IPU_LINK, gbit_per_s(512), None, switched=True, across=False,
                source=BOW_2000)


def _bow_target() -> Target:
    return Target("bow-2000", TargetFamily.IPU, BOW_IPU, (PhysicalAxis("ipu", 4, IPU_LINK),),
                  "4 IPUs joined by IPU-Links",
                  notes=("IPU-Link bandwidth per IPU and wiring are our reading of the "
                         "datasheet's single 512 Gbps figure",))


CPU_HOST = Chip("CPU host", {}, None, None, source="")


def _cpu_target() -> Target:
    return Target("cpu", TargetFamily.CPU, CPU_HOST, (), "fake devices sharing one host")
