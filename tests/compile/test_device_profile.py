"""Device times read from profiles of runs on a TPU v5e chip (benchmarks/tpu_measure.py kept
them in benchmarks/results/tpu-v5e-2026-12-06/profiles.tar.gz); the expected figures are what
that run recorded per program in programs.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from explorer._src.compile.device_profile import instruction_name, read_device_profile

RUN = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "tpu-v5e-2026-12-06"
PROGRAMS = {p["name"]: p for p in json.loads((RUN / "programs.json").read_text())["programs"]}
CALLS = 5     # tpu_measure.py's PROFILED_CALLS


@pytest.fixture(scope="module")
def profiles(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("profiles")
    with tarfile.open(RUN / "profiles.tar.gz") as tar:
        tar.extractall(folder, filter="data")
    return folder / "profiles"


def test_instruction_names_as_the_profile_writes_them():
    assert instruction_name("%fusion.11 = f32[2,8]{1,0} fusion(%a), kind=kLoop") == "fusion.11"
    assert instruction_name("fusion.11") == "fusion.11"
    assert instruction_name("%copy-start.77 = (s32[4]) copy-start(%x)") == "copy-start.77"


@pytest.mark.parametrize("name", ["causal_attention_float32_softmax", "pallas_flash_attention",
                                  "layernorm_chain"])
def test_a_chip_profile_gives_the_programs_and_each_instructions_time(profiles, name):
    profile = read_device_profile(str(profiles / name / "run.xplane.pb"), CALLS)
    recorded = PROGRAMS[name]
    assert profile.device == "/device:TPU:0" and profile.calls == CALLS
    assert profile.module_seconds == pytest.approx(recorded["module_ns"] * 1e-9)
    for op, (ns, runs) in recorded["op_ns_per_call"].items():
        assert profile.op_seconds[op] == pytest.approx(ns * 1e-9)
        assert profile.op_runs[op] == pytest.approx(runs)


def test_the_softmax_the_compiler_could_not_cost_is_most_of_the_run(profiles):
    profile = read_device_profile(
        str(profiles / "causal_attention_float32_softmax" / "run.xplane.pb"), CALLS)
    assert max(profile.op_seconds, key=profile.op_seconds.get) == "fusion.11"
    assert profile.op_seconds["fusion.11"] / profile.module_seconds > 0.95


@pytest.mark.parametrize("name", ["layernorm_chain", "causal_attention_float32_softmax"])
def test_one_call_is_laid_out_in_time_as_the_chip_ran_it(profiles, name):
    profile = read_device_profile(str(profiles / name / "run.xplane.pb"), CALLS)
    recorded = PROGRAMS[name]
    counts = {line.split(" | ")[1]: int(line.split(" | ")[2]) for line in recorded["lines"]}
    ops = [e for e in profile.call_events if not e.in_flight]
    in_flight = [e for e in profile.call_events if e.in_flight]
    # One call's share of each line the chip wrote (every call runs the same instructions).
    assert len(ops) == counts["XLA Ops"] // CALLS
    assert len(in_flight) == counts["Async XLA Ops"] // CALLS
    # Inside the median call, in time order, from its start.
    assert all(0 <= e.start and e.start + e.duration <= profile.module_seconds * 1.0001
               for e in profile.call_events)
    assert [e.start for e in profile.call_events] == sorted(e.start for e in profile.call_events)
    # Each instruction's time in this call is its time per call the chip recorded (the mean of
    # the calls, which differ by well under 2%); an asynchronous one's flight likewise.
    for op, (ns, _) in recorded["op_ns_per_call"].items():
        assert sum(e.duration for e in ops if e.instruction == op) == pytest.approx(
            ns * 1e-9, rel=0.02, abs=2e-8)
    for op, (ns, _) in recorded["async_ops"].items():
        assert sum(e.duration for e in in_flight if e.instruction == op) == pytest.approx(
            ns * 1e-9, rel=0.02)


@pytest.mark.slow
def test_a_cpu_run_has_no_device_plane_to_read():
    # In a process of its own: the profiler is one per process.
    code = ("import jax, jax.numpy as jnp\n"
            "from explorer._src.compile.device_profile import profile_calls\n"
            "f = jax.jit(lambda x: (x @ x).sum()); x = jnp.ones((64, 64))\n"
            "f(x).block_until_ready()\n"
            "print(profile_calls(lambda: f(x), 2))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "None"


@pytest.mark.slow
def test_a_trace_for_the_tpu_worker_leaves_the_chip_to_it():
    """libtpu lets one process hold a TPU chip (a second failed on a v5e VM with "Internal
    error when accessing libtpu multi-process lockfile"), and lowering asks jax for a default
    device, which starts every platform. In a process whose jax has not started, the caller
    is set to the CPU first and says so; for other platforms nothing changes."""
    code = ("import jax\n"
            "from explorer._src.compile.lowering import leave_the_chip_to_the_worker as leave\n"
            "assert leave('cuda') == '' and leave('cpu') == ''\n"
            "note = leave('tpu')\n"
            "print(jax.config.jax_platforms, 'libtpu lets one process' in note)\n")
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "cpu True"


def test_a_caller_that_holds_the_tpu_is_told_what_to_do(monkeypatch):
    from jax._src import xla_bridge

    from explorer._src.compile.lowering import leave_the_chip_to_the_worker
    from explorer._src.errors import CompileError

    monkeypatch.setattr(xla_bridge, "backends_are_initialized", lambda: True)
    monkeypatch.setattr(xla_bridge, "backends", lambda: {"tpu": object(), "cpu": object()})
    with pytest.raises(CompileError, match="already holds the TPU.*fresh process"):
        leave_the_chip_to_the_worker("tpu")
    monkeypatch.setattr(xla_bridge, "backends", lambda: {"cpu": object()})
    assert leave_the_chip_to_the_worker("tpu") == ""
