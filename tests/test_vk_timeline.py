"""Host waits on Vulkan timeline semaphores (portable/runtime_vk/timeline.py)."""

from __future__ import annotations

import threading
import time

import pytest

from portable.devices import open_device
from portable.errors import DeviceLost


def test_a_polling_wait_blocks_in_slices_and_still_times_out(device):
    """After polling, timeline.wait blocks in the driver at most WAIT_SLICE_NS at a time: it returns once the
    value is reached (signalled from the host here, mid-wait) and raises DeviceLost at its deadline."""
    live = open_device(device)
    if live.info.api != "vulkan":
        pytest.skip("timeline semaphores are Vulkan's")
    from portable.runtime_vk import timeline
    from portable.runtime_vk._vk import new_struct, vk

    dev = live.backend._own.device.handle
    sem = timeline.create(dev)
    try:
        t0 = time.perf_counter()
        with pytest.raises(DeviceLost, match="did not finish"):
            timeline.wait(dev, sem, 1, 3 * timeline.WAIT_SLICE_NS, "a test wait", spin_s=1e-4)
        assert 3 * timeline.WAIT_SLICE_NS * 1e-9 <= time.perf_counter() - t0 < 5.0

        def signal():
            time.sleep(0.02)  # a hundred slices into the wait
            info = new_struct("VkSemaphoreSignalInfo", vk.VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO, semaphore=sem,
                              value=1)
            timeline.check(vk.lib.vkSignalSemaphore(dev, info), "vkSignalSemaphore")

        th = threading.Thread(target=signal)
        th.start()
        timeline.wait(dev, sem, 1, 10**10, "a test wait", spin_s=1e-4)
        th.join()
        assert timeline.value(dev, sem) == 1
    finally:
        vk.vkDestroySemaphore(dev, sem, None)
