"""Collectives of a multi-node GPU target that cross nodes: Collective.crosses_nodes, set when a
Report is priced on the target (explorer/_src/report/predict.py), the CLI table's " [across nodes]"
mark and its legend, and the app's Collectives table.

h100-8x8 is 8 nodes of 8 H100s. On `data=8,model=8` the default mapping puts model on a node's
8 GPUs and data on the nodes, so mesh position p = 8·data + model is on node p // 8. The
expectations below are worked out from that node membership, group by group, not by the code."""

from itertools import product

import pytest

from explorer._src.report.predict import with_target
from explorer._src.report.report import Collective, Cost, Report, Timing
from explorer._src.report.summary import collectives_table, marks_legend, summary
from explorer._src.spec.mesh import parse_mesh

MESH = parse_mesh("data=8,model=8")
GPUS_PER_NODE = 8
MiB = 2**20


def _node(p: int) -> int:
    return p // GPUS_PER_NODE


def _spans_nodes(groups) -> bool:
    return any(len({_node(p) for p in g}) > 1 for g in groups)


OVER_MODEL = tuple(tuple(8 * d + m for m in range(8)) for d in range(8))     # one node each
OVER_DATA = tuple(tuple(8 * d + m for d in range(8)) for m in range(8))      # 8 nodes each
OVER_BOTH = (tuple(range(64)),)
# Parts of an axis the compiler split off (no whole axis, axes ()): pairs of GPUs in a node,
# and pairs of nodes.
PART_OF_MODEL = tuple((8 * d + m, 8 * d + m + 1) for d, m in product(range(8), range(0, 8, 2)))
PART_OF_DATA = tuple((8 * d + m, 8 * (d + 1) + m) for d, m in product(range(0, 8, 2), range(8)))


def _collective(axes, groups, name):
    return Collective("all-gather", axes, len(groups[0]), (1024, 1024), "float32", 4 * MiB,
                      hlo_name=name, groups=groups)


COLLECTIVES = (_collective(("model",), OVER_MODEL, "ag.model"),
               _collective(("data",), OVER_DATA, "ag.data"),
               _collective(("data", "model"), OVER_BOTH, "ag.both"),
               _collective((), PART_OF_MODEL, "ag.part_model"),
               _collective((), PART_OF_DATA, "ag.part_data"))


def _report(target="h100-8x8", mapping=None) -> Report:
    r = Report(MESH, "shardy", "gpu", COLLECTIVES, (), None, Cost(1e9, MiB, None, 0),
               Timing(0.0, 0.0))
    return with_target(r, target, mapping)


def test_a_collective_is_marked_where_its_groups_span_more_than_one_node():
    r = _report()
    assert [c.crosses_nodes for c in r.collectives] == [
        _spans_nodes(c.groups) for c in COLLECTIVES]
    assert [c.crosses_nodes for c in r.collectives] == [False, True, True, False, True]


def test_the_mark_agrees_with_the_links_the_prediction_prices():
    r = _report()
    for c, t in zip(r.collectives, r.estimate.collectives, strict=True):
        assert c.crosses_nodes == ("InfiniBand" in t.links)


def test_the_mark_follows_the_axis_mapping():
    # model on the nodes, data inside each: now the collectives over model cross nodes.
    r = _report(mapping="model=node,data=gpu")
    assert [c.crosses_nodes for c in r.collectives] == [True, False, True, True, False]


@pytest.mark.parametrize("target", ["h100-8", "tpu-v5e-8x8", "cpu"])
def test_nothing_is_marked_on_one_node_or_on_other_machines(target):
    mesh = MESH if target != "h100-8" else parse_mesh("data=2,model=4")
    c = _collective(("data",), ((0, 4), (1, 5), (2, 6), (3, 7)), "ag") if target == "h100-8" \
        else COLLECTIVES[1]
    r = with_target(Report(mesh, "shardy", "gpu", (c,), (), None, Cost(1e9, MiB, None, 0),
                           Timing(0.0, 0.0)), target)
    assert not r.collectives[0].crosses_nodes
    assert marks_legend(r) == []


def test_the_cli_table_marks_them_and_says_what_the_mark_means():
    r = _report()
    rows = collectives_table(r)
    marked = [row.split()[0] for row in rows[1:] if "[across nodes]" in row]
    assert marked == ["2", "3", "5"]
    legend = ("[across nodes]: its device groups span more than one node of h100-8x8, so it "
              "runs over InfiniBand, the network between nodes, not NVLink alone.")
    assert marks_legend(r) == [legend]
    assert legend in summary(r).splitlines()


def test_the_mark_is_in_the_reports_data():
    d = _report().to_dict()
    assert [c["crosses_nodes"] for c in d["collectives"]] == [False, True, True, False, True]


def test_the_apps_collectives_table_marks_them_with_the_legend():
    import re

    from explorer._src.ui.views import collectives_html

    table = collectives_html(_report())
    kinds = re.findall(r"<td class='explorer-kind'>([^<]*)</td>", table)
    assert [k.endswith("[across nodes]") for k in kinds] == [False, True, True, False, True]
    assert "[across nodes]: its device groups span more than one node of h100-8x8" in table
