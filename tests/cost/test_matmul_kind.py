"""The kind of a matmul whose left operand is a boolean one-hot mask fused into it: libtpu writes
`one_hot(ids) @ table` (an embedding lookup as a matmul) as a convolution of a `pred` mask by
the bf16 table, and the matrix unit multiplies the mask widened to bf16. Found by
benchmarks/kind_census.py on a Llama-style train step, where it was the largest kind never
measured ("matmul pred", 4% of the step, may take 34x)."""

from __future__ import annotations

from explorer._src.cost.coverage import instruction_kind
from explorer._src.hlo.schedule import read_schedule

ONE_HOT_CONV = """HloModule m, is_scheduled=true

%one_hot (p0: s32[], p1: s32[8,256]) -> pred[8,256,1024] {
  %p0 = s32[] parameter(0)
  %p1 = s32[8,256]{1,0} parameter(1)
  %iota = s32[8,256,1024]{2,1,0} iota(), iota_dimension=2
  %b = s32[8,256,1024]{2,1,0} broadcast(s32[8,256]{1,0} %p1), dimensions={0,1}
  ROOT %eq = pred[8,256,1024]{2,1,0} compare(s32[8,256,1024]{2,1,0} %b, s32[8,256,1024]{2,1,0} %iota), direction=EQ
}

%fused (q0: s32[], q1: s32[8,256], q2: bf16[1024,512]) -> bf16[8,256,512] {
  %q0 = s32[] parameter(0)
  %q1 = s32[8,256]{1,0} parameter(1)
  %mask = pred[8,256,1024]{2,1,0} fusion(s32[] %q0, s32[8,256]{1,0} %q1), kind=kLoop, calls=%one_hot
  %q2 = bf16[1024,512]{1,0} parameter(2)
  %r = bf16[1024,512,1]{1,0,2} reshape(bf16[1024,512]{1,0} %q2)
  ROOT %conv = bf16[8,256,512]{2,1,0} convolution(pred[8,256,1024]{2,1,0} %mask, bf16[1024,512,1]{1,0,2} %r), window={size=1}, dim_labels=0bf_io0->0bf
}

ENTRY %main (i: s32[], ids: s32[8,256], table: bf16[1024,512]) -> bf16[8,256,512] {
  %i = s32[] parameter(0)
  %ids = s32[8,256]{1,0} parameter(1)
  %table = bf16[1024,512]{1,0} parameter(2)
  ROOT %fusion.1 = bf16[8,256,512]{2,1,0} fusion(s32[] %i, s32[8,256]{1,0} %ids, bf16[1024,512]{1,0} %table), kind=kOutput, calls=%fused
}
"""  # noqa: E501

PRED_DOT = """HloModule m, is_scheduled=true

ENTRY %main (m: pred[256,1024], t: bf16[1024,512]) -> bf16[256,512] {
  %m = pred[256,1024]{1,0} parameter(0)
  %t = bf16[1024,512]{1,0} parameter(1)
  ROOT %dot.1 = bf16[256,512]{1,0} dot(pred[256,1024]{1,0} %m, bf16[1024,512]{1,0} %t), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""  # noqa: E501


def _kinds(text: str) -> list[str]:
    schedule = read_schedule(text)
    return [instruction_kind(s, schedule.module) for s in schedule.steps
            if s.instr.opcode in ("fusion", "dot", "convolution")]


def test_a_one_hot_mask_fused_into_a_matmul_is_a_matmul_in_the_tables_dtype():
    assert _kinds(ONE_HOT_CONV) == ["matmul bf16"]
    assert _kinds(PRED_DOT) == ["matmul bf16"]
