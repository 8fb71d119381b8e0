"""The hardware catalog's invariants, checked over every target it lists: positive constants
with their sources, names that parse back to the same target, device counts that are the
product of the slice or node shape, and errors that name the valid choices.

The cost formulas that read these numbers are tested in tests/cost/test_model.py."""

import json
import re
import statistics
from math import prod
from pathlib import Path

import pytest

from explorer._src.cost.catalog.gpu import GPUS_PER_NODE
from explorer._src.cost.catalog.names import get_target, targets, targets_with_chips
from explorer._src.cost.catalog.sources import GB, gbit_per_s
from explorer._src.cost.catalog.types import Link, TargetFamily, achievable, format_rate
from explorer._src.errors import TargetError

CATALOG = targets()
ACCELERATORS = {n: t for n, t in CATALOG.items() if t.family is not TargetFamily.CPU}
URL = re.compile(r"https://\S+")
REPO = Path(__file__).resolve().parents[2]


def links(target):
    return {a.link.kind: a.link for a in target.axes}


@pytest.mark.parametrize("name", sorted(ACCELERATORS))
def test_every_accelerator_has_positive_sourced_peaks_and_memory(name):
    chip = ACCELERATORS[name].chip
    assert chip.peak_flops, f"{chip.name} has no peak FLOP/s"
    # FLOP/s: between a TFLOP/s and 10 PFLOP/s for every chip of the catalog.
    assert all(1e12 <= v <= 1e16 for v in chip.peak_flops.values()), chip.peak_flops
    # Bytes: between 0.5 GB (an IPU's on-chip SRAM) and 1 TB of memory per chip.
    assert 0.5e9 <= chip.memory_bytes <= 1e12
    assert chip.memory_bandwidth is None or 1e11 <= chip.memory_bandwidth <= 1e14  # bytes/s
    assert URL.fullmatch(chip.source)
    for measured in (chip.matmul_measured, chip.memory_measured):
        if measured is not None:
            assert 0 < measured.fraction <= 1 and measured.what
            assert URL.match(measured.source) or (REPO / measured.source).is_file()


@pytest.mark.parametrize("name", sorted(ACCELERATORS))
def test_every_link_has_a_positive_one_way_bandwidth_latency_and_source(name):
    for link in links(ACCELERATORS[name]).values():
        assert isinstance(link, Link)
        # bytes/s one way: from a DCN's 3 GB/s per chip to NVLink 5's 900 GB/s.
        assert 1e9 <= link.bandwidth <= 1e12, (link.kind, link.bandwidth)
        # seconds per hop or ring step; None only where no public figure exists (DCN, IPU-Link).
        assert link.latency is None or 1e-7 <= link.latency <= 1e-4
        assert all(URL.fullmatch(part) for part in link.source.split(" ; ")), link.source
        if link.measured is not None:
            assert 0 < link.measured.fraction <= 1 and URL.match(link.measured.source)


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_every_catalog_name_parses_back_to_its_own_target(name):
    assert get_target(name) is CATALOG[name]
    assert get_target(f"  {name.upper()} ") is CATALOG[name]
    assert get_target(CATALOG[name]) is CATALOG[name]


def shape_of(name: str) -> int:
    """The device count a name spells: tpu-<gen>-AxBxC[-Nslices] has A·B·C·N chips,
    <gpu>-G G GPUs, <gpu>-8xN 8·N."""
    m = re.fullmatch(r"tpu-\w+?-([\dx]+)(?:-(\d+)slices)?", name)
    if m:
        return prod(int(d) for d in m.group(1).split("x")) * int(m.group(2) or 1)
    m = re.fullmatch(r"[a-z]\d+-(\d+)(?:x(\d+))?", name)
    assert m, name
    return int(m.group(1)) * int(m.group(2) or 1)


@pytest.mark.parametrize("name", sorted(n for n in ACCELERATORS if n != "bow-2000"))
def test_a_targets_device_count_is_the_product_of_the_shape_its_name_spells(name):
    target = CATALOG[name]
    assert target.chips == shape_of(name) == prod(a.size for a in target.axes)


def test_names_outside_the_listing_parse_by_the_same_grammar():
    # Google's 4x8 slice written the other way round: 8·4 = 32 chips, still a 2-D torus.
    t = get_target("tpu-v5e-8x4")
    assert (t.name, t.chips, [a.size for a in t.axes]) == ("tpu-v5e-8x4", 32, [8, 4])
    # 64 DGX nodes of 8: 512 GPUs, nodes outermost.
    t = get_target("h100-8x64")
    assert t.chips == 512 and [(a.name, a.size) for a in t.axes] == [("node", 64), ("gpu", 8)]
    # Three v5e pods over DCN: 3·16·16 = 768 chips, the slices outermost.
    t = get_target("tpu-v5e-16x16-3slices")
    assert t.chips == 768 and [a.name for a in t.axes] == ["slice", "x", "y"]
    # Any whole number of 4x4x4 cubes is a v4 slice: 4·4·12 = 192 chips.
    assert get_target("tpu-v4-4x4x12").chips == 192


def test_the_bow_2000_is_four_ipus_and_the_cpu_takes_any_count():
    assert get_target("bow-2000").chips == 4
    assert get_target("cpu").chips is None and get_target("cpu").axes == ()


def test_physical_axes_are_listed_outermost_first_with_distinct_names():
    for target in ACCELERATORS.values():
        names = [a.name for a in target.axes]
        assert len(set(names)) == len(names) and all(a.size > 1 for a in target.axes)
        # The slow tier joining slices or nodes comes first, as a mesh's outer axis does.
        across = [a.link.across for a in target.axes]
        assert across == sorted(across, reverse=True), target.name
        # Only a torus wraps: a switched network has no ring of wires to close.
        assert not any(a.wraparound and a.link.switched for a in target.axes)


def test_a_gpu_node_has_eight_gpus_and_multi_node_targets_whole_nodes():
    for name, target in ACCELERATORS.items():
        if target.family is TargetFamily.GPU and "x" in name:
            assert target.axis("gpu").size == GPUS_PER_NODE == 8


@pytest.mark.parametrize("name, choices", [
    # An unknown TPU generation: the error lists the generations.
    ("tpu-v9-2x2", ["'v4'", "'v5e'", "'v5p'", "'v6e'"]),
    # A shape the generation has not: the slices it has.
    ("tpu-v5e-3x3", ["1x1", "2x2", "4x8", "16x16", "either order"]),
    ("tpu-v4-3x3x3", ["4x4x4", "any whole number of 4x4x4 cubes up to 4096 chips"]),
    # A GPU count that is not a node's: the counts a node may use, and the multi-node form.
    ("h100-6", ["G in 1, 2, 4, 8", "'h100-8xN'"]),
    ("h100-4x2", ["whole nodes of 8 GPUs", "'h100-8x2'"]),
    # A name of no family: every catalog name and the grammar.
    ("h300-8", ["'h100-8'", "'tpu-v5e-16x16'", "'bow-2000'", "'cpu'", "'tpu-v5e-...'",
                "'<gpu>-8x<N>'"]),
])
def test_get_target_errors_name_the_valid_choices(name, choices):
    with pytest.raises(TargetError) as e:
        get_target(name)
    for choice in choices:
        assert choice in str(e.value), (choice, str(e.value))


def test_a_target_that_is_not_a_name_is_refused_with_the_valid_names():
    with pytest.raises(TargetError, match="target 5 is not a name; valid targets: 'tpu-v5e"):
        get_target(5)


def test_an_axis_a_target_lacks_is_refused_with_its_axes():
    with pytest.raises(TargetError, match="h100-8x2 has no physical axis 'x'; its axes are "
                                          "'node', 'gpu'"):
        get_target("h100-8x2").axis("x")


def test_targets_with_a_device_count_are_those_whose_shapes_multiply_to_it():
    # 32 = 8·4 (each GPU in 4 nodes, listed first: whole nodes), 4·8 (v5e, v6e), 2·4·4 (v4,
    # v5p), and two slices of 16 chips (v5e/v6e 4x4, v4 2x2x4; v5p documents no 16-chip
    # shape).
    assert targets_with_chips(32) == [
        "h100-8x4", "h200-8x4", "a100-8x4", "b200-8x4",
        "tpu-v5e-4x8", "tpu-v5e-4x4-2slices", "tpu-v5p-2x4x4", "tpu-v6e-4x8",
        "tpu-v6e-4x4-2slices", "tpu-v4-2x4x4", "tpu-v4-2x2x4-2slices"]
    assert targets_with_chips(3) == []


@pytest.mark.parametrize("devices", [1, 2, 4, 8, 16, 64, 96, 128, 512, 1024, 2048])
def test_every_size_people_rent_has_targets_made_by_the_grammar(devices):
    names = targets_with_chips(devices)
    assert all(get_target(n).chips == devices for n in names)
    gpus = [n for n in names if get_target(n).family == "gpu"]
    nodes, per_node = divmod(devices, 8)
    if devices in (1, 2, 4, 8):
        assert gpus == [f"{g}-{devices}" for g in ("h100", "h200", "a100", "b200")]
    elif per_node == 0 and nodes <= 128:
        assert gpus == [f"{g}-8x{nodes}" for g in ("h100", "h200", "a100", "b200")]
        assert names[:4] == gpus            # whole nodes: the GPUs first
    else:
        assert gpus == []                   # 2048 GPUs would be 256 nodes: past the list
    if devices == 64:                       # the README's data=8,model=8 on 8 DGX nodes
        assert "h100-8x8" in names and "tpu-v5e-8x8" in names and "tpu-v5p-4x4x4" in names
    if devices == 2048:                     # v5p's 8x16x16; v5e's pods of 256, 8 of them
        assert "tpu-v5p-8x16x16" in names and "tpu-v5e-16x16-8slices" in names


def test_link_speeds_in_gigabits_are_bytes_over_eight():
    # 400 Gb/s InfiniBand: 400e9 / 8 = 50e9 bytes/s.
    assert gbit_per_s(400) == 50e9
    assert links(get_target("h100-8x2"))["InfiniBand"].bandwidth == 50 * GB


def test_rates_are_written_with_three_digits_and_a_prefix():
    assert format_rate(989e12, "FLOP/s") == "989 TFLOP/s"
    assert format_rate(4.5e10, "B/s") == "45 GB/s"
    assert format_rate(1.4e15 / 4, "FLOP/s") == "350 TFLOP/s"


def test_a_listing_line_names_the_count_chip_rates_and_links():
    # H100 SXM: 989 TFLOP/s bf16, 80 GiB HBM at 3.35 TB/s, NVLink 450 GB/s one way per GPU; of
    # the 80 GiB, CUDA gives a program 79.1 GiB, what a memory verdict compares with.
    assert get_target("h100-8").describe() == (
        "h100-8: 8 x H100 SXM, 8 GPUs of one NVLink node, 989 TFLOP/s bf16, 79.1 GiB HBM at "
        "3.35 TB/s, NVLink 450 GB/s per device one way")


def test_the_listing_and_the_memory_verdict_give_a_chip_the_same_memory():
    """`targets` said 16.0 GiB for a v5e where analyze's verdict said 15.8 GiB: both now give
    what libtpu lets a program hold, 15.75 GiB (issue 53)."""
    from explorer._src.cost.memory_fit import memory_fit
    from explorer._src.units import format_bytes

    v5e = get_target("tpu-v5e-2x2")
    assert v5e.chip.capacity == 15.75 * 2**30
    fit = memory_fit(2**30, v5e)
    assert format_bytes(fit.capacity) == "15.8 GiB"
    assert ", 15.8 GiB HBM at " in v5e.describe() and "16.0 GiB" not in v5e.describe()


def test_achievable_rates_scale_each_rate_by_its_measured_fraction_only():
    # H100: 794.5 of 989 bf16 TFLOP/s measured; NVLink 367.61 of 450 GB/s; HBM as quoted.
    nominal = get_target("h100-8")
    reached, notes = achievable(nominal)
    assert reached.chip.peak_flops["bfloat16"] == pytest.approx(794.5e12)
    assert links(reached)["NVLink"].bandwidth == pytest.approx(367.61e9)
    assert reached.chip.memory_bandwidth == nominal.chip.memory_bandwidth == 3.35e12
    assert links(reached)["NVLink"].latency == links(nominal)["NVLink"].latency == 0.6e-6
    assert len(notes) == 3
    # The CPU host has no rates to scale and no notes.
    assert achievable(get_target("cpu")) == (get_target("cpu"), ())


def test_v5e_measured_fractions_are_what_the_chip_run_recorded():
    """The catalog's v5e fractions against the raw run kept in the repository: the median
    device-time rate of the large bf16 matmuls over 197 TFLOP/s, and of the large copies, adds,
    writes and transposes over 819 GB/s (each measured case: FLOPs or bytes over its time)."""
    from explorer._src.cost.catalog.tpu import TPU_V5E, TPU_V5E_RUN

    rates = json.loads((REPO / TPU_V5E_RUN).read_text())["rates"]
    timed = [r for r in rates if r.get("module_ns")]
    matmul = [r["flops"] / (r["module_ns"] * 1e-9) / 197e12 for r in timed
              if r["kind"] == "matmul" and r["dtype"] == "bfloat16"
              and min(r["m"], r["k"], r["n"]) >= 1024 and r["m"] * r["k"] * r["n"] >= 2048**3]
    hbm = [r["bytes"] / (r["module_ns"] * 1e-9) / 819e9 for r in timed
           if r["kind"] in ("copy", "add", "write", "transpose") and r["bytes"] >= 256 * 2**20]
    assert len(matmul) == 11 and len(hbm) >= 16
    assert TPU_V5E.matmul_measured.fraction == pytest.approx(statistics.median(matmul), abs=0.005)
    assert TPU_V5E.memory_measured.fraction == pytest.approx(statistics.median(hbm), abs=0.005)
