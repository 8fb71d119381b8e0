"""A built-in workload's program is traced where it is asked for, under the caller's contexts,
as a user's function is (explorer/_src/compile/lowering.py): a `with` block around
`analyze_workload`, a Session's edit or a search reaches the compiled program.

The ground truth is jax's own lowering: `jax.default_matmul_precision("highest")` writes
`precision = [HIGHEST, HIGHEST]` on every dot of the StableHLO it lowers in that block, and
nothing outside it. Before workloads were lowered in the caller, they were traced again in the
compile worker, where the block is not, and their dots compiled at the default precision.
"""

from __future__ import annotations

import threading

import jax
import pytest

import explorer
from explorer._src.layout_search import evaluate

MESH = "data=2,model=4"
HIGHEST = "precision = [HIGHEST, HIGHEST]"


def test_the_callers_matmul_precision_reaches_a_workloads_program():
    with jax.default_matmul_precision("highest"):
        highest = explorer.analyze_workload("mlp", MESH, preset="megatron")
    plain = explorer.analyze_workload("mlp", MESH, preset="megatron")
    # The MLP has two matmuls: both at the caller's precision, none without the block.
    assert highest.stablehlo.count(HIGHEST) == 2
    assert "HIGHEST" not in plain.stablehlo


def test_the_same_workload_request_is_not_traced_again():
    from explorer._src.compile import lowering

    explorer.clear_cache()        # forgets the lowered programs kept, as at a fresh start
    first = explorer.Request(workload="mlp", mesh=MESH, params={"batch": 96})
    again = explorer.Request(workload="mlp", mesh=MESH, params={"batch": 96})
    # The second was answered by the memo of lowered programs: no time spent lowering.
    assert first.planned.lowered.lower_s > 0 and again.planned.lowered.lower_s == 0.0
    assert again.planned.key == first.planned.key
    other = explorer.Request(workload="mlp", mesh=MESH, params={"batch": 128})
    assert other.planned.lowered.lower_s > 0 and other.planned.key != first.planned.key
    assert len(lowering._LOWERED) <= lowering.LOWERED_MEMO_SIZE


def test_a_workload_edit_on_another_thread_keeps_the_contexts_of_the_first():
    with jax.default_matmul_precision("highest"):
        session = explorer.Session(workload="mlp", mesh=MESH, preset="megatron")
    results = []
    # After the block closed, on a thread of its own, as an app's edit is traced.
    edit = threading.Thread(target=lambda: results.append(
        session.edit(params={"batch": 64}) and session.analyze()))
    edit.start()
    edit.join()
    [result] = results
    assert result.report.stablehlo.count(HIGHEST) == 2


@pytest.mark.slow
def test_every_candidate_of_a_workload_search_keeps_the_callers_contexts(monkeypatch):
    traced = []
    real = evaluate.analyze

    def recording(request, **kwargs):
        traced.append(request.planned.lowered.stablehlo)
        return real(request, **kwargs)

    monkeypatch.setattr(evaluate, "analyze", recording)
    with jax.default_matmul_precision("highest"):
        result = explorer.search("mlp", mesh="data=2,model=2", target="h100-4",
                                 compile_for="cpu", prune=False, mesh_shapes=False)
    assert result.stats.compiled >= 2 and len(traced) >= result.stats.compiled
    assert all(text.count(HIGHEST) == 2 for text in traced)


# A process that has not imported jax: a workload's request is keyed by its identity and traced
# only when a compile needs it, or when it is pickled for a Ray task.
_FRESH = """
import json, os, pickle, sys
import cloudpickle       # as Ray pickles a task's arguments
import explorer
r = explorer.Request(workload="mlp", mesh="data=2,model=4", preset="megatron")
before = "jax" in sys.modules
sent = pickle.loads(cloudpickle.dumps(r))
print(json.dumps({"jax_before": before, "traced": "lowered" in r.planned.__dict__,
                  "highest": sent.planned.lowered.stablehlo.count("precision = [HIGHEST, HIGHEST]"),
                  "key": r.planned.key, "sent_key": sent.planned.key}))
"""


def _fresh(env_extra: dict) -> dict:
    import json
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    out = subprocess.run([sys.executable, "-c", _FRESH], env={**env, **env_extra},
                         capture_output=True, text=True, timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_workload_request_made_before_jax_is_keyed_without_a_trace():
    plain = _fresh({})
    assert plain["jax_before"] is False             # made without importing jax
    assert plain["traced"] is True                  # pickling it traced it, for the Ray task
    assert plain["highest"] == 0 and plain["key"] == plain["sent_key"]
    # jax's defaults, set by a JAX_ variable, are part of the identity: another program.
    highest = _fresh({"JAX_DEFAULT_MATMUL_PRECISION": "highest"})
    assert highest["highest"] == 2
    assert highest["key"] != plain["key"]
