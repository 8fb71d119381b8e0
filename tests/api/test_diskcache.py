"""The persistent report cache: a Report compiled in one process is answered in another without
a compile worker; a corrupt, foreign or forged entry is a miss and never runs anything; the
folder stays within its size; concurrent processes share it.

Expected values are hand-computed from the shapes (Megatron's MLP: one all-reduce over model of
the layer output, batch/|data| × d_model × 4 bytes), never read back from the code under test.
"""

import json
import os
import pickle
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import pytest

import explorer
from explorer import TensorSpec
from explorer._src.api import diskcache
from explorer._src.api.diskcache import DiskCache
from explorer._src.compile.gpu import gpu_plugin_installed

ROOT = Path(__file__).resolve().parents[2]
MLP = dict(specs={"x": "data,None", "w1": "None,model", "w2": "model,None"})
# The all-reduce of h @ w2 over model: (256 / 2) × 1024 floats of 4 bytes.
MLP_ALL_REDUCE = ("all-reduce", ["model"], 128 * 1024 * 4)


def scale_rows(x, w):
    """A user function, defined here (traced in this process)."""
    return (x @ w).sum(axis=1)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """The API's disk cache, on, in a fresh folder; the in-memory cache emptied around it."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("EXPLORER_DISK_CACHE", "1")
    monkeypatch.setenv("EXPLORER_CACHE_DIR", str(folder))
    explorer.clear_cache()
    yield folder
    explorer.clear_cache()
    diskcache._default.pop(folder, None)


def user_report(**kwargs):
    return explorer.analyze(scale_rows, TensorSpec("x", (64, 32), spec="data,None"),
                            TensorSpec("w", (32, 16), spec="None,model"),
                            mesh="data=2,model=2", **kwargs)


@pytest.fixture(scope="module")
def report():
    """One real Report to store (compiled without any cache)."""
    return explorer.analyze(scale_rows, TensorSpec("x", (64, 32), spec="data,None"),
                            TensorSpec("w", (32, 16), spec="None,model"),
                            mesh="data=2,model=2", use_cache=False)


def entries(folder: Path) -> list[Path]:
    return sorted((folder / "reports").glob("*.report"))


CHILD = textwrap.dedent("""
    import json, sys
    if len(sys.argv) > 2:
        import jax          # as a notebook that used jax before asking does
    import explorer
    from explorer._src.compile.pool import default_pool
    r = explorer.analyze_workload("mlp", "data=2,model=4", **json.loads(sys.argv[1]))
    print(json.dumps({
        "cached": r.timing.cached,
        "jax_imported": "jax" in sys.modules,
        "workers": len(default_pool()._workers),
        "collectives": [(c.kind.value, list(c.axes), c.bytes) for c in r.collectives],
        "source_text": r.collectives[0].source_text,
        "has_hlo": "all-reduce" in r.optimized_hlo,
    }))
""")


def run_child(folder: Path, jax_first: bool = False) -> dict:
    env = {**os.environ, "EXPLORER_DISK_CACHE": "1", "EXPLORER_CACHE_DIR": str(folder),
           "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-c", CHILD, json.dumps(MLP)] + (["jax"] if jax_first else [])
    out = subprocess.run(argv, env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_report_outlives_its_process(cache_dir):
    first = run_child(cache_dir)          # compiles, stores
    assert first["cached"] is False and first["workers"] == 1
    assert first["collectives"] == [list(MLP_ALL_REDUCE)]
    # Stored under the workload's identity and under its lowered program's text.
    assert len(entries(cache_dir)) == 2
    second = run_child(cache_dir)         # a new process: answered from disk
    assert second["cached"] is True
    # No worker started and jax never imported: the answer came from the file, found by the
    # workload's identity (no context of the user's can be in force before jax is imported).
    assert second["workers"] == 0 and second["jax_imported"] is False
    assert second["collectives"] == [list(MLP_ALL_REDUCE)]
    assert second["source_text"] == "return h @ w2" and second["has_hlo"]
    # A process that imported jax first traces the workload (its contexts and config may
    # change the program) and finds the entry by the lowered text.
    third = run_child(cache_dir, jax_first=True)
    assert third["cached"] is True and third["workers"] == 0
    assert third["collectives"] == [list(MLP_ALL_REDUCE)]
    assert len(entries(cache_dir)) == 2


@pytest.mark.slow
def test_user_function_round_trip_in_process(cache_dir):
    compiled = user_report()
    assert not compiled.timing.cached
    explorer.clear_cache()                # memory only: the disk answers now
    again = user_report()
    assert again.timing.cached
    # x @ w contracts the unsplit dim: no collective; the row sum is over the model-split
    # columns: partial sums of a (32, ) row block per data shard, all-reduced over model.
    assert [(c.kind, c.axes, c.bytes) for c in again.collectives] == \
        [("all-reduce", ("model",), 64 // 2 * 4)]
    assert again.collectives == compiled.collectives
    assert again.tensors == compiled.tensors
    assert again.optimized_hlo == compiled.optimized_hlo
    # A target's prediction is made afresh from the stored CPU compile...
    predicted = user_report(target="h100-4", compile_for="cpu")
    assert predicted.timing.cached and predicted.estimate.target == "h100-4"
    # ... while compiling for the target is a compile of its own, stored beside it.
    if gpu_plugin_installed():
        for_gpu = user_report(target="h100-4")
        assert not for_gpu.timing.cached and for_gpu.backend == "gpu"
        explorer.clear_cache()
        assert user_report(target="h100-4").timing.cached


@pytest.mark.slow
def test_use_cache_false_and_measured_runs_leave_the_disk_alone(cache_dir):
    user_report(use_cache=False)
    assert entries(cache_dir) == []
    user_report(measure=True)             # timed on this CPU now: not for another day
    assert entries(cache_dir) == []
    user_report()
    assert len(entries(cache_dir)) == 1


@pytest.mark.parametrize("damage", ["truncate", "flip payload", "flip mac", "empty", "garbage",
                                    "old format"])
def test_a_corrupt_entry_is_a_miss(tmp_path, report, damage):
    cache = DiskCache(tmp_path)
    assert cache.put("k", report)
    path = entries(tmp_path)[0]
    blob = bytearray(path.read_bytes())
    if damage == "truncate":
        blob = blob[:len(blob) // 2]
    elif damage == "flip payload":
        blob[-10] ^= 0xFF
    elif damage == "flip mac":
        blob[10] ^= 0x01
    elif damage == "empty":
        blob = bytearray()
    elif damage == "garbage":
        blob = bytearray(os.urandom(4096))
    else:
        blob[:6] = b"SXRC0\n"
    path.write_bytes(bytes(blob))
    assert cache.get("k") is None
    # The next store replaces it, and reads back.
    assert cache.put("k", report) and cache.get("k") == report


class _Touch:
    """A pickle that, if it were ever loaded by plain pickle, would create a file."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_a_forged_entry_is_never_loaded(tmp_path):
    cache = DiskCache(tmp_path)
    marker = tmp_path / "pwned"
    payload = zlib.compress(pickle.dumps(_Touch(marker)))
    # Even signed with the cache's own key, an entry may name only explorer dataclasses.
    signed = diskcache._FORMAT + cache._mac(payload) + payload
    cache.path("k").write_bytes(signed)
    assert cache.get("k") is None and not marker.exists()
    # Signed with another key: refused before it is unpickled.
    other = DiskCache(tmp_path / "other")
    cache.path("k").write_bytes(diskcache._FORMAT + other._mac(payload) + payload)
    assert cache.get("k") is None and not marker.exists()
    # An explorer class that is not a dataclass or an enum is refused too.
    with pytest.raises(pickle.UnpicklingError):
        diskcache._loads(pickle.dumps(DiskCache))


def test_a_folder_others_may_write_to_is_not_used(tmp_path, monkeypatch):
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o777)
    with pytest.raises(PermissionError, match="every user may write to .*chmod o-w"):
        DiskCache(folder)
    monkeypatch.setenv("EXPLORER_DISK_CACHE", "1")
    monkeypatch.setenv("EXPLORER_CACHE_DIR", str(folder))
    with pytest.warns(RuntimeWarning, match="report cache .* is off"):
        assert diskcache.default_cache() is None
    diskcache._default.pop(folder, None)
    monkeypatch.setenv("EXPLORER_DISK_CACHE", "off")
    assert diskcache.default_cache() is None


def test_the_folder_stays_within_its_size(tmp_path, report):
    one = len(zlib.compress(pickle.dumps(report), 1)) + 64
    cache = DiskCache(tmp_path, max_bytes=5 * one)
    for i in range(4):
        assert cache.put(f"r{i}", report)
    # Entry times are the files' mtimes; set them apart so that the order is unambiguous.
    for i, path in enumerate(cache.path(f"r{i}") for i in range(4)):
        os.utime(path, (1000 + i, 1000 + i))
    assert cache.get("r0") == report       # a hit makes r0 the most recently used
    assert cache.path("r0").stat().st_mtime > 1003
    assert cache.put("r4", report)         # 5 entries: within the bound
    assert len(entries(tmp_path)) == 5
    assert cache.put("r5", report)         # 6: trimmed to 80% of the bound, oldest first
    assert cache.size() <= 4 * one
    assert [cache.get(f"r{i}") is not None for i in range(6)] == \
        [True, False, False, True, True, True]


def test_the_key_depends_on_the_environment(tmp_path, monkeypatch):
    cache = DiskCache(tmp_path)
    before = cache.path("k")
    flags = os.environ.get("XLA_FLAGS", "") + " --xla_cpu_enable_fast_math=true"
    monkeypatch.setenv("XLA_FLAGS", flags)
    diskcache.environment.cache_clear()
    try:
        assert cache.path("k") != before
    finally:
        monkeypatch.undo()
        diskcache.environment.cache_clear()
    assert cache.path("k") == before
    # The device-count flag is the request's business (the mesh), not the environment's.
    assert not any("device_count" in part for part in diskcache.environment())


HAMMER = textwrap.dedent("""
    import pickle, sys
    from dataclasses import replace
    from explorer._src.api.diskcache import DiskCache
    folder, report_file, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(report_file, "rb") as f:
        report = pickle.load(f)
    cache = DiskCache(folder, max_bytes=6 * 10**6)
    bad = 0
    for i in range(60):
        key = f"k{(i * 7 + seed) % 5}"
        if i % 2:
            cache.put(key, replace(report, partitioner=key))
        else:
            hit = cache.get(key)
            bad += hit is not None and hit.partitioner != key
    print(bad)
""")


@pytest.mark.slow
def test_concurrent_processes_share_the_folder(tmp_path, report):
    """Four processes write and read the same five entries at once."""
    report_file = tmp_path / "report.pickle"
    report_file.write_bytes(pickle.dumps(report))
    folder = tmp_path / "shared"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", HAMMER, str(folder), str(report_file),
                               str(seed)], env=env, stdout=subprocess.PIPE, text=True)
             for seed in range(4)]
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * 4
    # Every hit was a whole entry for its own key; no temporary file is left behind.
    assert [o.strip() for o in outputs] == ["0"] * 4
    assert [p.name for p in (folder / "reports").iterdir() if p.name.startswith(".tmp")] == []
    cache = DiskCache(folder)
    for k in range(5):
        hit = cache.get(f"k{k}")
        assert hit is None or hit.partitioner == f"k{k}"
