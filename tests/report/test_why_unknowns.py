"""No collective of the built-in workloads, under any preset that fits them, is left without a
reason; and the tutorials' one that was (notebook 08's jax.random.split on a sharded key
array) now has one."""

import re

import pytest

import explorer
from explorer import TensorSpec as T
from explorer._src.report.why import Reason
from explorer._src.strategy.presets import PRESETS
from explorer._src.workloads.registry import WORKLOADS


def shuffle_rows_2024(rng, inputs):
    import jax

    with jax.threefry_partitionable(False):
        keys = jax.random.split(rng, inputs.shape[0])
        return jax.vmap(lambda k, x: jax.random.permutation(k, x))(keys, inputs)


@pytest.mark.slow
def test_a_random_split_of_a_sharded_key_array_permutes_the_halves_of_its_counters():
    # jax.random.split of 24 keys (the 2024 threefry) computes 2 x 24 counters as one iota of
    # 48, split over the 8 devices of `dp` (6 each), and cuts it in halves [0:24] and [24:48],
    # each split over `dp` in parts of 3: device d's part starts at 3d, on device 3d // 6, so
    # collective-permutes over `dp` bring each part to its device.
    r = explorer.analyze(shuffle_rows_2024, T("rng", (2,), "uint32"),
                         T("inputs", (24, 4096, 16), spec="dp,None,None"), mesh="dp=8")
    permutes = [c for c in r.collectives if c.kind == "collective-permute"]
    assert permutes
    for c in permutes:
        assert c.axes == ("dp",) and c.why.reason == Reason.INDEXING
        assert re.search(r"\(slice\) cuts elements (0:24|24:48) of 48 of dimension 0 of the "
                         r"`iota` at line \d+, which is split over `dp`", c.why.text)
    assert all(c.why.reason != Reason.UNKNOWN for c in r.collectives)


def _mesh(workload: str, preset: str | None) -> str:
    """A mesh with the axes a preset places tensors over (2 or 3 of them, 8 devices)."""
    if workload == "pipeline":
        return "stage=4,data=2"          # its 4 stages, one per position on `stage`
    axes = (PRESETS[preset].requires + PRESETS[preset].optional) if preset else ("data",
                                                                                 "model")
    sizes = {1: (8,), 2: (2, 4), 3: (2, 2, 2)}[len(axes)]
    return ",".join(f"{a}={s}" for a, s in zip(axes, sizes, strict=True))


def _cases():
    for workload in WORKLOADS:
        for preset in (None, *PRESETS):
            fits = PRESETS[preset].workloads if preset else None
            if fits is not None and workload not in fits:
                continue
            if workload == "pipeline" and preset not in (None, "pp"):
                continue                  # the pipeline runs over `stage`, which they lack
            yield workload, preset


@pytest.mark.slow
def test_no_collective_of_a_builtin_workload_under_any_preset_is_unknown():
    unknown = []
    cases = list(_cases())
    for workload, preset in cases:
        r = explorer.analyze_workload(workload, _mesh(workload, preset), preset=preset)
        unknown += [f"{workload} {preset}: {c.kind} {c.op_name}: {c.why.text}"
                    for c in r.collectives if c.why is None or c.why.reason == Reason.UNKNOWN]
    assert len(cases) >= 60               # every workload with every preset that fits it
    assert unknown == [], "\n".join(unknown)
