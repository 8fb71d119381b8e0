"""The jax side of a compile (explorer.compile.backend), run in this test process on its 8 fake
CPU devices, and the Report built from its result."""

from dataclasses import replace

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec

from explorer import TensorSpec
from explorer.compile.backend import _hlo_sharding_text, compile_request
from explorer.report.build import build_report
from explorer.spec.mesh import parse_mesh


class _NoHloForm:
    """A sharding type jax cannot express as an XLA HloSharding."""

    def _to_xla_hlo_sharding(self, ndim):
        raise NotImplementedError("no HLO form")


def test_sharding_text_is_xla_s_or_none_never_a_guess():
    mesh = jax.make_mesh((2, 4), ("a", "b"))
    # Dim 0 split 2 ways over `a`, dim 1 whole; each tile replicated over the 4 devices of `b`.
    assert (_hlo_sharding_text(NamedSharding(mesh, PartitionSpec("a", None)), 2)
            == "{devices=[2,1,4]<=[8] last_tile_dim_replicate}")
    assert _hlo_sharding_text(_NoHloForm(), 2) is None


def test_an_unreadable_input_sharding_becomes_a_note_not_a_replicated_tensor():
    mesh = parse_mesh("d=8")
    x = TensorSpec("x", (16, 4), "float32", "d,None")
    result = compile_request(lambda x: jnp.sin(x), (x,), mesh, "shardy")
    assert result.inputs[0].sharding == "{devices=[8,1]<=[8]}"
    unread = replace(result, inputs=(result.inputs[0]._replace(sharding=None),))
    report = build_report(unread, mesh, "shardy")
    assert "x" not in {t.name for t in report.tensors}
    assert any("'x'" in n and "placement is not shown" in n for n in report.notes)
