# ruff: noqa: E501 (an HLO line is kept verbatim)
"""The FLOPs of a batched matmul written as a base-dilated convolution, as the TPU compiler
writes attention's q·k (seen in an ahead-of-time compile of transformer_train for v5p:4x4x4)."""

from explorer.hlo.schedule import read_schedule

# q·k of attention, [b=4, s=16, h=2, k=8] x [b, t=16, h, k] -> [b, h, s, t]: the batch dims b
# and h are spatial dims of a window of their size, with lhs_dilate of the same size, so each
# output meets one real input position of the window.
BATCHED = """HloModule jit_tpu, is_scheduled=true, num_partitions=1

ENTRY %main (q: bf16[4,16,2,8], k: bf16[4,16,2,8]) -> bf16[4,2,16,16] {
  %q = bf16[4,16,2,8]{3,2,1,0} parameter(0)
  %k = bf16[4,16,2,8]{3,2,1,0} parameter(1)
  ROOT %s = bf16[4,2,16,16]{3,2,1,0} convolution(%q, %k), window={size=4x2 stride=3x1 lhs_dilate=4x2}, dim_labels=0b1f_0o1i->01bf
}
"""


def test_base_dilated_convolution_counts_one_tap_per_window():
    [step] = [s for s in read_schedule(BATCHED).steps if s.instr.name == "s"]
    # 2·b·h·s·t·k = 2·4·2·16·16·8, not that times the window's 4·2 positions.
    assert step.flops == 2 * 4 * 2 * 16 * 16 * 8
