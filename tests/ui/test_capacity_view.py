"""The Suggest tab's largest-batch search: the table on a result built by hand, what it refuses
before any compile, and a search on 8 H100s run from the app, each probe's memory verdict the
GPU compiler's, checked against explorer.largest_batch called directly."""

import html

import pytest

pytest.importorskip("ipywidgets")

import explorer  # noqa: E402
from explorer._src.compile.gpu import gpu_plugin_installed  # noqa: E402
from explorer._src.layout_search.capacity import BatchProbe, CapacityResult, PolicyCapacity  # noqa: E402
from explorer._src.ui.capacity import capacity_html  # noqa: E402
from explorer.ui import Explorer, explore  # noqa: E402

GB = 10 ** 9


def test_the_table_marks_the_best_policy_and_lists_every_probes_verdict():
    fits = BatchProbe(64, True, 70 * GB, 0, "uses 70 GB of 80 GB HBM per H100 SXM (88%): fits",
                      0.5)
    over = BatchProbe(72, False, 85 * GB, 0, "needs 85 GB per device but ...: does not fit", 0.6)
    none = PolicyCapacity("none", "none", None, None, None, (BatchProbe(8, False, 90 * GB, 0,
                                                                         "too big", None),))
    full = PolicyCapacity("full", "none", 64, 0.5, 64 * 1024 / 0.5, (fits, over))
    text = capacity_html(CapacityResult("transformer_train", "data=8", "h100-8", 8,
                                        (none, full), full, compiled_by="compiled for 8 × H100"))
    assert "remat=full ★ best" in text and "none fits" in text
    assert "batch 64: <span class='explorer-fits'>fits</span>" in text
    assert "batch 72: <span class='explorer-oom'>does not fit</span>" in text
    assert "131,072" in text            # 64 · 1024 tokens / 0.5 s
    assert "compiled for 8 × H100" in text and "multiples of 8" in text


@pytest.mark.slow
def test_a_users_function_or_no_target_is_refused_in_the_tab():
    def f(x):
        return x * 2

    app = explore(f, explorer.TensorSpec("x", (8, 8)), mesh="data=8", debounce=None)
    try:
        app.capacity.start_w.click()
        assert "built-in training workload" in app.capacity.error
    finally:
        app.close()
    app = Explorer("transformer_train", mesh="data=8", debounce=None)
    try:
        app.capacity.start_w.click()
        assert "pick a target" in app.capacity.error
    finally:
        app.close()


SMALL = {"layers": 2, "d_model": 512, "heads": 8, "d_head": 64, "d_ff": 2048, "seq": 1024,
         "vocab": 8192, "dtype": "bfloat16"}


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.skipif(not gpu_plugin_installed(), reason="the gpu extra is not installed")
def test_from_the_app_the_gpu_compilers_verdicts_give_the_apis_answer():
    app = Explorer("transformer_train", mesh="data=8", target="h100-8", params=SMALL,
                   preset="fsdp", debounce=None)
    try:
        view = app.capacity
        view.remat_w["minimal"].value = view.remat_w["full"].value = False
        view.strategy_w.value = False
        view.start_w.click()
        assert view.wait(1500)
        assert view.error is None, view.error
        expected = explorer.largest_batch("transformer_train", "data=8", "h100-8", SMALL,
                                          remats=("none",), strategy=False)
        got = view.result.policies[0]
        assert got.largest_batch == expected.policies[0].largest_batch
        assert "XLA's GPU compiler" in html.unescape(view.table.value)
        assert f"batch {got.largest_batch}: <span class='explorer-fits'>fits" in view.table.value
        assert (f"batch {got.largest_batch + 8}: <span class='explorer-oom'>does not fit"
                in view.table.value)
    finally:
        app.close()
