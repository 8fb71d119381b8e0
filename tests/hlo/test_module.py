"""The HLO module reader on captured text: instructions, integer lists, called computations."""

from explorer._src.hlo.module import ints, parse_instruction, parse_module

_MODULE = """HloModule m, entry_computation_layout={(f32[8,4]{1,0})->f32[8,4]{1,0}}

%fused_add (p0: f32[8,4]) -> f32[8,4] {
  %p0 = f32[8,4]{1,0} parameter(0)
  ROOT %add.1 = f32[8,4]{1,0} add(%p0, %p0)
}

ENTRY %main (x: f32[8,4]) -> f32[8,4] {
  %x = f32[8,4]{1,0} parameter(0), metadata={op_name="x"}
  ROOT %fusion = f32[8,4]{1,0} fusion(%x), kind=kLoop, calls=%fused_add, FUSION_METADATA
}
""".replace("FUSION_METADATA", 'metadata={op_name="jit(f)/add" stack_frame_id=3}')


def test_ints_reads_every_integer_with_its_sign():
    assert ints("{1,-2, 3}") == (1, -2, 3)
    assert ints("32x8") == (32, 8)
    assert ints(None) == ()
    assert ints("") == ()


def test_a_fusion_names_the_computation_it_calls_and_the_module_returns_its_body():
    module = parse_module(_MODULE)
    fusion = module.by_name()["fusion"]
    assert fusion.callee() == "fused_add"
    assert [i.name for i in module.called(fusion)] == ["p0", "add.1"]


def test_an_instruction_without_the_key_calls_nothing():
    x = parse_module(_MODULE).by_name()["x"]
    assert x.callee() == "" and x.callee("body", "to_apply") == ""
    assert parse_module(_MODULE).called(x) == []


def test_callee_takes_the_first_key_present():
    i = parse_instruction("  %r = f32[] reduce(%a, %b), dimensions={0}, to_apply=%sum")
    assert i.callee("calls", "to_apply") == "sum"


def test_parsed_parts_are_read_once_and_kept():
    i = parse_instruction('  %t = (f32[8,4]{1,0}, bf16[2]) tuple(%a, %b), '
                          'metadata={op_name="jit(f)/t" stack_frame_id=7}')
    assert i.operands == ("a", "b") and i.operands is i.operands
    assert [a.text() for a in i.arrays] == ["f32[8,4]", "bf16[2]"] and i.arrays is i.arrays
    assert i.op_name == "jit(f)/t" and i.stack_frame_id == 7
