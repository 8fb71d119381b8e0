"""Voila's serving options for the first result on a page load (explorer/_src/ui/serve.py)."""

import asyncio

import pytest

pytest.importorskip("voila")

from explorer._src.ui.serve import PoolSparingKernelManager, voila_command  # noqa: E402


def test_the_app_is_served_with_a_preheated_kernel_and_no_plotly_lab_extension():
    cmd = voila_command(8866)
    assert "--preheat_kernel=True" in cmd and "--pool_size=2" in cmd
    assert ("--VoilaConfiguration.multi_kernel_manager_class="
            "explorer._src.ui.serve.PoolSparingKernelManager") in cmd
    assert "--VoilaConfiguration.extension_denylist=jupyterlab-plotly" in cmd
    assert "--VoilaKernelManager.fill_delay=5" in cmd
    # The culler still stops idle page kernels, which hold compile workers.
    assert "--MappingKernelManager.cull_idle_timeout=600" in cmd
    plain = voila_command(8866, preheat=False)
    assert not [c for c in plain if "preheat" in c or "pool_size" in c]
    assert "--VoilaConfiguration.extension_denylist=jupyterlab-plotly" in plain


def test_the_culler_spares_the_preheated_kernel_and_culls_the_others():
    """A real kernel, idle past a zero timeout: kept while it waits in Voila's pool, culled
    once it has left the pool (served a page)."""

    async def scenario():
        km = PoolSparingKernelManager(cull_idle_timeout=0)
        kernel_id = await km.start_kernel(kernel_name="python3")
        try:
            km.get_kernel(kernel_id).last_activity = km.get_kernel(kernel_id).last_activity \
                .replace(year=2000)            # idle for long enough by any timeout
            pooled = asyncio.get_running_loop().create_future()
            pooled.set_result({"kernel_id": kernel_id})
            km._pools = {"app.ipynb": [pooled]}       # as Voila's factory subclass holds it
            await km.cull_kernel_if_idle(kernel_id)
            kept = kernel_id in km.list_kernel_ids()
            km._pools = {"app.ipynb": []}
            await km.cull_kernel_if_idle(kernel_id)
            culled = kernel_id not in km.list_kernel_ids()
        finally:
            if kernel_id in km.list_kernel_ids():
                await km.shutdown_kernel(kernel_id, now=True)
        return kept, culled

    assert asyncio.run(scenario()) == (True, True)
