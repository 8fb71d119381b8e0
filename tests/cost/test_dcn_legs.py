"""The legs of a collective libtpu split at the slices' edges, priced each on its own links:
the part inside the slices on ICI, the DCN leg on the data-center network
(explorer/_src/cost/collectives.py
`collective_time(..., tier=)`), against the catalog's figures worked by hand.

Sources of the figures: CLOUD_V5E (https://cloud.google.com/tpu/docs/v5e), "Data center network
bandwidth per Pod 6.4 Tbps" over its 256 chips, 6.4e12 / 8 / 256 = 3.125e9 bytes/s per chip;
BOOK_TPUS ICI table, v5e 4.5e10 bytes/s per link one way; BOOK_SHARDING, about 1 us per ICI
hop. No jax here."""

import pytest

from explorer._src.cost.catalog.names import get_target
from explorer._src.cost.collectives import collective_time
from explorer._src.cost.mapping import Tier, check_mapping
from explorer._src.hlo.collectives import CollectiveKind

TARGET = "tpu-v5e-2x2-2slices"
DCN = 6.4e12 / 8 / 256          # bytes/s per chip, CLOUD_V5E
ICI = 4.5e10                    # bytes/s per link one way, BOOK_TPUS
HOP = 1e-6                      # s per ICI hop, BOOK_SHARDING

# data=4 spans both slices and the 2 chips of x in each; model=2 is y.
MIXED = check_mapping(TARGET, ("data", "model"), (4, 2), "data=slice+x,model=y")


def test_the_catalog_has_the_sourced_dcn_figure():
    assert get_target(TARGET).axis("slice").link.bandwidth == DCN == 3.125e9
    assert get_target(TARGET).axis("slice").link.latency is None     # none published


@pytest.mark.parametrize("kind, seconds", [
    # Each device's own transfer among m = 2 slices at W = DCN per chip (scaling book, gpus,
    # "Cross-node collectives", with one device's NIC share; NCCL's busBw = algBw · 2(m-1)/m):
    # all-reduce 2·V·(m-1)/(m·W); all-gather and reduce-scatter V·(m-1)/(m·W), V the larger
    # buffer; all-to-all V·(m-1)/(m·W); a permute V/W.
    (CollectiveKind.ALL_REDUCE, 2 * 1e8 * (2 - 1) / (2 * DCN)),
    (CollectiveKind.ALL_GATHER, 1e8 * (2 - 1) / (2 * DCN)),
    (CollectiveKind.REDUCE_SCATTER, 1e8 * (2 - 1) / (2 * DCN)),
    (CollectiveKind.ALL_TO_ALL, 1e8 * (2 - 1) / (2 * DCN)),
    (CollectiveKind.COLLECTIVE_PERMUTE, 1e8 / DCN),
])
def test_a_dcn_leg_crosses_only_the_slice_part_of_its_axis(kind, seconds):
    t = collective_time(kind, 1e8, ("data",), TARGET, MIXED, group_size=2, tier=Tier.ACROSS)
    assert t.seconds == pytest.approx(seconds)
    assert t.links == "DCN x2"
    assert "no sourced per-hop latency for DCN" in t.note


def test_the_part_inside_the_slices_crosses_only_the_ici_part_of_its_axis():
    # x:2 without wraparound: a line of n = 2 chips; all-reduce = two all-gathers, each
    # (n-1)·(V/n)/w (scaling book, sharding): 2·V·(2-1)/(2·ICI); latency 2·(n-1) hops.
    t = collective_time(CollectiveKind.ALL_REDUCE, 1e8, ("data",), TARGET, MIXED,
                        group_size=2, tier=Tier.INSIDE)
    assert t.bandwidth_seconds == pytest.approx(2 * 1e8 * (2 - 1) / (2 * ICI))
    assert t.latency_seconds == pytest.approx(2 * HOP)
    assert t.links == "ICI x:2 (no wraparound)"


def test_one_collective_over_both_tiers_is_the_hierarchical_one():
    # A one-program compile (the CPU's, priced on the target): the slower tier's bandwidth,
    # the tiers' latencies summed; the DCN tier with the 2 chips of x sharing the work, g = 2.
    t = collective_time(CollectiveKind.ALL_REDUCE, 1e8, ("data",), TARGET, MIXED, group_size=4)
    assert t.bandwidth_seconds == pytest.approx(max(2 * 1e8 / (2 * ICI),
                                                    2 * 1e8 * (2 - 1) / (2 * 2 * DCN)))
    assert t.links == "DCN x2 + ICI x:2 (no wraparound)"


def test_a_dcn_leg_over_axes_the_mapping_keeps_inside_the_slices_is_not_timed():
    inside = check_mapping(TARGET, ("data", "model"), (2, 4), "data=x,model=slice+y")
    t = collective_time(CollectiveKind.ALL_REDUCE, 1e8, ("data",), TARGET, inside,
                        group_size=2, tier=Tier.ACROSS)
    assert t.seconds is None and "none of data on the links between them" in t.note
