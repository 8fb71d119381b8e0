"""The readers on hand-written HLO text: async pairs, combined collectives, permutes, sources."""

from explorer._src.hlo.module import parse_module
from explorer._src.report.build import read_collectives
from explorer._src.spec.mesh import parse_mesh

MESH = parse_mesh("data=2,model=4")

# A module in the shape XLA prints for TPU/GPU, written by hand: an async all-gather pair, an
# async-wrapped reduce-scatter, a combined all-reduce of two tensors, and a permute.
HLO = """HloModule jit_f, num_partitions=8

FileNames
1 "/home/u/model.py"

FunctionNames
1 "f"

FileLocations
1 {file_name_id=1 function_name_id=1 line=42 end_line=42 column=1 end_column=9}

StackFrames
1 {file_location_id=1 parent_frame_id=1}

%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(%x, %y)
}

%wrapped_reduce_scatter (p: bf16[64,128]) -> bf16[16,128] {
  %p = bf16[64,128]{1,0} parameter(0)
  ROOT %rs = bf16[16,128]{1,0} reduce-scatter(%p), channel_id=3, replica_groups=[2,4]<=[8], dimensions={0}, to_apply=%add
}

ENTRY %main (a: f32[32,128], b: f32[256,128], c: bf16[64,128]) -> f32[128,128] {
  %a = f32[32,128]{1,0} parameter(0), metadata={op_name="a"}
  %b = f32[256,128]{1,0} parameter(1)
  %c = bf16[64,128]{1,0} parameter(2)
  %ags = (f32[32,128]{1,0}, f32[128,128]{1,0}) all-gather-start(%a), channel_id=1, replica_groups={{0,1,2,3},{4,5,6,7}}, dimensions={0}, use_global_device_ids=true, metadata={op_name="jit(f)/dot_general" stack_frame_id=1}
  %agd = f32[128,128]{1,0} all-gather-done(%ags)
  %ar = (f32[32,128]{1,0}, /*index=1*/f32[256,128]{1,0}) all-reduce(%a, %b), channel_id=2, replica_groups=[4,2]<=[2,4]T(1,0), use_global_device_ids=true, to_apply=%add
  %rss = ((bf16[64,128]{1,0}), bf16[16,128]{1,0}) async-start(%c), calls=%wrapped_reduce_scatter
  %rsd = bf16[16,128]{1,0} async-done(%rss)
  %cp = f32[32,128]{1,0} collective-permute(%a), channel_id=4, source_target_pairs={{0,1},{1,2},{2,3},{3,0},{4,5},{5,6},{6,7},{7,4}}
  ROOT %out = f32[128,128]{1,0} add(%agd, %agd)
}
"""


def test_async_pair_counts_once_with_the_result_of_done():
    cs = read_collectives(parse_module(HLO), MESH)
    [ag] = [c for c in cs if c.kind == "all-gather"]
    assert ag.is_async and ag.shape == (128, 128) and ag.axes == ("model",)
    assert ag.bytes == 128 * 128 * 4   # the gathered result is larger than the 32×128 operand
    assert ag.source == "/home/u/model.py:42" and ag.op_name == "jit(f)/dot_general"


def test_combined_all_reduce_counts_once_with_summed_bytes():
    cs = read_collectives(parse_module(HLO), MESH)
    [ar] = [c for c in cs if c.kind == "all-reduce"]
    # [4,2]<=[2,4]T(1,0) = {{0,4},{1,5},{2,6},{3,7}}: the data axis.
    assert ar.axes == ("data",) and ar.group_size == 2 and ar.parts == 2
    assert ar.bytes == (32 * 128 + 256 * 128) * 4


def test_async_wrapped_reduce_scatter_is_async_over_model():
    cs = read_collectives(parse_module(HLO), MESH)
    [rs] = [c for c in cs if c.kind == "reduce-scatter"]
    assert rs.is_async and rs.axes == ("model",) and rs.dtype == "bfloat16"
    assert rs.bytes == 64 * 128 * 2    # V is the larger operand


def test_ring_permute_runs_over_model():
    cs = read_collectives(parse_module(HLO), MESH)
    [cp] = [c for c in cs if c.kind == "collective-permute"]
    # Pairs (0,1),(1,2),... change only the model coordinate; two rings of 4.
    assert cp.axes == ("model",) and cp.group_size == 4
    assert set(map(frozenset, cp.groups)) == {frozenset(range(4)), frozenset(range(4, 8))}
    assert len(cs) == 4


def test_a_truncated_instruction_line_is_skipped_not_misread():
    from explorer._src.hlo.module import parse_instruction

    assert parse_instruction("  %ar = f32[8]{0} all-reduce(%a, %b") is None
    full = parse_instruction("  %ar = f32[8]{0} all-reduce(%a, %b), channel_id=1")
    assert full.operands == ("a", "b") and full.attrs == "channel_id=1"


def test_source_text_is_the_line_read_from_the_absolute_path(tmp_path):
    # The compiler records the absolute path; the line is read from there (in this process),
    # while `source` shows the path shortened.
    src = tmp_path / "model.py"
    src.write_text("".join(f"# line {i}\n" for i in range(1, 42))
                   + "    y = jnp.einsum('bd,df->bf', x, w)   \n")
    text = HLO.replace('"/home/u/model.py"', f'"{src}"')
    cs = read_collectives(parse_module(text), MESH)
    [ag] = [c for c in cs if c.kind == "all-gather"]
    assert ag.source.endswith("model.py:42")
    assert ag.source_text == "y = jnp.einsum('bd,df->bf', x, w)"
    # Collectives with no source location, or a file that cannot be read, carry no text.
    [ar] = [c for c in cs if c.kind == "all-reduce"]
    assert (ar.source, ar.source_text) == ("", "")
    [ag_missing] = [c for c in read_collectives(parse_module(HLO), MESH)
                    if c.kind == "all-gather"]
    assert ag_missing.source == "/home/u/model.py:42" and ag_missing.source_text == ""


def test_intermediates_carry_their_source_text(tmp_path):
    from explorer._src.report.build import read_intermediates

    src = tmp_path / "f.py"
    src.write_text("def f(x):\n    return x * 2\n")
    propagated = f"""HloModule m, num_partitions=8

FileNames
1 "{src}"

FunctionNames
1 "f"

FileLocations
1 {{file_name_id=1 function_name_id=1 line=2 end_line=2 column=1 end_column=9}}

StackFrames
1 {{file_location_id=1 parent_frame_id=1}}

ENTRY %main (x: f32[8,4]) -> f32[8,4] {{
  %x = f32[8,4]{{1,0}} parameter(0), sharding={{devices=[2,1,4]<=[8] last_tile_dim_replicate}}
  %two = f32[8,4]{{1,0}} broadcast(f32[] %c), dimensions={{}}, sharding={{replicated}}
  %mul = f32[8,4]{{1,0}} multiply(%x, %two), sharding={{devices=[2,1,4]<=[8] \
last_tile_dim_replicate}}, metadata={{op_name="jit(f)/mul" stack_frame_id=1}}
  ROOT %out = f32[8,4]{{1,0}} copy(%mul), sharding={{replicated}}
}}
"""
    tensors = {t.name: t for t in read_intermediates(parse_module(propagated), MESH)}
    assert tensors["mul"].source_text == "return x * 2"
    assert tensors["two"].source_text == ""
