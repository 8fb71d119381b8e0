"""The reader of MegaScale's DCN legs (explorer/_src/hlo/megascale.py) on libtpu's own text.

tests/hlo/data/megascale_*.hlo are the optimized module, the module before libtpu's
cross-slice rewrites and the module before SPMD partitioning of one compile by libtpu 0.0.42.1
(jax 0.10.2), each `backend_config={...}` removed (no reader here reads them):

    devices = topologies.get_topology_desc("v5e:2x2", "tpu", chips_per_host_bounds=(2, 2, 1),
                                           num_slices=2).devices
    mesh = Mesh(np.array(devices).reshape(2, 4), ("data", "model"))    # slice 0, then slice 1
    def f(x, w):                                 # x: P("data", "model"), w: P("model", None)
        total = jnp.sum(x @ w)                                       # line 8
        whole = with_sharding_constraint(x, NamedSharding(mesh, P(None, "model")))   # line 9
        everything = jnp.sum(x)                                      # line 10
        return total, whole, everything
    jax.jit(f).lower(x: f32[64, 256], w: f32[256, 128]).compile(compiler_options={
        "xla_dump_to": ..., "xla_dump_hlo_pass_re": "cross-slice-rewrites|spmd-partitioning"})

The expected values below are read off those texts by hand (the shapes of the send and recv
lines, the `_xla_megascale_target` strings), not from the reader.
"""

from pathlib import Path

import pytest

from explorer._src.hlo.collectives import CollectiveKind
from explorer._src.hlo.megascale import (
    SliceLayout,
    dcn_recv_done_starts,
    dcn_transfers,
    in_slice_partner,
    rendezvous_key,
    target_devices,
)
from explorer._src.hlo.module import parse_module
from explorer._src.hlo.schedule import StepKind, read_schedule

DATA = Path(__file__).parent / "data"
OPTIMIZED = (DATA / "megascale_optimized.hlo").read_text()

# data=2,model=4 over two slices of 4 chips, slice-major: positions 0-3 are slice 0's chips
# 0-3 (MegaScale ids 100000-100003), positions 4-7 slice 1's (200000-200003).
SLICE_MAJOR = SliceLayout((0, 0, 0, 0, 1, 1, 1, 1),
                          tuple(range(100000, 100004)) + tuple(range(200000, 200004)))


@pytest.fixture(scope="module")
def transfers():
    return {t.key: t for t in dcn_transfers(parse_module(OPTIMIZED), SLICE_MAJOR)}


def test_each_send_recv_pair_is_one_dcn_leg_keyed_by_its_rendezvous(transfers):
    assert sorted(transfers) == ["all-gather_0", "all-reduce.1_0", "all-reduce.2_0"]
    assert {k: (t.send.name, t.recv.name) for k, t in transfers.items()} == {
        "all-gather_0": ("send.1", "recv.1"), "all-reduce.1_0": ("send", "recv"),
        "all-reduce.2_0": ("send.2", "recv.2")}
    assert transfers["all-reduce.1_0"].original == "all-reduce.1"


def test_a_leg_does_what_its_transfer_type_says_with_its_reduction(transfers):
    assert transfers["all-gather_0"].kind is CollectiveKind.ALL_GATHER
    assert transfers["all-gather_0"].reduction == ""
    assert transfers["all-reduce.2_0"].kind is CollectiveKind.ALL_REDUCE
    assert transfers["all-reduce.2_0"].reduction == "SUM"


def test_a_legs_bytes_are_the_larger_of_what_one_device_sends_and_receives(transfers):
    # send.1 sends f32[32,64] (its block of x), recv.1 receives f32[64,64] (both slices' rows).
    assert transfers["all-gather_0"].bytes == 64 * 64 * 4
    # The scalar sums travel in one f32[1,1,128] tile each way.
    assert transfers["all-reduce.1_0"].bytes == 128 * 4


def test_the_slices_by_chips_target_is_one_group_per_chip_across_the_slices(transfers):
    # "{1,2}x{0:3}": chip c of slice 1 with chip c of slice 2, c = 0..3.
    assert transfers["all-reduce.2_0"].groups == ((0, 4), (1, 5), (2, 6), (3, 7))


def test_explicit_groups_and_permute_pairs_are_read_as_mesh_positions():
    # Four slices of 4 chips, slice-major: MegaScale id (s + 1) * 100000 + c at position 4s + c.
    four = SliceLayout(tuple(p // 4 for p in range(16)),
                       tuple((p // 4 + 1) * 100000 + p % 4 for p in range(16)))
    # As libtpu wrote them (tests/compile/test_multislice.py compiles such programs).
    groups, pairs = target_devices("{{100000,300000},{100001,300001},{200000,400000}}", four)
    assert (groups, pairs) == ([[0, 8], [1, 9], [4, 12]], [])
    groups, pairs = target_devices("{{200000->100002},{100002->200000}}", four)
    assert (groups, pairs) == ([], [(4, 2), (2, 4)])
    groups, _ = target_devices('"{1,3}x{0:1}"', four)
    assert groups == [[0, 8], [1, 9]]


def test_a_target_naming_a_device_of_no_slice_or_an_unknown_form_is_refused():
    with pytest.raises(ValueError, match="device id 300000"):
        target_devices("{{100000,300000}}", SLICE_MAJOR)
    with pytest.raises(ValueError, match="unknown DCN target form"):
        target_devices("every chip", SLICE_MAJOR)


def test_partition_ids_of_a_slice_are_its_devices_in_mesh_order():
    # model=4,data=2 with data on the slices: positions 0,2,4,6 are slice 0's, in that order, so
    # a sum over model inside each slice ({0,1,2,3} in partition ids) is positions 0,2,4,6 and
    # 1,3,5,7.
    inner = SliceLayout((0, 1) * 4, tuple(range(8)))
    assert inner.members == ((0, 2, 4, 6), (1, 3, 5, 7))
    assert inner.everywhere([[0, 1, 2, 3]]) == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert inner.everywhere_pairs([(0, 1)]) == [(0, 2), (1, 3)]
    # Partition id p of every slice: the devices a DCN leg joins.
    assert inner.peers == ((0, 1), (2, 3), (4, 5), (6, 7))
    with pytest.raises(ValueError, match="outside a slice of 4 devices"):
        inner.everywhere([[0, 4]])


def test_a_leg_is_linked_to_the_in_slice_collective_whose_result_it_sends(transfers):
    module = parse_module(OPTIMIZED)
    # send.2 sends get-tuple-element 1 of the combined in-slice all-reduce.5: the sum over
    # model first, then across the slices.
    assert in_slice_partner(module, transfers["all-reduce.2_0"]) == "all-reduce.5"
    # The sum over data alone has no part inside a slice (a reduce feeds its send), nor has
    # the gather over data.
    assert in_slice_partner(module, transfers["all-reduce.1_0"]) is None
    assert in_slice_partner(module, transfers["all-gather_0"]) is None


def test_the_schedule_runs_a_leg_from_its_send_to_its_recv_done():
    module = parse_module(OPTIMIZED)
    assert dcn_recv_done_starts(module) == {"recv-done": "send", "recv-done.1": "send.1",
                                            "recv-done.2": "send.2"}
    steps = {s.instr.name: s for s in read_schedule(OPTIMIZED).steps}
    assert steps["send.2"].kind is StepKind.COLLECTIVE_START
    assert steps["send.2"].collectives == ("send.2",)
    assert (steps["recv-done.2"].kind, steps["recv-done.2"].start) == (
        StepKind.COLLECTIVE_DONE, "send.2")
    assert steps["recv.2"].kind is StepKind.FREE and steps["send-done.2"].kind is StepKind.FREE


def test_the_after_all_token_carries_the_same_key():
    names = parse_module(OPTIMIZED).by_name()
    assert rendezvous_key(names["after-all.2"]) == "all-reduce.2_0"
    assert rendezvous_key(names["send.2"]) == "all-reduce.2_0"
    assert rendezvous_key(names["all-reduce.5"]) is None
