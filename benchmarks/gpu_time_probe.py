"""Kernel time on the device's own clock for the workloads of a `portable bench --export` directory.

    python benchmarks/gpu_time_probe.py DIR --device vulkan:0 --out probe.json    # GPU host, no MLIR needed
    python benchmarks/gpu_time_probe.py model.ptpk --device opencl:0 --out d.json # each dispatch of a package

The bench times the host's wall clock around a submission (and around 20 plans in one submission). This
separates what the kernels take from what surrounds them, per workload:
- Vulkan: timestamp queries (vkCmdWriteTimestamp) before and after the plan repeated N times in one command
  buffer, once with the barriers the plan needs between repeats and once with none between repeats (the
  repeats then may overlap: the difference is what the barriers cost);
- OpenCL: profiling events on an in-order queue: the first START to the last END over N repeats, and the
  sum of the kernels' own START..END.
Inputs are the bench's own (same seeds); outputs are not checked here (the bench does).

Given a package (`portable compile` / package.build) or a saved executable instead of a directory, it times each
dispatch of one run of its plan, a barrier between every two: a timestamp after each (Vulkan; the time between
two is the later dispatch with the barrier before it) or its event's START..END (OpenCL). Random float inputs,
integer ones zero.
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


def _vulkan_timestamps(backend, plan, repeats: int, barriers_between: bool, each: bool) -> list[list[float]]:
    """For 5 submissions after SETTLE_S of the same, the ms between consecutive timestamps of one command buffer:
    around `repeats` plans (one figure, per plan), or with `each` after every dispatch of one plan (a barrier
    between every two)."""
    from portable.runtime_vk import commands
    from portable.runtime_vk._vk import vk

    dev = backend._own.device
    h = dev.handle
    period = vk.vkGetPhysicalDeviceProperties(dev.pd.handle).limits.timestampPeriod  # ns per tick
    queries = len(plan) + 1 if each else 2
    pool = vk.vkCreateCommandPool(h, vk.VkCommandPoolCreateInfo(queueFamilyIndex=dev.family), None)
    qpool = vk.vkCreateQueryPool(h, vk.VkQueryPoolCreateInfo(queryType=vk.VK_QUERY_TYPE_TIMESTAMP,
                                                             queryCount=queries), None)
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
        vk.vkCmdResetQueryPool(cmd, qpool, 0, queries)
        commands.barrier_after_earlier_work(cmd)
        vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, qpool, 0)
        items = [(lk, grid, commands.pack_push_constants(push) if push else None) for lk, _, grid, push in plan]
        if each:
            it = iter(sets)
            for i, (item, (lk, *_)) in enumerate(zip(items, plan)):
                if i:
                    commands.barrier_between_dispatches(cmd)
                commands.record_dispatches(cmd, [item], [next(it)] if lk.set_layout is not None else [],
                                           after_earlier_work=False)
                vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qpool, i + 1)
        else:
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
            data = vk.ffi.new(f"uint64_t[{queries}]")
            vk.vkGetQueryPoolResults(h, qpool, 0, queries, 8 * queries, data, 8,
                                     vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WAIT_BIT)
            runs.append([(data[i + 1] - data[i]) * period / 1e6 / (1 if each else repeats)
                         for i in range(queries - 1)])
        return runs
    finally:
        vk.vkDestroyFence(h, fence, None)
        vk.vkDestroyDescriptorPool(h, dpool, None)
        vk.vkDestroyQueryPool(h, qpool, None)
        vk.vkDestroyCommandPool(h, pool, None)


def _vulkan_times(backend, plan, repeats: int, barriers_between: bool) -> list[float]:
    """ms per plan from timestamps around `repeats` plans in one command buffer, for 5 submissions."""
    return [r[0] for r in _vulkan_timestamps(backend, plan, repeats, barriers_between, each=False)]


def _vulkan_dispatch_times(backend, plan) -> list[list[float]]:
    """ms per dispatch of one plan, a timestamp after each and a barrier between every two; 5 runs."""
    return _vulkan_timestamps(backend, plan, 1, True, each=True)


def _opencl_events(queue, plan) -> list:
    import pyopencl as cl

    events = []
    for lk, bufs, grid, push in plan:
        for i, b in enumerate(bufs):
            lk.kernel.set_arg(i, b.mem)
        for j, v in enumerate(push):
            lk.kernel.set_arg(len(bufs) + j, np.int32(v))
        gs = tuple(g * w for g, w in zip(grid, lk.workgroup_size))
        events.append(cl.enqueue_nd_range_kernel(queue, lk.kernel, gs, lk.workgroup_size))
    return events


def _opencl_dispatch_times(backend, plan) -> list[list[float]]:
    """ms per dispatch of one plan (each kernel's event START..END, in-order queue); 5 runs after SETTLE_S."""
    import pyopencl as cl

    queue = cl.CommandQueue(backend._res.context, properties=cl.command_queue_properties.PROFILING_ENABLE)
    runs = []
    t0 = time.perf_counter()
    while len(runs) < 5:
        events = _opencl_events(queue, plan)
        queue.finish()
        if time.perf_counter() - t0 >= SETTLE_S:
            runs.append([(e.profile.end - e.profile.start) / 1e6 for e in events])
    return runs


def _opencl_times(backend, plan, repeats: int) -> tuple[float, float]:
    """(ms per plan from the first start to the last end, ms per plan summed over kernels' own spans)."""
    import pyopencl as cl

    res = backend._res
    queue = cl.CommandQueue(res.context, properties=cl.command_queue_properties.PROFILING_ENABLE)
    spans, sums = [], []
    t0 = time.perf_counter()
    while len(spans) < 5:
        events = _opencl_events(queue, plan * repeats)
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


def profile_dispatches(path: Path, device: str, out: Path) -> None:
    """Device time of each dispatch of a package's (or saved executable's) plan; JSON to `out`, the slowest
    printed."""
    from portable import package
    from portable.devices import open_device
    from portable.executable import Executable

    live = open_device(device)
    if package.is_package(path):
        pk = package.Package(path)
        exe = pk.executable(pk.select(live.info))
    else:
        exe = Executable.load(path)
    if any(d.offsets for d in exe.dispatches):
        raise SystemExit(f"{path}: a plan with chunked dispatches (bound ranges of a slot) is not timed here")
    rng = np.random.default_rng(0)
    # Floats random; integers (token ids, positions) zero, a valid index for any gather.
    inputs = [rng.standard_normal(s.shape).astype(s.dtype) if np.dtype(s.dtype).kind == "f" else
              np.zeros(s.shape, s.dtype) for s in exe.inputs]
    plan, bufs = _bind(exe, live.backend, inputs)
    try:
        runs = (_vulkan_dispatch_times if live.info.api == "vulkan" else _opencl_dispatch_times)(live.backend, plan)
    finally:
        for b in bufs:
            live.backend.free(b)
    best = [min(r[i] for r in runs) for i in range(len(plan))]
    rows = [{"dispatch": i, "kernel": d.kernel, "workgroup_size": list(exe.kernels[d.kernel].workgroup_size),
             "grid": list(d.grid), "slot_bytes": [int(exe.slots[s].nbytes) for s in d.slots], "ms": best[i]}
            for i, d in enumerate(exe.dispatches)]
    rec = {"path": str(path), "api": live.info.api, "device": live.info.name, "dispatches": rows,
           "total_ms": sum(best), "runs_total_ms": [sum(r) for r in runs]}
    out.write_text(json.dumps(rec, indent=1))
    print(f"{live.info.api} {live.info.name}: {len(rows)} dispatches, {sum(best):.3f} ms in all")
    for r in sorted(rows, key=lambda r: -r["ms"])[:15]:
        print(f"  #{r['dispatch']:3d} {r['ms'] * 1e3:8.1f} us  wg {r['workgroup_size']} grid {r['grid']} "
              f"bytes {r['slot_bytes']}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("dir", type=Path, help="a `portable bench --export` directory, or a package / executable file")
    p.add_argument("--device", default="vulkan:0")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--only", help="substring of workload ids")
    p.add_argument("--repeats", type=int, default=REPEATS, help="plans per command buffer / per measurement")
    p.add_argument("--passes", type=int, default=1, help="measure every workload this many times (order reversed "
                   "every other pass: drift shows up as a difference between passes)")
    a = p.parse_args()
    if a.dir.is_file():
        return profile_dispatches(a.dir, a.device, a.out)
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
