# ruff: noqa: E501  (HLO instruction lines are long)
"""The program's own dtype of each collective, read from the module before the CPU backend's
dtype promotions (explorer/_src/report/dtypes.py), on programs defined here and compiled for real,
and on hand-written modules for the matching rules.

The three compiled cases are the ones the old guess (a convert feeding the collective) got
wrong: an all-reduce fed straight by an f32 matmul fusion (2x too many bytes), f32 reductions of
a bf16 input (halved), and a combined all-reduce of an f32 and a bf16 part (one dtype for both).
"""

import importlib.util

import jax
import jax.numpy as jnp
import pytest

from explorer import TensorSpec, analyze
from explorer._src.hlo.module import parse_module
from explorer._src.report.build import read_collectives
from explorer._src.report.dtypes import collectives_of, program_dtypes
from explorer._src.spec.mesh import parse_mesh

BF16, F32 = 2, 4
needs_libtpu = pytest.mark.skipif(importlib.util.find_spec("libtpu") is None,
                                  reason="libtpu (the tpu extra) is not installed")


def chain(x, w1, w2, w3):
    return x @ w1 @ w2 @ w3


CHAIN_INPUTS = (TensorSpec("x", (6, 12), "bfloat16", (None, "data")),
                TensorSpec("w1", (12, 24), "bfloat16", ("data", None)),
                TensorSpec("w2", (24, 12), "bfloat16"),
                TensorSpec("w3", (12, 6), "bfloat16"))


@pytest.mark.slow
def test_an_all_reduce_fed_by_an_f32_matmul_fusion_counts_in_bf16():
    # x@w1 contracts the dimension both shard over `data` (3 ways): each device holds the
    # partial product x[:, 4 cols] @ w1[4 rows, :], of the product's shape (6, 24), and an
    # all-reduce adds them. The CPU computes the matmul in f32 and moves f32; the program's
    # product is bf16, as plain jax says.
    r = analyze(chain, *CHAIN_INPUTS, mesh="data=3")
    product = jax.eval_shape(lambda x, w: x @ w, jnp.zeros((6, 12), jnp.bfloat16),
                             jnp.zeros((12, 24), jnp.bfloat16))
    [ar] = r.collectives
    assert (ar.kind, ar.axes, ar.shape) == ("all-reduce", ("data",), (6, 24))
    assert ar.dtype == "float32" and ar.bytes == 6 * 24 * F32          # what the CPU moves
    assert ar.program_dtypes == (str(product.dtype),) == ("bfloat16",)
    assert ar.program_bytes == 6 * 24 * BF16 == 288
    assert ar.operand_dtype == "bfloat16"


def sums(x):
    return jnp.sum(x), jnp.mean(x, axis=0)


@pytest.mark.slow
def test_f32_reductions_of_a_bf16_input_keep_f32():
    # jnp.sum and jnp.mean of bf16 accumulate in f32 (jax upcasts half floats for reductions):
    # with rows sharded over `data`, the partial sums all-reduced are an f32 scalar and an
    # f32[12], in the program as on the CPU.
    r = analyze(sums, TensorSpec("x", (6, 12), "bfloat16", ("data", None)), mesh="data=3")
    assert {c.kind for c in r.collectives} == {"all-reduce"}
    dtypes = [d for c in r.collectives for d in c.program_dtypes]
    assert dtypes == ["float32", "float32"]
    assert sum(c.program_bytes for c in r.collectives) == 1 * F32 + 12 * F32 == 52
    assert all(c.program_bytes == c.bytes and c.operand_dtype == "" for c in r.collectives)


def train_step(x, w):
    def loss(w):
        return jnp.mean((x @ w).astype(jnp.float32) ** 2)

    value, grad = jax.value_and_grad(loss)(w)
    return value, w - 0.1 * grad


@pytest.mark.slow
def test_a_combined_all_reduce_sums_each_part_in_its_own_dtype():
    # Batch rows sharded over `data`: the loss (an f32 scalar) and the gradient of the bf16
    # w[12, 24] are partial sums; the CPU combines both all-reduces into one tuple, moved as f32.
    r = analyze(train_step, TensorSpec("x", (6, 12), "bfloat16", ("data", None)),
                TensorSpec("w", (12, 24), "bfloat16"), mesh="data=3")
    parts = sorted(d for c in r.collectives for d in c.program_dtypes)
    assert parts == ["bfloat16", "float32"]
    assert sum(c.bytes for c in r.collectives) == 1 * F32 + 12 * 24 * F32 == 1156
    assert sum(c.program_bytes for c in r.collectives) == 1 * F32 + 12 * 24 * BF16 == 580


@pytest.mark.slow
@needs_libtpu
def test_on_a_tpu_the_program_dtype_is_the_one_moved():
    # The TPU compiler moves bf16 as bf16: nothing to undo, the optimized module says it.
    r = analyze(train_step, TensorSpec("x", (8, 16), "bfloat16", ("data", None)),
                TensorSpec("w", (16, 32), "bfloat16"), mesh="data=4", tpu_topology="v5e:2x2")
    assert r.collectives
    for c in r.collectives:
        assert c.program_bytes == c.bytes and c.operand_dtype == ""
    assert "bfloat16" in {d for c in r.collectives for d in c.program_dtypes}


# Hand-written modules for the matching rules. The unpromoted module has, in program order,
# an f32 scalar all-reduce (channel 1), two all-reduces of the same shape, one bf16 (channel 2)
# and one f32 (channel 3), and a bf16 all-gather (channel 4).
UNPROMOTED = """HloModule jit_f, num_partitions=4

ENTRY %main (a: f32[], b: bf16[4,4], c: f32[4,4], d: bf16[2,4]) -> f32[] {
  %a = f32[] parameter(0)
  %b = bf16[4,4]{1,0} parameter(1)
  %c = f32[4,4]{1,0} parameter(2)
  %d = bf16[2,4]{1,0} parameter(3)
  %all-reduce = f32[] all-reduce(%a), channel_id=1, replica_groups=[1,4]<=[4], to_apply=%add
  %all-reduce.1 = bf16[4,4]{1,0} all-reduce(%b), channel_id=2, replica_groups=[1,4]<=[4], to_apply=%add.bf16
  %all-reduce.2 = f32[4,4]{1,0} all-reduce(%c), channel_id=3, replica_groups=[1,4]<=[4], to_apply=%add
  %all-gather = bf16[8,4]{1,0} all-gather(%d), channel_id=4, replica_groups=[1,4]<=[4], dimensions={0}
  ROOT %r = f32[] add(%all-reduce, %all-reduce)
}
"""


def _optimized(body: str) -> str:
    return f"""HloModule jit_f, num_partitions=4

ENTRY %main (a: f32[], b: f32[4,4], c: f32[4,4], d: f32[2,4]) -> f32[] {{
  %a = f32[] parameter(0)
  %b = f32[4,4]{{1,0}} parameter(1)
  %c = f32[4,4]{{1,0}} parameter(2)
  %d = f32[2,4]{{1,0}} parameter(3)
{body}
  ROOT %r = f32[] add(%a, %a)
}}
"""


def _dtypes(optimized: str) -> dict[str, tuple[str, ...]]:
    return program_dtypes(collectives_of(parse_module(optimized)), parse_module(UNPROMOTED))


def test_a_renamed_collective_is_found_by_its_channel_id():
    # all-reduce-promotion renames all-reduce.1 to all-reduce.3 and keeps channel 2; the
    # all-gather keeps its name, channel 4.
    got = _dtypes(_optimized("""
  %all-reduce.3 = f32[4,4]{1,0} all-reduce(%b), channel_id=2, replica_groups=[1,4]<=[4], to_apply=%add
  %all-reduce.2 = f32[4,4]{1,0} all-reduce(%c), channel_id=3, replica_groups=[1,4]<=[4], to_apply=%add
  %all-gather = f32[8,4]{1,0} all-gather(%d), channel_id=4, replica_groups=[1,4]<=[4], dimensions={0}"""))
    assert got == {"all-reduce.3": ("bf16",), "all-reduce.2": ("f32",), "all-gather": ("bf16",)}


def test_combined_parts_take_the_dtypes_of_the_collectives_they_merge():
    # The combiner merged channels 1, 2 and 3 (keeping channel 1): parts f32[], bf16[4,4] and
    # f32[4,4] in program order, although parts 1 and 2 have the same shape.
    got = _dtypes(_optimized("""
  %all-reduce.9 = (f32[], f32[4,4]{1,0}, f32[4,4]{1,0}) all-reduce(%a, %b, %c), channel_id=1, replica_groups=[1,4]<=[4], to_apply=%add"""))
    assert got == {"all-reduce.9": ("f32", "bf16", "f32")}
    m = parse_mesh("data=4")
    [c] = read_collectives(parse_module(_optimized("""
  %all-reduce.9 = (f32[], f32[4,4]{1,0}, f32[4,4]{1,0}) all-reduce(%a, %b, %c), channel_id=1, replica_groups=[1,4]<=[4], to_apply=%add""")),
        m, unpromoted=parse_module(UNPROMOTED))
    assert c.program_dtypes == ("float32", "bfloat16", "float32")
    assert c.program_part_bytes == (4, 16 * BF16, 16 * F32)
    assert c.bytes == 4 + 16 * F32 * 2 and c.program_bytes == 4 + 32 + 64
    assert c.operand_dtype == "bfloat16"


def test_a_collective_the_unpromoted_module_lacks_keeps_its_dtype():
    # A collective made after the promotion (no channel, no shape to match) is not guessed.
    got = _dtypes(_optimized("""
  %all-reduce.7 = f32[16]{0} all-reduce(%b), channel_id=9, replica_groups=[1,4]<=[4], to_apply=%add"""))
    assert got == {"all-reduce.7": ("f32",)}


def test_without_an_unpromoted_module_the_optimized_dtypes_are_the_programs():
    optimized = parse_module(_optimized("""
  %all-reduce.1 = bf16[4,4]{1,0} all-reduce(%b), channel_id=2, replica_groups=[1,4]<=[4], to_apply=%add"""))
    assert program_dtypes(collectives_of(optimized), None) == {"all-reduce.1": ("bf16",)}
