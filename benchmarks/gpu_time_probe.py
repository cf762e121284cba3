"""Kernel time on the device's own clock for the workloads of a `portable bench --export` directory.

    python benchmarks/gpu_time_probe.py DIR --device vulkan:0 --out probe.json    # GPU host, no MLIR needed

The bench times the host's wall clock around a submission (and around 20 plans in one submission). This
separates what the kernels take from what surrounds them, per workload:
- Vulkan: timestamp queries (vkCmdWriteTimestamp) before and after the plan repeated N times in one command
  buffer, once with the barriers the plan needs between repeats and once with none between repeats (the
  repeats then may overlap: the difference is what the barriers cost);
- OpenCL: profiling events on an in-order queue: the first START to the last END over N repeats, and the
  sum of the kernels' own START..END.
Inputs are the bench's own (same seeds); outputs are not checked here (the bench does).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

REPEATS = 20
SETTLE_S = 1.0  # keep the GPU busy this long before the timed runs (it runs slower for its first ~0.3 s of load)


def _bind(exe, backend, inputs):
    kernels = [backend.load_kernel(k) for k in exe.kernels]
    bufs = {s.id: backend.allocate(max(int(s.nbytes), 4)) for s in exe.slots}
    for sid, data in exe.constants.items():
        backend.upload(bufs[sid], np.ascontiguousarray(data))
    for sid, arr in zip(exe.input_slots, inputs):
        if arr.nbytes:
            backend.upload(bufs[sid], np.ascontiguousarray(arr))
    plan = [(kernels[d.kernel], tuple(bufs[s] for s in d.slots), tuple(int(g) for g in d.grid),
             tuple(d.push_constants)) for d in exe.dispatches]
    return plan, list(bufs.values())


def _vulkan_times(backend, plan, repeats: int, barriers_between: bool) -> list[float]:
    """ms per plan from timestamps around `repeats` plans in one command buffer, for 5 submissions after
    SETTLE_S of the same."""
    from portable.runtime_vk import commands
    from portable.runtime_vk._vk import vk

    dev = backend._own.device
    h = dev.handle
    period = vk.vkGetPhysicalDeviceProperties(dev.pd.handle).limits.timestampPeriod  # ns per tick
    pool = vk.vkCreateCommandPool(h, vk.VkCommandPoolCreateInfo(queueFamilyIndex=dev.family), None)
    qpool = vk.vkCreateQueryPool(h, vk.VkQueryPoolCreateInfo(queryType=vk.VK_QUERY_TYPE_TIMESTAMP, queryCount=2),
                                 None)
    layouts = [lk.set_layout for lk, *_ in plan if lk.set_layout is not None] * repeats
    count = max(1, sum(len(b) for lk, b, *_ in plan if lk.set_layout is not None) * repeats)
    dpool = vk.vkCreateDescriptorPool(h, vk.VkDescriptorPoolCreateInfo(maxSets=max(1, len(layouts)), pPoolSizes=[
        vk.VkDescriptorPoolSize(type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=count)]), None)
    fence = vk.vkCreateFence(h, vk.VkFenceCreateInfo(), None)
    try:
        sets = list(vk.vkAllocateDescriptorSets(h, vk.VkDescriptorSetAllocateInfo(
            descriptorPool=dpool, pSetLayouts=layouts))) if layouts else []
        commands.write_sets(dev, [(lk, b) for lk, b, *_ in plan] * repeats, sets)
        cmd = vk.vkAllocateCommandBuffers(h, vk.VkCommandBufferAllocateInfo(
            commandPool=pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]
        vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo(flags=0))
        vk.vkCmdResetQueryPool(cmd, qpool, 0, 2)
        commands.barrier_after_earlier_work(cmd)
        vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, qpool, 0)
        items = [(lk, grid, commands.pack_push_constants(push) if push else None) for lk, _, grid, push in plan]
        before = ([True] * len(plan)) if barriers_between else ([False] + [True] * (len(plan) - 1))
        commands.record_dispatches(cmd, items * repeats, sets, before * repeats, after_earlier_work=False)
        vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qpool, 1)
        vk.vkEndCommandBuffer(cmd)
        runs = []
        t0 = time.perf_counter()
        while len(runs) < 5:
            vk.vkResetFences(h, 1, [fence])
            vk.vkQueueSubmit(dev.compute.queue, 1, [vk.VkSubmitInfo(pCommandBuffers=[cmd])], fence)
            vk.vkWaitForFences(h, 1, [fence], vk.VK_TRUE, 60_000_000_000)
            if time.perf_counter() - t0 < SETTLE_S:
                continue
            data = vk.ffi.new("uint64_t[2]")
            vk.vkGetQueryPoolResults(h, qpool, 0, 2, 16, data, 8,
                                     vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WAIT_BIT)
            runs.append((data[1] - data[0]) * period / 1e6 / repeats)
        return runs
    finally:
        vk.vkDestroyFence(h, fence, None)
        vk.vkDestroyDescriptorPool(h, dpool, None)
        vk.vkDestroyQueryPool(h, qpool, None)
        vk.vkDestroyCommandPool(h, pool, None)


def _opencl_times(backend, plan, repeats: int) -> tuple[float, float]:
    """(ms per plan from the first start to the last end, ms per plan summed over kernels' own spans)."""
    import pyopencl as cl

    res = backend._res
    queue = cl.CommandQueue(res.context, properties=cl.command_queue_properties.PROFILING_ENABLE)
    spans, sums = [], []
    t0 = time.perf_counter()
    while len(spans) < 5:
        events = []
        for _ in range(repeats):
            for lk, bufs, grid, push in plan:
                for i, b in enumerate(bufs):
                    lk.kernel.set_arg(i, b.mem)
                for j, v in enumerate(push):
                    lk.kernel.set_arg(len(bufs) + j, np.int32(v))
                gs = tuple(g * w for g, w in zip(grid, lk.workgroup_size))
                events.append(cl.enqueue_nd_range_kernel(queue, lk.kernel, gs, lk.workgroup_size))
        queue.finish()
        if time.perf_counter() - t0 < SETTLE_S:
            continue
        spans.append((events[-1].profile.end - events[0].profile.start) / 1e6 / repeats)
        sums.append(sum(e.profile.end - e.profile.start for e in events) / 1e6 / repeats)
    return min(spans), min(sums)


def _probe(live, wid: str, exe, size_class: str, repeats: int) -> dict:
    from portable.bench import workloads as W

    w = W.build(wid.split("@")[0], size_class)  # "id@variant": a variant of a workload's kernels
    api = live.info.api
    plan, bufs = _bind(exe, live.backend, w.make_inputs())
    rec = {"workload": wid, "api": api, "device": live.info.name, "dispatches_per_plan": len(plan)}
    try:
        if api == "vulkan":
            runs = _vulkan_times(live.backend, plan, repeats, True)
            rec["gpu_ms"], rec["gpu_ms_runs"] = min(runs), runs
            rec["gpu_ms_no_barrier_between_repeats"] = min(_vulkan_times(live.backend, plan, repeats, False))
        else:
            rec["gpu_ms"], rec["kernels_ms"] = _opencl_times(live.backend, plan, repeats)
        if w.bytes:
            rec["gbps"] = w.bytes / (rec["gpu_ms"] * 1e-3) / 1e9
        if w.flops:
            rec["tflops"] = w.flops / (rec["gpu_ms"] * 1e-3) / 1e12
    except Exception as e:  # noqa: BLE001 - one workload's failure is a result, not the end of the probe
        rec["error"] = f"{type(e).__name__}: {str(e)[:300]}"
    finally:
        for b in bufs:
            live.backend.free(b)
    return rec


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("dir", type=Path)
    p.add_argument("--device", default="vulkan:0")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--only", help="substring of workload ids")
    p.add_argument("--repeats", type=int, default=REPEATS, help="plans per command buffer / per measurement")
    p.add_argument("--passes", type=int, default=1, help="measure every workload this many times (order reversed "
                   "every other pass: drift shows up as a difference between passes)")
    a = p.parse_args()
    from portable.bench.aot import read_manifest
    from portable.devices import open_device
    from portable.executable import Executable

    manifest = read_manifest(a.dir)
    live = open_device(a.device)
    api = live.info.api
    results = []
    order = [(wid, e) for wid, e in manifest["workloads"].items() if not a.only or a.only in wid]
    for n in range(a.passes):
        for wid, entry in (order if n % 2 == 0 else order[::-1]):
            path = entry.get("portable_by_api", {}).get(api)
            if path:
                rec = _probe(live, wid, Executable.load(a.dir / path), manifest["size_class"], a.repeats)
                results.append(dict(rec, **{"pass": n}))
                print(json.dumps(results[-1]), flush=True)
    a.out.write_text(json.dumps(results, indent=1))
    print("median gpu_ms", statistics.median([r["gpu_ms"] for r in results if "gpu_ms" in r] or [0]))


if __name__ == "__main__":
    main()
