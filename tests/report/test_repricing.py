"""A Report priced again (another target, or loaded from the disk cache) reuses the schedule
read from its optimized module instead of parsing the module each time."""

import explorer._src.hlo.schedule as schedule
from explorer import analyze_workload
from explorer._src.lru import Lru
from explorer._src.report.predict import with_target

MEGATRON = {"x": "data,None", "w1": "None,model", "w2": "model,None"}


def test_pricing_a_report_for_three_targets_parses_its_module_once(monkeypatch):
    report = analyze_workload("mlp", "data=2,model=4", specs=MEGATRON)
    # As if the Report came from disk: no schedule kept for its text yet.
    monkeypatch.setattr(schedule, "_schedules", Lru(schedule.SCHEDULES_KEPT))
    parses = []
    parse = schedule.parse_module
    monkeypatch.setattr(schedule, "parse_module", lambda text: parses.append(1) or parse(text))
    priced = [with_target(report, t) for t in ("h100-8", "a100-8", "h100-8")]
    assert len(parses) == 1
    assert [p.estimate.target for p in priced] == ["h100-8", "a100-8", "h100-8"]
    # The same schedule gives the same trace each time it is priced for the same target.
    assert priced[0].trace == priced[2].trace and priced[0].trace is not None
