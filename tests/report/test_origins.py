"""Why each tensor is laid out as it is, on programs written here whose origins are known by
construction: each input's spec, constraint, output sharding and shard_map is placed by hand,
and the sentence each dimension must get is worked out from it (not from the code under test).
Lines are found by the marker comments in this file."""

import glob
import json
import os
import tempfile

import pytest

import explorer
from explorer import OriginKind
from explorer import TensorSpec as T
from explorer._src.cli import main
from explorer._src.hlo.module import parse_module
from explorer._src.report.origins import GSPMD_NOTE, NOT_ASKED, read_origins
from explorer._src.report.why import Reason

HERE = os.path.abspath(__file__)
with open(HERE) as _f:
    _LINES = _f.read().splitlines()


def line_of(marker: str) -> int:
    hits = [i + 1 for i, text in enumerate(_LINES) if text.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1, marker
    return hits[0]


def made_at(report, marker: str, primitive: str):
    """The one intermediate that `primitive` at the marked line made."""
    line = line_of(marker)
    hits = [t for t in report.tensors if t.kind == "intermediate"
            and t.source.endswith(f":{line}") and t.op_name.rsplit("/", 1)[-1] == primitive]
    assert len(hits) == 1, (marker, primitive, [t.name for t in hits])
    return hits[0]


def steps(axis_origin) -> list[tuple[str, int]]:
    """The ops of an axis's path with their line numbers."""
    return [(s.op, int(s.source.rsplit(":", 1)[1])) for s in axis_origin.path]


# --- the programs -------------------------------------------------------------------------------

def chain(x, w):
    import jax.numpy as jnp

    h = x * x  # CHAIN_MUL
    h = jnp.tanh(h)  # CHAIN_TANH
    return h @ w  # CHAIN_DOT


def disagree(a, b, c):
    d = a + b  # DISAGREE_ADD
    return d * c  # DISAGREE_MUL


def constrained(x):
    import jax
    from jax.sharding import PartitionSpec as P

    y = x * x  # WSC_PRODUCER
    y = jax.lax.with_sharding_constraint(y, P(None, "data"))  # WSC_CONSTRAINT
    return y + 1


def plain_mesh():
    """A Mesh of the explored shape over this process's 8 fake CPU devices."""
    import jax
    import numpy as np
    from jax.sharding import Mesh

    return Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))


def pinned_output(x, w):
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    h = x @ w  # PINNED_DOT
    return jax.jit(jnp.tanh, out_shardings=P(None, "model"))(h)  # PINNED_JIT


def mapped(x, w):
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    y = jnp.tanh(x @ w)  # MAP_TANH
    return jax.shard_map(lambda a: a * 2, in_specs=P("data", None),  # MAP_CALL
                         out_specs=P("data", None))(y)


def scanned(x, ws):
    import jax
    import jax.numpy as jnp

    def layer(h, w):
        return jnp.tanh(h @ w), None  # SCAN_LAYER

    h, _ = jax.lax.scan(layer, x, ws)  # SCAN_CALL
    return h


MESH = "data=2,model=4"


# --- the origins --------------------------------------------------------------------------------

def test_a_chain_of_ops_carries_the_inputs_split_with_every_op_and_line_on_the_way():
    # x is split over `data` by rows; every op keeps its rows: x * x, tanh, then h @ w, whose
    # rows are x's. Nothing splits the columns (w is replicated).
    r = explorer.analyze(chain, T("x", (16, 64), spec="data,None"), T("w", (64, 32)),
                         mesh=MESH, origins=True)
    tanh = made_at(r, "CHAIN_TANH", "tanh")
    [origin] = tanh.origins.dims[0].axes
    assert (origin.axis, origin.kind, origin.name) == ("data", OriginKind.INPUT, "x")
    assert steps(origin) == [("mul", line_of("CHAIN_MUL")), ("tanh", line_of("CHAIN_TANH"))]
    assert tanh.origins.dims[1].axes == ()
    assert tanh.origins.dims[1].text == ("dim 1 whole: no input, output or sharding "
                                         "constraint splits it")
    out = r.tensor("out")
    assert out.origins.dims[0].text == (
        f"dim 0 split over `data` because input `x` is, through `mul` at line "
        f"{line_of('CHAIN_MUL')}, `tanh` at line {line_of('CHAIN_TANH')} and `dot_general` at "
        f"line {line_of('CHAIN_DOT')}")
    x = r.tensor("x")
    assert x.origins.dims[0].text == "dim 0 split over `data` because its spec asks"
    assert x.origins.dims[1].text == "dim 1 whole: its spec leaves it whole"
    assert r.tensor("w").origins.text == ("dim 0 whole: its spec leaves it whole\n"
                                          "dim 1 whole: its spec leaves it whole")


def test_two_inputs_that_disagree_on_a_dimension_are_a_conflict_the_later_user_settles():
    # a + b: a's rows are split over `data`, b's over `model`, so the add's operands disagree.
    # c (rows over `data`) multiplies the sum: Shardy carries c's `data` back to the add, whose
    # result keeps `data`; b is moved to match.
    r = explorer.analyze(disagree, T("a", (16, 32), spec="data,None"),
                         T("b", (16, 32), spec="model,None"),
                         T("c", (16, 32), spec="data,None"), mesh=MESH, origins=True)
    add = made_at(r, "DISAGREE_ADD", "add")
    [origin] = add.origins.dims[0].axes
    assert (origin.axis, origin.kind, origin.name) == ("data", OriginKind.INPUT, "c")
    assert steps(origin) == [("mul", line_of("DISAGREE_MUL"))]
    [conflict] = add.origins.conflicts
    assert conflict.dim == 0 and conflict.winner == "data"
    assert conflict.candidates == ("`data` from input `a`", "`model` from input `b`")
    # The collectives that move b name the two layouts that clashed.
    moved = [c for c in r.collectives if c.why.reason == Reason.RESHARD]
    assert moved
    for c in moved:
        assert ("The two layouts come from input `b` (`model` on its dim 0) and from input "
                "`c` (`data` on its dim 0).") in c.why.text
        assert c.why.evidence.origin_before == "input `b` (`model` on its dim 0)"


def test_operands_that_disagree_with_no_one_to_settle_it_leave_the_dimension_whole():
    def summed(a, b):
        import jax.numpy as jnp

        return jnp.tanh(a + b)

    r = explorer.analyze(summed, T("a", (16, 32), spec="data,None"),
                         T("b", (16, 32), spec="model,None"), mesh=MESH, origins=True)
    dim0 = r.tensor("out").origins.dims[0]
    assert dim0.axes == ()
    assert "`data` splits the matching dimension of input `a`" in dim0.dropped
    assert "there it meets `model` from input `b`, and neither wins" in dim0.dropped
    gathers = [c for c in r.collectives if c.kind == "all-gather"]
    assert {c.axes for c in gathers} == {("data",), ("model",)}
    for c in gathers:
        assert ("The layouts that clash there: `data` from input `a` and `model` from input "
                "`b`; neither won.") in c.why.text


def test_a_sharding_constraint_overrides_propagation_and_the_reshard_names_both_origins():
    # x's rows are split over `data`; the constraint asks for columns over `data`. Shardy
    # carries it back to x * x, whose rows then cannot keep `data` (an axis splits one
    # dimension): an all-to-all moves x from rows to columns.
    r = explorer.analyze(constrained, T("x", (16, 64), spec="data,None"), mesh="data=8",
                         origins=True)
    mul = made_at(r, "WSC_PRODUCER", "mul")
    [origin] = mul.origins.dims[1].axes
    assert (origin.kind, origin.name) == (OriginKind.CONSTRAINT, "")
    assert origin.source.endswith(f":{line_of('WSC_CONSTRAINT')}")
    assert mul.origins.dims[1].text == (f"dim 1 split over `data` because the sharding "
                                        f"constraint at line {line_of('WSC_CONSTRAINT')} asks")
    assert mul.origins.dims[0].dropped == (
        f"`data` splits the matching dimension of input `x` but stops at `mul` at line "
        f"{line_of('WSC_PRODUCER')}: `data` already splits dim 1 of this tensor, and an axis "
        "splits one dimension only")
    [c] = r.collectives
    assert c.kind == "all-to-all" and c.why.reason == Reason.RESHARD
    assert c.why.text.endswith(
        f"The two layouts come from input `x` (`data` on its dim 0) and from the sharding "
        f"constraint at line {line_of('WSC_CONSTRAINT')} (`data` on its dim 1).")


def test_an_output_sharding_propagates_backwards_through_the_ops_before_it():
    # x and w are replicated; the jit around tanh pins its result's columns over `model`.
    # Shardy carries that back to tanh's operand, the matmul.
    # jit's out_shardings as a PartitionSpec need the caller's mesh context, as in plain jax.
    import jax

    with jax.set_mesh(plain_mesh()):
        r = explorer.analyze(pinned_output, T("x", (16, 32)), T("w", (32, 64)), mesh=MESH,
                             origins=True)
    dot = made_at(r, "PINNED_DOT", "dot_general")
    [origin] = dot.origins.dims[1].axes
    assert (origin.axis, origin.kind, origin.name) == ("model", OriginKind.OUTPUT, "jit(tanh)")
    assert origin.source.endswith(f":{line_of('PINNED_JIT')}")
    assert steps(origin) == [("tanh", line_of("PINNED_JIT"))]
    assert dot.origins.dims[1].text == (
        f"dim 1 split over `model` because the out_shardings of `jit(tanh)` at line "
        f"{line_of('PINNED_JIT')} ask, through `tanh` at line {line_of('PINNED_JIT')}")


def _plain_jax_dump(fn, shapes, specs, out_spec):
    """Shardy's module after propagation and the propagated HLO of `fn` compiled by plain jax
    in this process (8 fake CPU devices) with jit's out_shardings."""
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))
    structs = [jax.ShapeDtypeStruct(s, np.float32, sharding=NamedSharding(mesh, PartitionSpec(*p)))
               for s, p in zip(shapes, specs, strict=True)]
    with tempfile.TemporaryDirectory() as dump:
        jax.jit(fn, out_shardings=NamedSharding(mesh, PartitionSpec(*out_spec))).lower(
            *structs).compile(compiler_options={
                "xla_dump_to": dump, "xla_dump_hlo_as_text": True,
                "xla_dump_hlo_pass_re": "spmd-partitioning|shardy-verbose"})
        [mlir] = glob.glob(os.path.join(dump, "shardy", "*", "02.after_propagation.mlir"))
        [hlo] = glob.glob(os.path.join(dump, "*before_spmd-partitioning.txt"))
        with open(mlir) as f, open(hlo) as g:
            return f.read(), parse_module(g.read())


def test_jits_own_output_sharding_is_the_origin_of_the_layout_before_it():
    def two_ops(x, w):
        import jax.numpy as jnp

        return jnp.tanh(x @ w)  # TOP_OUTPUT

    mlir, hlo = _plain_jax_dump(two_ops, [(16, 32), (32, 64)], [(None, None), (None, None)],
                                (None, "model"))
    origins = read_origins(mlir, hlo, ["x", "w"], ["out"])
    assert origins["out"].dims[1].text == ("dim 1 split over `model` because its output "
                                           "sharding asks")
    [dot] = [n for n in origins if n.startswith("dot")]
    [origin] = origins[dot].dims[1].axes
    assert (origin.kind, origin.name) == (OriginKind.OUTPUT, "out")
    assert origins[dot].dims[1].text == (f"dim 1 split over `model` because output `out`'s "
                                         f"sharding asks, through `tanh` at line "
                                         f"{line_of('TOP_OUTPUT')}")


def test_a_shard_map_input_is_the_origin_of_the_layout_that_feeds_it():
    # The shard_map takes its operand with rows over `data` and columns whole, so tanh's
    # result has that layout, and the matmul before it gets its rows from there; the columns
    # of the matmul are w's (over `model`), stopped at tanh by the in_specs.
    r = explorer.analyze(mapped, T("x", (16, 32)), T("w", (32, 64), spec="None,model"),
                         mesh=MESH, origins=True)
    tanh = made_at(r, "MAP_TANH", "tanh")
    [origin] = tanh.origins.dims[0].axes
    assert (origin.axis, origin.kind, origin.name) == ("data", OriginKind.SHARD_MAP,
                                                       "in_specs")
    assert origin.source.endswith(f":{line_of('MAP_CALL')}")
    assert tanh.origins.dims[1].text == (f"dim 1 whole: the shard_map's in_specs at line "
                                         f"{line_of('MAP_CALL')} ask it whole")
    dot = made_at(r, "MAP_TANH", "dot_general")
    rows, cols = dot.origins.dims
    assert [(o.axis, o.kind) for o in rows.axes] == [("data", OriginKind.SHARD_MAP)]
    assert steps(rows.axes[0]) == [("tanh", line_of("MAP_TANH"))]
    assert [(o.axis, o.kind, o.name) for o in cols.axes] == [("model", OriginKind.INPUT, "w")]
    assert steps(cols.axes[0]) == [("dot_general", line_of("MAP_TANH"))]


def test_a_scanned_layer_gets_its_rows_from_the_carry_and_its_columns_from_the_weights():
    # The carry starts as x (rows over `data`); each layer's weight is a slice of ws, whose
    # columns are split over `model`: the layer's matmul is rows over `data`, columns over
    # `model`, and so is the scan's result.
    r = explorer.analyze(scanned, T("x", (16, 32), spec="data,None"),
                         T("ws", (3, 32, 32), spec="None,None,model"), mesh=MESH, origins=True)
    dot = made_at(r, "SCAN_LAYER", "dot_general")
    rows, cols = dot.origins.dims
    assert [(o.axis, o.kind, o.name) for o in rows.axes] == [("data", OriginKind.INPUT, "x")]
    assert ("while", line_of("SCAN_CALL")) in steps(rows.axes[0])
    assert [(o.axis, o.kind, o.name) for o in cols.axes] == [("model", OriginKind.INPUT, "ws")]
    assert steps(cols.axes[0])[-1] == ("dot_general", line_of("SCAN_LAYER"))
    out = r.tensor("out")
    assert [[(o.axis, o.name) for o in d.axes] for d in out.origins.dims] == [
        [("data", "x")], [("model", "ws")]]


def test_under_gspmd_origins_are_not_available_and_the_report_says_so():
    r = explorer.analyze(chain, T("x", (16, 64), spec="data,None"), T("w", (64, 32)),
                         mesh=MESH, partitioner="gspmd", origins=True)
    assert GSPMD_NOTE in r.notes
    for t in r.tensors:
        assert t.origins.dims == () and t.origins.note == GSPMD_NOTE
        assert t.origins.text == GSPMD_NOTE


def test_origins_are_read_only_when_asked_and_the_note_says_how():
    r = explorer.analyze(chain, T("x", (16, 64), spec="data,None"), T("w", (64, 32)),
                         mesh=MESH)
    assert all(t.origins.dims == () and t.origins.note == NOT_ASKED for t in r.tensors)
    assert not [n for n in r.notes if "origins" in n]


def test_origins_are_in_the_json_with_their_sentences():
    r = explorer.analyze(chain, T("x", (16, 64), spec="data,None"), T("w", (64, 32)),
                         mesh=MESH, origins=True)
    [x] = [t for t in json.loads(json.dumps(r.to_dict()))["tensors"] if t["name"] == "x"]
    assert x["origins"]["text"] == ("dim 0 split over `data` because its spec asks\n"
                                    "dim 1 whole: its spec leaves it whole")
    assert x["origins"]["dims"][0]["axes"][0]["kind"] == "input"


def test_the_cli_says_why_a_tensor_is_laid_out_so(capsys):
    # The Megatron MLP: w1 (1024 x 4096) is split by columns over `model`, by its spec.
    assert main(["analyze", "--workload", "mlp", "--mesh", MESH, "--preset", "megatron",
                 "--why-layout", "w1"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "w1: None,model [1024, 4096] (input)",
        "  dim 0 whole: its spec leaves it whole",
        "  dim 1 split over `model` because its spec asks",
    ]


def test_the_cli_refuses_a_tensor_the_report_does_not_have(capsys):
    assert main(["analyze", "--workload", "mlp", "--mesh", MESH, "--preset", "megatron",
                 "--why-layout", "w9"]) == 2
    err = capsys.readouterr().err
    assert "no tensor named 'w9'" in err and "'w1'" in err


@pytest.mark.parametrize("text", ["", "module {\n}\n"])
def test_a_module_with_no_entry_function_is_said_and_leaves_origins_out(text):
    from explorer._src.report.origins import origins_by_tensor

    hlo = parse_module("HloModule m\n\nENTRY %main (p: f32[2]) -> f32[2] {\n"
                       "  ROOT %p = f32[2]{0} parameter(0)\n}\n")
    found, missing, notes = origins_by_tensor(text, hlo, "shardy", ["p"], ["out"])
    assert found == {} and missing.dims == ()
    assert len(notes) == 1 and notes[0].startswith("origins are not known")
