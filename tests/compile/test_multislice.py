"""Multi-slice TPU targets (`tpu-v5e-2x2-2slices`) compiled by libtpu, against plain jax's own
deviceless multi-slice compile of the same programs.

The plain side runs in a subprocess (libtpu's lockfile, and no jax in the test process): the
devices of `jax.experimental.topologies.get_topology_desc(..., num_slices=N)` laid out by
`mesh_utils.create_hybrid_device_mesh`, the program jitted and compiled, and its text read here
with regular expressions of this file, not with the explorer's readers. What the two compiles
must share: each collective by kind, count, device groups and bytes, and XLA's memory
analysis; and the prices of the DCN legs are the catalog's DCN figures worked by hand."""

import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
from collections import Counter
from dataclasses import replace
from math import prod

import pytest

import explorer
from explorer import TensorSpec as T
from explorer._src.cost.catalog.names import get_target
from explorer._src.report.predict import with_target
from explorer._src.report.provenance import compiled_by

pytestmark = [pytest.mark.tpu, pytest.mark.skipif(importlib.util.find_spec("libtpu") is None,
                                                  reason="libtpu (the tpu extra) is not "
                                                         "installed")]

PROGRAM = '''\
import jax
import jax.numpy as jnp


def loss(x, w):
    return jnp.sum(x @ w)


def grads(x, w):
    return jax.grad(lambda w: jnp.sum(jnp.tanh(x @ w)))(w)
'''

PLAIN_JAX = textwrap.dedent('''
    import importlib.util, json, sys
    import jax, jax.numpy as jnp
    from jax.experimental import mesh_utils, topologies
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    a = json.loads(sys.argv[1])
    spec = importlib.util.spec_from_file_location("program", a["program"])
    program = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(program)
    devices = topologies.get_topology_desc(a["topology"], "tpu", chips_per_host_bounds=(2, 2, 1),
                                           num_slices=a["slices"]).devices
    mesh = Mesh(mesh_utils.create_hybrid_device_mesh(a["ici"], a["dcn"], devices), a["names"])
    part = lambda s: PartitionSpec(*[tuple(e) if isinstance(e, list) else e for e in s])
    structs = [jax.ShapeDtypeStruct(tuple(shape), jnp.float32,
                                    sharding=NamedSharding(mesh, part(s)))
               for shape, s in a["inputs"]]
    compiled = jax.jit(getattr(program, a["fn"]), keep_unused=True).lower(*structs).compile()
    m = compiled.memory_analysis()
    print(json.dumps({"text": compiled.as_text(), "memory": {
        "arguments": m.argument_size_in_bytes, "outputs": m.output_size_in_bytes,
        "aliased": m.alias_size_in_bytes, "temporaries": m.temp_size_in_bytes,
        "generated_code": m.generated_code_size_in_bytes}}))
''')

# (program function, mesh, target, mapping or None, each input's shape and spec as jax writes
# it, the ICI and DCN shapes of create_hybrid_device_mesh)
CASES = {
    # A data-parallel matmul and sum: partial sums on every device, over both axes.
    "loss-2slices": ("loss", "data=2,model=4", "tpu-v5e-2x2-2slices", None,
                     [((64, 256), [["data", "model"], None]), ((256, 128), [None, None])],
                     (1, 4), (2, 1)),
    # A gradient summed over the batch split on data, across four slices.
    "grads-4slices": ("grads", "data=4,model=4", "tpu-v5e-2x2-4slices", None,
                      [((64, 256), ["data", None]), ((256, 128), [None, "model"])],
                      (1, 4), (4, 1)),
    # The slices on the inner mesh axis: data is the second axis, and the partition ids of a
    # slice are not its mesh positions.
    "loss-inner-slices": ("loss", "model=4,data=2", "tpu-v5e-2x2-2slices",
                          "model=x+y,data=slice",
                          [((64, 256), [["data", "model"], None]), ((256, 128), [None, None])],
                          (4, 1), (1, 2)),
}

# Plain jax's text, read here: one in-slice collective or DCN send per line.
_COLLECTIVE = re.compile(r"= \S+ (all-reduce|all-gather|reduce-scatter|all-to-all|"
                         r"collective-permute)(?:-start)?\(.*?replica_groups=(\{[{}\d,]*\})")
_SEND = re.compile(r"%(send[.\d]*) = \((\w+)\[([\d,]*)\].*? send\(.*_xla_host_transfer_rendezvous"
                   r"=\"([^\"]+)\".*_xla_megascale_transfer_type=\"(\w+)\"")
_RECV = re.compile(r"= \((\w+)\[([\d,]*)\].*? recv\(.*_xla_host_transfer_rendezvous=\"([^\"]+)\"")
_BYTES = {"f32": 4, "bf16": 2}


@pytest.fixture(scope="module")
def program_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("multislice") / "program.py"
    path.write_text(PROGRAM)
    return path


def _load(path):
    spec = importlib.util.spec_from_file_location("multislice_program", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _spec_text(spec) -> str:
    return ",".join("(" + ",".join(e) + ")" if isinstance(e, list) else str(e) for e in spec)


def _plain_jax(path, fn, mesh, target, inputs, ici, dcn) -> dict:
    names = [a.split("=")[0] for a in mesh.split(",")]
    topology = "v5e:" + target.split("-")[2]
    slices = int(re.search(r"(\d+)slices", target).group(1))
    env = {**os.environ, "ALLOW_MULTIPLE_LIBTPU_LOAD": "1", "JAX_PLATFORMS": "cpu"}
    out = subprocess.run(
        [sys.executable, "-c", PLAIN_JAX, json.dumps({
            "program": str(path), "fn": fn, "topology": topology, "slices": slices,
            "names": names, "ici": list(ici), "dcn": list(dcn), "inputs": inputs})],
        capture_output=True, text=True, env=env, timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module", params=sorted(CASES))
def compiled(request, program_path):
    fn, mesh, target, mapping, inputs, ici, dcn = CASES[request.param]
    program = _load(program_path)
    specs = [T(name, shape, "float32", _spec_text(spec))
             for name, (shape, spec) in zip(("x", "w"), inputs, strict=True)]
    report = explorer.analyze(getattr(program, fn), *specs, mesh=mesh, target=target,
                              mapping=mapping, use_cache=False)
    plain = _plain_jax(program_path, fn, mesh, target, inputs, ici, dcn)
    return request.param, report, plain


def _slice_positions(name: str) -> list[list[int]]:
    """Each slice's mesh positions in mesh order, from the hybrid layout worked by hand: along
    each mesh axis the slices are the outer part, and the DCN shape (create_hybrid_device_mesh's)
    numbers the slices row-major."""
    _, mesh, _, _, _, ici, dcn = CASES[name]
    sizes = [int(a.split("=")[1]) for a in mesh.split(",")]
    out = [[] for _ in range(prod(dcn))]
    for p in range(prod(sizes)):
        coords, rest = [], p
        for s in reversed(sizes):
            coords.insert(0, rest % s)
            rest //= s
        slice_coords = [c // i for c, i in zip(coords, ici, strict=True)]
        k = 0
        for c, d in zip(slice_coords, dcn, strict=True):
            k = k * d + c
        out[k].append(p)
    return out


@pytest.mark.slow
def test_the_target_compiles_through_libtpu_over_all_its_slices(compiled):
    name, report, _ = compiled
    slices = int(re.search(r"(\d+)slices", CASES[name][2]).group(1))
    assert report.ahead_of_time and report.approximation == ""
    assert report.backend == f"tpu v5e:2x2 x{slices}"
    assert report.device_kind.startswith("TPU v5")
    assert compiled_by(report).startswith(
        f"compiled for {slices} v5e:2x2 slices joined by the data-center network ("
        f"{4 * slices} × TPU v5")


def test_in_slice_collectives_are_plain_jaxs_with_every_slices_copy_of_their_groups(compiled):
    name, report, plain = compiled
    slices = _slice_positions(name)
    expected = Counter()
    for kind, groups in _COLLECTIVE.findall(plain["text"]):
        local = [[int(d) for d in g.split(",")] for g in re.findall(r"\{([\d,]+)\}", groups)]
        # Partition p of slice k is that slice's p-th device in mesh order.
        everywhere = tuple(tuple(members[p] for p in g) for members in slices for g in local)
        expected[(kind, everywhere)] += 1
    got = Counter((c.kind, c.groups) for c in report.collectives if c.tier == "inside")
    assert got == expected and sum(expected.values()) == len(
        [c for c in report.collectives if c.tier == "inside"])


def test_dcn_legs_are_plain_jaxs_sends_by_kind_key_and_bytes(compiled):
    name, report, plain = compiled
    text = plain["text"]
    received = {key: prod(int(d) for d in dims.split(",") if d) * _BYTES[dtype]
                for dtype, dims, key in _RECV.findall(text)}
    kinds = {"ALL_REDUCE": "all-reduce", "ALL_GATHER": "all-gather",
             "REDUCE_SCATTER": "reduce-scatter", "ALL_TO_ALL": "all-to-all",
             "ONE_TO_ONE": "collective-permute"}
    expected = sorted(
        (kinds[kind], key, max(prod(int(d) for d in dims.split(",") if d) * _BYTES[dtype],
                               received[key]))
        for _, dtype, dims, key, kind in _SEND.findall(text))
    legs = [c for c in report.collectives if c.tier == "across"]
    assert expected and sorted((c.kind, c.dcn_key, c.bytes) for c in legs) == expected
    # Each leg spans the slices: every group holds one device of each slice it joins.
    slice_of = {p: k for k, members in enumerate(_slice_positions(name)) for p in members}
    for c in legs:
        for g in c.groups:
            assert len({slice_of[d] for d in g}) == len(g) > 1


def test_the_memory_analysis_is_plain_jaxs(compiled):
    _, report, plain = compiled
    m = report.memory
    assert {"arguments": m.arguments, "outputs": m.outputs, "aliased": m.aliased,
            "temporaries": m.temporaries, "generated_code": m.generated_code} == plain["memory"]


# CLOUD_V5E (https://cloud.google.com/tpu/docs/v5e): "Data center network bandwidth per Pod
# 6.4 Tbps" for a pod of 256 chips, 6.4e12 / 8 / 256 bytes/s per chip; the same as its "Per-host
# NIC configuration 2 x 100 Gbps NIC" over "Chips per host 8".
V5E_DCN_PER_CHIP = 6.4e12 / 8 / 256
assert V5E_DCN_PER_CHIP == 2 * 100e9 / 8 / 8 == 3.125e9


def test_a_dcn_leg_is_priced_on_the_dcn_by_hand(compiled):
    name, report, _ = compiled
    assert get_target(CASES[name][2]).axis("slice").link.bandwidth == V5E_DCN_PER_CHIP
    priced = list(zip(report.collectives, report.estimate.collectives, strict=True))
    for c, t in ((c, t) for c, t in priced if c.tier == "across"):
        m = len(c.groups[0])                 # slices in a group, one device of each
        # A ring all-reduce among m devices, each with its own share W of the DCN, sends and
        # receives 2·V·(m-1)/m bytes (scaling book, gpus, "Cross-node collectives"; NCCL's
        # busBw = algBw·2(m-1)/m): T = 2·V·(m-1)/(m·W). DCN has no measured fraction of W
        # and no sourced latency: the bandwidth term alone.
        assert c.kind == "all-reduce"
        assert c.est_seconds == pytest.approx(2 * c.bytes * (m - 1) / (m * V5E_DCN_PER_CHIP))
        assert t.links == f"DCN x{m}"
    for t in (t for c, t in priced if c.tier == "inside"):
        assert "DCN" not in t.links and "ICI" in t.links


def test_a_dcn_leg_says_which_line_and_reason_made_it(compiled, program_path):
    name, report, _ = compiled
    lines = program_path.read_text().splitlines()
    made = {"loss": lines.index("    return jnp.sum(x @ w)") + 1,
            "grads": lines.index("    return jax.grad(lambda w: jnp.sum(jnp.tanh(x @ w)))(w)")
            + 1}[CASES[name][0]]
    for c in (c for c in report.collectives if c.tier == "across"):
        assert c.source.endswith(f"/{program_path.name}:{made}")
        assert c.why is not None and c.why.reason == "partial-sum"
        assert c.why.text.startswith("Between slices, over the data-center network")
        if c.leg_of:
            inside = next(i for i in report.collectives if i.hlo_name == c.leg_of)
            assert inside.tier == "inside" and inside.kind == c.kind


def test_the_memory_verdict_is_libtpus_as_for_one_slice(compiled):
    name, report, _ = compiled
    target = CASES[name][2]
    capacity = get_target(target).chip.memory_available
    over = replace(report, memory=replace(report.memory, temporaries=int(capacity) + 1))
    fit = with_target(over, target).estimate.memory
    assert fit.fits and fit.checked_by == "libtpu's memory check" and fit.fraction > 1


def twice(x):
    return x * 2


def test_a_program_over_the_chips_memory_is_libtpus_refusal():
    # 20e9 bytes of f32 on every chip, and its double: over a v5e's 15.75 GiB.
    size = 20 * 10**9
    r = explorer.analyze(twice, T("x", (size // 4 // 1000, 1000)), mesh="data=2,model=4",
                         target="tpu-v5e-2x2-2slices", use_cache=False)
    assert r.memory_verdict is not None and not r.memory_verdict.fits
    assert r.estimate.memory is None or not r.estimate.memory.fits
