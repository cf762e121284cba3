"""`portable profile`: where a model's time goes, per kernel, on the device's own clock.

    portable profile model.onnx --device vulkan:0 --html prof.html --png prof.png
    portable profile model.ptpk --device opencl:0 --sources model.sources.json

Each dispatch of one run of the plan is timed with a barrier before it: Vulkan timestamp queries after every
dispatch of one command buffer (the time between two is the later dispatch), OpenCL profiling events
(START..END) on an in-order queue; the best of `runs` runs per dispatch. Beside the time: its share of the
total, the bytes of the buffers it binds over that time (a lower bound on its traffic: each byte once) and, for
kernels with a reduction (matmul, convolution), 2 x the root's iteration domain over that time, each as a
fraction of the device's published peak (portable/bench/peaks.py) where one is known. The ONNX nodes a kernel
came from are read off the MLIR locations of the ops its dispatch group holds while an ONNX model compiles; a
package carries no such record, so `source_map` writes one beside it at compile time (`--sources`).
"""

from __future__ import annotations

import contextlib
import html
import json
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from .errors import PortableError

SETTLE_S = 1.0  # GPUs run slower for their first fraction of a second of load
_capture_lock = threading.Lock()


class ProfileError(PortableError):
    """The model cannot be profiled as asked."""


# ---- compile side: which ONNX nodes and how many FLOPs each launch holds ------------------------------------
@contextlib.contextmanager
def _recording():
    """Record, while a graph compiles, each dispatch group's source nodes and FLOPs (as launched: formed, then cut
    into parts where it runs in chunks; before tiling) and each launch's dispatch count. The Executable keeps no
    such record, so the two steps are wrapped meanwhile."""
    from .compiler import plan
    from .compiler.dispatch import split
    from .ir import locations
    from .ir.linalg_info import classify

    rec: dict[str, Any] = {}
    cut, dispatches = split.split_groups, plan.dispatches

    def split_groups(*args, **kw):
        """The groups as they are launched: formed, then cut into parts where they run in chunks."""
        groups, splits = cut(*args, **kw)
        info = []
        for g in groups:
            ops = [g.target, *g.fused()]
            names: list[str] = []
            for op in ops:
                names += [n for n in locations.names(op.location) if n not in names]
            k = classify(g.root)
            flops = 2.0 * float(np.prod(k.ranges)) if k.ranges and "reduction" in k.iterators else 0.0
            info.append({"nodes": names, "kind": k.kind, "flops": flops})  # per dispatch: a chunk's rows
        rec["groups"] = info  # a fallback that forms the groups again replaces them
        return groups, splits

    def plan_dispatches(builder, index, splits=None):
        rec["per_launch"] = [len((splits or {})[j].starts) if (splits or {}).get(j) is not None else 1
                             for j in range(len(builder.launches))]
        return dispatches(builder, index, splits)

    with _capture_lock:
        split.split_groups, plan.dispatches = split_groups, plan_dispatches
        try:
            yield rec
        finally:
            split.split_groups, plan.dispatches = cut, dispatches


def _per_dispatch(rec: dict, exe) -> list[dict]:
    groups, per_launch = rec.get("groups", []), rec.get("per_launch", [])
    if len(groups) != len(per_launch) or sum(per_launch) != len(exe.dispatches):
        return [{"nodes": [], "kind": "?", "flops": 0.0} for _ in exe.dispatches]
    out = []
    for g, n in zip(groups, per_launch):
        out += [dict(g)] * n
    return out


def compile_with_sources(model: Any, options: dict, api: str, input_shapes: Any = None):
    """(Executable, per-dispatch source records) of an ONNX model or MLIR text compiled for one API; always a
    real compile (a cached executable has no record of its groups)."""
    from .api import graph_text
    from .compiler.pipeline import compile_module

    text = graph_text(model, input_shapes)
    with _recording() as rec:
        exe = compile_module(text, options, (api,))
    return exe, _per_dispatch(rec, exe)


def source_map(model: Any, profile_name: str, api: str, out: str | Path, input_shapes: Any = None) -> Path:
    """Write the source records of `model` compiled for a device profile (as `portable compile` compiles it
    for `api:profile_name`), for profiling its package where no compiler is installed."""
    from . import profiles

    prof = profiles.all_profiles().get(profile_name)
    if prof is None:
        raise ProfileError(f"no device profile named {profile_name!r}; profiles: {', '.join(profiles.all_profiles())}")
    exe, sources = compile_with_sources(model, profiles.codegen_options(prof), api, input_shapes)
    out = Path(out)
    out.write_text(json.dumps({"api": api, "profile": profile_name,
                               "kernels": [exe.kernels[d.kernel].name for d in exe.dispatches],
                               "dispatches": sources}))
    return out


# ---- device side ----------------------------------------------------------------------------------------
def _bind(exe, backend, inputs):
    kernels = [backend.load_kernel(k) for k in exe.kernels]
    bufs = {s.id: backend.allocate(max(int(s.nbytes), 4)) for s in exe.slots}
    for sid, data in exe.constants.items():
        backend.upload(bufs[sid], np.ascontiguousarray(data))
    for sid, sig, arr in zip(exe.input_slots, exe.inputs, inputs):
        if arr.nbytes:
            backend.upload(bufs[sid], sig.to_device(np.ascontiguousarray(arr), "input"))
    views: dict[tuple[int, int, int], object] = {}

    def bound(d, i: int, sid: int):
        """The slot's buffer, or a view of the byte range the dispatch binds (a kernel run in parts)."""
        offset, size = d.binding(i, bufs[sid].nbytes)
        if offset == 0 and size >= bufs[sid].nbytes:
            return bufs[sid]
        if (sid, offset, size) not in views:
            views[(sid, offset, size)] = backend.view(bufs[sid], offset, size)
        return views[(sid, offset, size)]

    plan = [(kernels[d.kernel], tuple(bound(d, i, s) for i, s in enumerate(d.slots)), tuple(int(g) for g in d.grid),
             tuple(d.push_constants)) for d in exe.dispatches]
    return plan, list(views.values()) + list(bufs.values())  # views are freed before their buffers


def _vulkan_times(backend, plan, runs: int) -> list[list[float]]:
    from .runtime_vk import commands
    from .runtime_vk._vk import vk

    dev = backend._own.device
    h = dev.handle
    period = vk.vkGetPhysicalDeviceProperties(dev.pd.handle).limits.timestampPeriod  # ns per tick
    queries = len(plan) + 1
    pool = vk.vkCreateCommandPool(h, vk.VkCommandPoolCreateInfo(queueFamilyIndex=dev.family), None)
    qpool = vk.vkCreateQueryPool(h, vk.VkQueryPoolCreateInfo(queryType=vk.VK_QUERY_TYPE_TIMESTAMP,
                                                             queryCount=queries), None)
    layouts = [lk.set_layout for lk, *_ in plan if lk.set_layout is not None]
    count = max(1, sum(len(b) for lk, b, *_ in plan if lk.set_layout is not None))
    dpool = vk.vkCreateDescriptorPool(h, vk.VkDescriptorPoolCreateInfo(maxSets=max(1, len(layouts)), pPoolSizes=[
        vk.VkDescriptorPoolSize(type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=count),
        vk.VkDescriptorPoolSize(type=vk.VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, descriptorCount=count)]), None)
    fence = vk.vkCreateFence(h, vk.VkFenceCreateInfo(), None)
    try:
        sets = list(vk.vkAllocateDescriptorSets(h, vk.VkDescriptorSetAllocateInfo(
            descriptorPool=dpool, pSetLayouts=layouts))) if layouts else []
        commands.write_sets(dev, [(lk, b) for lk, b, *_ in plan], sets)
        cmd = vk.vkAllocateCommandBuffers(h, vk.VkCommandBufferAllocateInfo(
            commandPool=pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]
        vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo(flags=0))
        vk.vkCmdResetQueryPool(cmd, qpool, 0, queries)
        commands.barrier_after_earlier_work(cmd)
        vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, qpool, 0)
        it = iter(sets)
        for i, (lk, _, grid, push) in enumerate(plan):
            if i:
                commands.barrier_between_dispatches(cmd)
            item = (lk, grid, commands.pack_push_constants(push) if push else None)
            commands.record_dispatches(cmd, [item], [next(it)] if lk.set_layout is not None else [],
                                       after_earlier_work=False)
            vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qpool, i + 1)
        vk.vkEndCommandBuffer(cmd)
        out: list[list[float]] = []
        t0 = time.perf_counter()
        while len(out) < runs:
            vk.vkResetFences(h, 1, [fence])
            vk.vkQueueSubmit(dev.compute.queue, 1, [vk.VkSubmitInfo(pCommandBuffers=[cmd])], fence)
            vk.vkWaitForFences(h, 1, [fence], vk.VK_TRUE, 600_000_000_000)
            if _warming(t0) and not out:
                continue
            data = vk.ffi.new(f"uint64_t[{queries}]")
            vk.vkGetQueryPoolResults(h, qpool, 0, queries, 8 * queries, data, 8,
                                     vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WAIT_BIT)
            out.append([(data[i + 1] - data[i]) * period / 1e6 for i in range(queries - 1)])
        return out
    finally:
        vk.vkDestroyFence(h, fence, None)
        vk.vkDestroyDescriptorPool(h, dpool, None)
        vk.vkDestroyQueryPool(h, qpool, None)
        vk.vkDestroyCommandPool(h, pool, None)


def _warming(t0: float) -> bool:
    return time.perf_counter() - t0 < SETTLE_S


def _opencl_times(backend, plan, runs: int) -> list[list[float]]:
    import pyopencl as cl

    queue = cl.CommandQueue(backend._res.context, properties=cl.command_queue_properties.PROFILING_ENABLE)
    out: list[list[float]] = []
    t0 = time.perf_counter()
    while len(out) < runs:
        events = []
        for lk, bufs, grid, push in plan:
            for i, b in enumerate(bufs):
                lk.kernel.set_arg(i, b.mem)
            for j, v in enumerate(push):
                lk.kernel.set_arg(len(bufs) + j, np.int32(v))
            gs = tuple(g * w for g, w in zip(grid, lk.workgroup_size))
            events.append(cl.enqueue_nd_range_kernel(queue, lk.kernel, gs, lk.workgroup_size))
        queue.finish()
        if not _warming(t0) or out:
            out.append([(e.profile.end - e.profile.start) / 1e6 for e in events])
    return out


def _inputs(exe, seed: int = 0) -> list[np.ndarray]:
    """Random floats; integers (token ids, positions) zero, a valid index for any gather; masks one."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s.shape).astype(s.dtype) if np.dtype(s.dtype).kind == "f" else
            np.zeros(s.shape, s.dtype) for s in exe.inputs]


def profile(model: str | Path, device: str = "vulkan:0", input_shapes: Any = None, runs: int = 5,
            sources: str | Path | None = None) -> dict:
    """Per-dispatch device time of one run of `model` (.onnx, .mlir or a .ptpk package) on `device`."""
    from . import package
    from .bench.peaks import peak_for
    from .devices import open_device

    live = open_device(device)
    info = live.info
    path = Path(model)
    if not path.exists():
        raise ProfileError(f"{path}: no such file")
    if package.is_package(path):
        pk = package.Package(path)
        exe = pk.executable(pk.select(info, live.profile.get("name")))
        src = [{"nodes": [], "kind": "?", "flops": 0.0} for _ in exe.dispatches]
        if sources:
            sm = json.loads(Path(sources).read_text())
            names = [exe.kernels[d.kernel].name for d in exe.dispatches]
            if sm.get("kernels") != names:
                raise ProfileError(f"{sources} records {len(sm.get('kernels', []))} dispatches of other kernels than "
                                   f"{path}'s {info.api} target ({len(names)}); write it for the same model, input "
                                   f"shapes and target (portable.profiling.source_map)")
            src = sm["dispatches"]
    else:
        graph = path.read_text() if path.suffix == ".mlir" else str(path)
        exe, src = compile_with_sources(graph, live.options, info.api, input_shapes)
    limit = live.options.get("max_bind_bytes") or 0
    if limit and any(int(s.nbytes) > limit for s in exe.slots):
        raise ProfileError(f"{path}: its plan runs kernels in chunks of a tensor larger than {info.name} binds; "
                           f"profiling such plans is not supported, profile it on a device with larger bindings")
    plan, bufs = _bind(exe, live.backend, _inputs(exe))
    try:
        times = (_vulkan_times if info.api == "vulkan" else _opencl_times)(live.backend, plan, max(1, runs))
    finally:
        for b in bufs:
            live.backend.free(b)
    best = [min(r[i] for r in times) for i in range(len(plan))]
    total = sum(best) or 1e-12
    peak = peak_for(info.name) or {}
    rows = []
    for i, (d, ms) in enumerate(zip(exe.dispatches, best)):
        k = exe.kernels[d.kernel]
        nbytes = float(sum(int(exe.slots[s].nbytes) for s in d.slots))
        s = max(ms, 1e-9) * 1e-3
        flops = float(src[i].get("flops", 0.0))
        row = {"dispatch": i, "kernel": k.name, "kind": src[i].get("kind", "?"), "nodes": src[i].get("nodes", []),
               "ms": ms, "share": ms / total, "bytes": nbytes, "gbps": nbytes / s / 1e9,
               "flops": flops, "gflops": flops / s / 1e9 if flops else None,
               "grid": list(d.grid), "workgroup_size": list(k.workgroup_size)}
        if peak.get("bandwidth"):
            row["bw_fraction"] = nbytes / s / peak["bandwidth"]
        if flops and peak.get("float32"):
            row["flop_fraction"] = flops / s / peak["float32"]
        rows.append(row)
    return {"model": str(path), "device": info.uri, "device_name": info.name, "api": info.api,
            "driver": info.driver, "runs": runs, "total_ms": sum(best), "runs_total_ms": [sum(r) for r in times],
            "peak": peak, "dispatches": rows}


# ---- reports --------------------------------------------------------------------------------------------
def _nodes_text(nodes: list[str], width: int = 48) -> str:
    t = ", ".join(nodes) if nodes else "-"
    return t if len(t) <= width else t[:width - 3] + "..."


def table(result: dict, top: int | None = None) -> str:
    rows = sorted(result["dispatches"], key=lambda r: -r["ms"])[:top] if top else result["dispatches"]
    head = f"{'#':>4} {'kernel':<28} {'kind':<12} {'us':>9} {'share':>6} {'GB/s':>8} {'GFLOP/s':>9} {'%peak':>6}  nodes"
    title = (f"{result['device']} {result['device_name']} ({result['driver']}): {len(result['dispatches'])} "
             f"dispatches, {result['total_ms']:.3f} ms on the device clock (best of {result['runs']} per dispatch)")
    lines = [title, head]
    for r in rows:
        frac = r.get("flop_fraction") if r.get("flop_fraction") is not None else r.get("bw_fraction")
        lines.append(f"{r['dispatch']:>4} {r['kernel'][:28]:<28} {r['kind'][:12]:<12} {r['ms'] * 1e3:>9.1f} "
                     f"{r['share'] * 100:>5.1f}% {r['gbps']:>8.1f} "
                     f"{(r['gflops'] or 0):>9.1f} {('%5.1f' % (frac * 100)) if frac is not None else '    -':>6}  "
                     f"{_nodes_text(r['nodes'])}")
    return "\n".join(lines)


def write_html(result: dict, out: str | Path) -> Path:
    rows = []
    for r in sorted(result["dispatches"], key=lambda r: -r["ms"]):
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in (
            r["dispatch"], r["kernel"], r["kind"], f"{r['ms'] * 1e3:.1f}", f"{r['share'] * 100:.1f}%",
            f"{r['gbps']:.1f}", f"{r['gflops']:.1f}" if r["gflops"] else "-",
            f"{(r.get('flop_fraction') or r.get('bw_fraction') or 0) * 100:.1f}%"
            if (r.get("flop_fraction") or r.get("bw_fraction")) is not None else "-", ", ".join(r["nodes"]) or "-"))
            + f'<td><div style="background:#4a7;height:10px;width:{r["share"] * 400:.0f}px"></div></td></tr>')
    doc = (f"<!doctype html><meta charset=utf-8><title>portable profile</title><style>body{{font:13px sans-serif}}"
           f"td,th{{padding:2px 6px;text-align:right}}td:nth-child(9){{text-align:left}}</style>"
           f"<h1>{html.escape(Path(result['model']).name)}</h1><p>{html.escape(result['device'])} "
           f"{html.escape(result['device_name'])} ({html.escape(result['driver'])}): "
           f"{len(result['dispatches'])} dispatches, {result['total_ms']:.3f} ms on the device clock</p>"
           f"<table><tr><th>#</th><th>kernel</th><th>kind</th><th>us</th><th>share</th><th>GB/s</th>"
           f"<th>GFLOP/s</th><th>% of peak</th><th>ONNX nodes</th><th></th></tr>{''.join(rows)}</table>")
    out = Path(out)
    out.write_text(doc)
    return out


def write_png(result: dict, out: str | Path, top: int = 30) -> Path | None:
    """A bar chart of the slowest dispatches; None where matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rows = sorted(result["dispatches"], key=lambda r: -r["ms"])[:top][::-1]
    fig, ax = plt.subplots(figsize=(10, 0.3 * len(rows) + 1.2))
    ax.barh(range(len(rows)), [r["ms"] * 1e3 for r in rows], color="#4a7")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"#{r['dispatch']} {_nodes_text(r['nodes'], 40)}" for r in rows], fontsize=7)
    ax.set_xlabel("device time per dispatch (us)")
    ax.set_title(f"{Path(result['model']).name} on {result['device_name']}: {result['total_ms']:.2f} ms",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return Path(out)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("profile", help="per-kernel device time of a model, with the ONNX nodes of each")
    p.add_argument("model", help="an ONNX model, MLIR text, or a package (.ptpk)")
    p.add_argument("--device", default="vulkan:0")
    p.add_argument("--input-shape", action="append", metavar="NAME=D0,D1,...")
    p.add_argument("--runs", type=int, default=5, help="runs of the plan; each dispatch's best is kept")
    p.add_argument("--sources", help="for a package: the source map written by portable.profiling.source_map")
    p.add_argument("--html", help="write the table as HTML")
    p.add_argument("--png", help="write a chart of the slowest dispatches (needs matplotlib)")
    p.add_argument("--json", help="write every figure as JSON")
    p.add_argument("--top", type=int, default=None, help="print only the N slowest dispatches")
    p.set_defaults(fn=_main)


def _main(args) -> int:
    from .cli import parse_input_shapes

    try:
        shapes = parse_input_shapes(args.input_shape or []) or None
    except ValueError as e:
        raise ProfileError(f"--input-shape: {e}") from None
    res = profile(args.model, args.device, shapes, args.runs, args.sources)
    print(table(res, args.top))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    if args.html:
        write_html(res, args.html)
    if args.png and write_png(res, args.png) is None:
        print("--png: matplotlib is not installed; no chart written")
    return 0
