"""libtpu's AllocateBuffer custom calls are free on the step's timeline, as on the chip.

They reserve a buffer that later instructions write; on one TPU v5e chip each of the 26 in
llama_train_scan took about 2 ns (benchmarks/results/tpu-v5e-2026-12-06/programs.json), while
their results are up to 4 GiB, which at HBM speed would be milliseconds each.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

from explorer._src.hlo.schedule import StepKind, read_schedule

RUN = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "tpu-v5e-2026-12-06"


def _steps(steps):
    for s in steps:
        yield s
        yield from _steps(s.body)


def test_allocate_buffers_are_free_steps_and_took_nanoseconds_on_the_chip():
    with gzip.open(RUN / "hlo" / "llama_train_scan.hlo.txt.gz", "rt") as f:
        text = f.read()
    allocations = set(re.findall(
        r'%([\w.\-]+) = [^ ]+ custom-call\(\), custom_call_target="AllocateBuffer"', text))
    measured = {p["name"]: p for p in json.loads((RUN / "programs.json").read_text())[
        "programs"]}["llama_train_scan"]["op_ns_per_call"]
    assert len(allocations) == 26
    assert all(measured[name][0] < 5 for name in allocations)       # ns per call on the chip
    kinds = {s.instr.name: s.kind for s in _steps(read_schedule(text).steps)
             if s.instr.name in allocations}
    assert set(kinds) == allocations and set(kinds.values()) == {StepKind.FREE}
