# ruff: noqa: E501 (an HLO line is kept verbatim)
"""The schedule reader's counts on instructions seen in real compiles of scanned training steps:
batched matmuls as the TPU compiler writes them, and in-place updates of a stacked buffer."""

from explorer._src.hlo.schedule import read_schedule

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


# A weight gradient inside a TPU windowed-einsum loop, scaled down from the same compile:
# x [b=4, s=16, 2, d=5, 1] and dy [b, s, h=8, k=6, 1] -> dW [2, d, h, k, 1], contracting b and s.
# Spatial dim 1 has an input of size 1 padded by 7 on each side under a window of 8: each of
# its 8 outputs (one per head) meets the one real element once.
PADDED = """HloModule jit_tpu, is_scheduled=true, num_partitions=1

ENTRY %main (x: bf16[4,16,2,5,1], dy: bf16[4,16,8,6,1]) -> bf16[2,5,8,6,1] {
  %x = bf16[4,16,2,5,1]{4,3,2,1,0} parameter(0)
  %dy = bf16[4,16,8,6,1]{4,3,2,1,0} parameter(1)
  ROOT %w = bf16[2,5,8,6,1]{4,3,2,1,0} convolution(%x, %dy), window={size=1x8x4 pad=0_0x7_7x0_0 rhs_reversal=0x1x0}, dim_labels=2f0b1_2i1o0->0b1f2
}
"""


def test_padded_window_counts_only_the_taps_on_real_input():
    [step] = [s for s in read_schedule(PADDED).steps if s.instr.name == "w"]
    # 2·(2·5·8·6) outputs · 16 (s, the input features) · 4 (b, a full window), not ·8 more.
    assert step.flops == 2 * (2 * 5 * 8 * 6) * 16 * 4


# A scan body writing one layer's activation into the stack kept for the backward pass, as the
# CPU backend prints it for bfloat16 (converts around the dynamic-update-slice).
IN_PLACE = """HloModule jit_cpu, is_scheduled=true, num_partitions=1

%stack_layer (i: s32[], stack: bf16[6,128,512], layer: bf16[128,512]) -> bf16[6,128,512] {
  %stack = bf16[6,128,512]{2,1,0} parameter(1)
  %wide = f32[6,128,512]{2,1,0} convert(%stack)
  %layer = bf16[128,512]{1,0} parameter(2)
  %wide.layer = f32[128,512]{1,0} convert(%layer)
  %one = f32[1,128,512]{2,1,0} bitcast(%wide.layer)
  %i = s32[] parameter(0)
  %z = s32[] constant(0)
  %put = f32[6,128,512]{2,1,0} dynamic-update-slice(%wide, %one, %i, %z, %z)
  ROOT %narrow = bf16[6,128,512]{2,1,0} convert(%put)
}

ENTRY %main (i: s32[], stack: bf16[6,128,512], layer: bf16[128,512]) -> bf16[6,128,512] {
  %pi = s32[] parameter(0)
  %ps = bf16[6,128,512]{2,1,0} parameter(1)
  %pl = bf16[128,512]{1,0} parameter(2)
  ROOT %w = bf16[6,128,512]{2,1,0} fusion(%pi, %ps, %pl), kind=kLoop, calls=%stack_layer
}
"""


def test_an_in_place_update_of_a_stack_counts_the_update_not_the_stack():
    [step] = [s for s in read_schedule(IN_PLACE).steps if s.instr.name == "w"]
    # The index (4 bytes), the layer read (128·512·2) and that layer written into the stack
    # (1/6 of 6·128·512·2); the stack is neither read nor written whole.
    assert step.bytes == 4 + 128 * 512 * 2 + 128 * 512 * 2


# The forward loop of a scan as the TPU compiler wrote it for MaxText 16B on v5e:16x16: the
# counter is copied before the increment, `i' = copy(i) + 1`.
COPIED_COUNTER = """HloModule jit_tpu, is_scheduled=true, num_partitions=1

%body (p: (s32[], f32[8])) -> (s32[], f32[8]) {
  %p = (s32[], f32[8]) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %i.copy = s32[] copy(%i)
  %one = s32[] constant(1)
  %next = s32[] add(%i.copy, %one)
  %x = f32[8]{0} get-tuple-element(%p), index=1
  ROOT %t = (s32[], f32[8]) tuple(%next, %x)
}

%cond (q: (s32[], f32[8])) -> pred[] {
  %q = (s32[], f32[8]) parameter(0)
  %n = s32[] constant(32)
  %j = s32[] get-tuple-element(%q), index=0
  ROOT %lt = pred[] compare(%j, %n), direction=LT
}

ENTRY %main (x: f32[8]) -> (s32[], f32[8]) {
  %zero = s32[] constant(0)
  %start = s32[] copy(%zero)
  %px = f32[8]{0} parameter(0)
  %init = (s32[], f32[8]) tuple(%start, %px)
  ROOT %loop = (s32[], f32[8]) while(%init), condition=%cond, body=%body
}
"""


def test_a_loop_counter_copied_before_its_increment_still_gives_the_trip_count():
    [loop] = [s for s in read_schedule(COPIED_COUNTER).steps if s.instr.name == "loop"]
    assert loop.trips == 32
