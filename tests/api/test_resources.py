"""Memory stays bounded over many successive edits: the caller's process (its report cache is
an LRU of CACHE_SIZE) and the compile worker (jax's caches are cleared after every 8th compile)
level off instead of growing with every edit. The figures are printed for docs/reliability.md;
the assertions are on growth, not on time."""

import pytest

import explorer
from explorer._src.api.analyze import CACHE_SIZE
from explorer._src.compile.pool import RECYCLE_AFTER, WorkerPool
from explorer._src.compile.protocol import WorkerKey

psutil = pytest.importorskip("psutil")

pytestmark = pytest.mark.slow

# 500 edits, as the issue asks, but the worker is recycled after RECYCLE_AFTER compiles: the
# growth is measured on one worker, up to just before its recycling.
EDITS = 500
MEASURED = min(EDITS, RECYCLE_AFTER - 10)
MEGATRON = {"x": "data,None", "w1": "None,model", "w2": "model,None"}


def _rss_mb(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 2**20


def test_rss_of_caller_and_worker_over_500_edits():
    pool = WorkerPool()
    try:
        worker = pool.warm(WorkerKey.fake_cpu(8)).pid
        samples = {}
        for i in range(EDITS):
            # Each edit is a new program (another batch size), so each is a real compile and a
            # new cache entry, as typing sizes into the app does.
            report = explorer.analyze_workload("mlp", "data=2,model=4", specs=MEGATRON,
                                               params={"batch": 8 * (i + 1), "d_model": 64,
                                                       "d_ff": 256}, pool=pool)
            assert report.collectives[0].kind == "all-reduce"
            if i + 1 in (CACHE_SIZE, 2 * CACHE_SIZE, MEASURED):
                samples[i + 1] = (_rss_mb(psutil.Process().pid), _rss_mb(worker))
        print(f"\nRSS after N edits (caller MB, worker MB): {samples}")
        (c1, w1), (c3, w3) = samples[CACHE_SIZE], samples[MEASURED]
        # Past the cache's size the caller holds no more reports; the worker holds no programs.
        assert c3 - c1 < 64, samples
        assert w3 - w1 < 64, samples
        samples["caller after all edits"] = _rss_mb(psutil.Process().pid)
        print(f"caller RSS after {EDITS} edits: {samples['caller after all edits']:.0f} MB")
        assert samples["caller after all edits"] - c1 < 64, samples
    finally:
        pool.close()
