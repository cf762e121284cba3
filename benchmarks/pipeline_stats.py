"""What the Vulkan driver says about each compute pipeline of a `portable bench --export` directory.

    python3 benchmarks/pipeline_stats.py DIR --device vulkan:0 [--filter GLOB] --out stats.json

Through VK_KHR_pipeline_executable_properties: every kernel's pipeline is created without a pipeline cache (so
the driver really compiles it) and with CAPTURE_STATISTICS | CAPTURE_INTERNAL_REPRESENTATIONS; for each
executable the driver made of it: name, description, subgroup size, every statistic it reports (registers,
spills, shared memory... whatever the driver names) and the text of its internal representations (truncated;
some drivers give none). Needs only numpy and `vulkan`: runs on the GPU host. A device without the extension
gets a message naming the device and driver, and exit status 2.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from portable.errors import DeviceNotFound, DriverError, PortableError  # noqa: E402
from portable.runtime_vk import VulkanBackend, pipelines  # noqa: E402
from portable.runtime_vk._vk import new_struct, vk  # noqa: E402
from portable.runtime_vk.errors import check  # noqa: E402

FEATURE = "pipelineExecutableInfo"  # runtime_vk.features.OPT_IN
IR_CHARS = 20_000  # per internal representation: a kernel's assembly, not a whole module dump
_PROPS, _STATS, _IRS = ("vkGetPipelineExecutablePropertiesKHR", "vkGetPipelineExecutableStatisticsKHR",
                        "vkGetPipelineExecutableInternalRepresentationsKHR")


def device_functions(device: Any) -> dict[str, Any]:
    """The extension's three entry points for `device` (a VkDevice), through vkGetDeviceProcAddr."""
    out = {}
    for name in (_PROPS, _STATS, _IRS):
        raw = vk.lib.vkGetDeviceProcAddr(device, name.encode())
        if raw == vk.ffi.NULL:
            raise DriverError(f"{name}: vkGetDeviceProcAddr gave NULL; the device was not created with "
                              f"VK_KHR_pipeline_executable_properties enabled")
        out[name] = vk.ffi.cast(f"PFN_{name}", raw)
    return out


def statistic_value(stat: Any) -> tuple[str, bool | int | float]:
    """(format name, value) of a VkPipelineExecutableStatisticKHR: its value is a union chosen by `format`."""
    fmt = stat.format
    if fmt == vk.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
        return "bool32", bool(stat.value.b32)
    if fmt == vk.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
        return "int64", int(stat.value.i64)
    if fmt == vk.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
        return "uint64", int(stat.value.u64)
    if fmt == vk.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR:
        return "float64", float(stat.value.f64)
    return f"format {fmt}", int(stat.value.u64)


def _query(fns: dict, name: str, device: Any, info: Any, ctype: str, stype: int) -> Any:
    """The usual two calls (count, then array) of an enumerating entry point, each item's sType set first.
    Returns the cffi array: it owns the items' memory (a slice of it would not keep it alive)."""
    count = vk.ffi.new("uint32_t*")
    check(int(fns[name](device, info, count, vk.ffi.NULL)), name)
    items = vk.ffi.new(f"{ctype}[{count[0]}]")
    for i in range(count[0]):
        items[i].sType = stype
    check(int(fns[name](device, info, count, items)), name)
    if count[0] != len(items):  # the spec lets only a changing pipeline do this; ours do not change
        raise DriverError(f"{name}: {len(items)} items announced, then {count[0]} given")
    return items


def _text(chars: Any) -> str:
    return vk.ffi.string(chars).decode("utf-8", errors="replace").strip()


def _statistics(fns: dict, device: Any, info: Any) -> list[dict]:
    out = []
    for s in _query(fns, _STATS, device, info, "VkPipelineExecutableStatisticKHR",
                    vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR):
        fmt, value = statistic_value(s)
        out.append({"name": _text(s.name), "description": _text(s.description), "format": fmt, "value": value})
    return out


def _representations(fns: dict, device: Any, info: Any, ir_chars: int) -> list[dict]:
    """The executable's internal representations: a third call fills the buffers the second one sized."""
    reps = _query(fns, _IRS, device, info, "VkPipelineExecutableInternalRepresentationKHR",
                  vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION_KHR)
    datas = [vk.ffi.new("char[]", max(1, r.dataSize)) for r in reps]
    for r, d in zip(reps, datas):
        r.pData = d
    result = int(fns[_IRS](device, info, vk.ffi.new("uint32_t*", len(reps)), reps))
    if result != vk.VK_INCOMPLETE:  # INCOMPLETE: a text was cut short; keep what came
        check(result, _IRS)
    out = []
    for r, d in zip(reps, datas):
        raw = vk.ffi.buffer(d, r.dataSize)[:]
        text = raw.rstrip(b"\0").decode("utf-8", errors="replace") if r.isText else raw.hex()
        out.append({"name": _text(r.name), "description": _text(r.description), "is_text": bool(r.isText),
                    "bytes": int(r.dataSize), "text": text[:ir_chars], "truncated": len(text) > ir_chars})
    return out


def pipeline_report(device: Any, fns: dict, pipeline: Any, ir_chars: int = IR_CHARS) -> list[dict]:
    """Per executable of `pipeline`: name, description, stages, subgroup size, statistics, representations."""
    pinfo = new_struct("VkPipelineInfoKHR", vk.VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, pipeline=pipeline)
    out = []
    for i, p in enumerate(_query(fns, _PROPS, device, pinfo, "VkPipelineExecutablePropertiesKHR",
                                 vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR)):
        einfo = new_struct("VkPipelineExecutableInfoKHR", vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR,
                           pipeline=pipeline, executableIndex=i)
        out.append({"name": _text(p.name), "description": _text(p.description), "stages": int(p.stages),
                    "subgroup_size": int(p.subgroupSize), "statistics": _statistics(fns, device, einfo),
                    "internal_representations": _representations(fns, device, einfo, ir_chars)})
    return out


def kernel_report(backend: VulkanBackend, fns: dict, kernel: Any, ir_chars: int = IR_CHARS) -> dict:
    """Build `kernel`'s pipeline with the capture flags (no pipeline cache), report on it, destroy it."""
    dev = backend._own.device
    flags = (vk.VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR
             | vk.VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR)
    lk = pipelines.build(kernel, dev, None, flags)
    try:
        return {"kernel": kernel.name, "workgroup_size": list(kernel.workgroup_size),
                "executables": pipeline_report(dev.handle, fns, lk.pipeline, ir_chars)}
    finally:
        pipelines.destroy(dev, lk)


def summary(wid: str, rec: dict) -> str:
    """One line per kernel: every statistic of every executable."""
    stats = "; ".join(f"{e['name']} sg{e['subgroup_size']}: " + ", ".join(
        f"{s['name']}={s['value']}" for s in e["statistics"]) for e in rec.get("executables", []))
    return f"{wid} {rec['kernel']} wg{tuple(rec['workgroup_size'])}: {stats or rec.get('error', 'no executables')}"


def workload_report(backend: VulkanBackend, fns: dict, root: Path, entry: dict, ir_chars: int) -> list[dict]:
    """kernel_report of each kernel of one manifest entry's Vulkan executable; a refused kernel is a result."""
    from portable.executable import Executable

    path = entry.get("portable_by_api", {}).get("vulkan")
    if not path:
        return [{"kernel": "-", "workgroup_size": [], "error": entry.get("portable_error", "no Vulkan executable")}]
    out = []
    for kernel in Executable.load(root / path).kernels:
        try:
            out.append(kernel_report(backend, fns, kernel, ir_chars))
        except PortableError as e:
            out.append({"kernel": kernel.name, "workgroup_size": list(kernel.workgroup_size),
                        "error": f"{type(e).__name__}: {str(e)[:500]}"})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--device", default="vulkan:0")
    ap.add_argument("--filter", help="glob over workload ids (e.g. 'matmul_4096*')")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--ir-chars", type=int, default=IR_CHARS, help="keep this much of each internal representation")
    a = ap.parse_args()
    from portable.bench.aot import read_manifest
    from portable.devices import parse_uri

    api, index = parse_uri(a.device)
    if api != "vulkan":
        sys.exit(f"pipeline_stats: {a.device}: driver statistics come from a Vulkan extension; give vulkan:N")
    manifest = read_manifest(a.dir)
    try:
        backend = VulkanBackend(index, opt_in=(FEATURE,))
    except DeviceNotFound as e:
        print(f"pipeline_stats: {e}: this driver gives no pipeline statistics", file=sys.stderr)
        sys.exit(2)
    fns = device_functions(backend._own.device.handle)
    info = backend.info
    report = {"device": info.name, "driver": info.driver, "driver_version": info.driver_version,
              "export": str(a.dir), "profile": manifest.get("profile"), "workloads": {}}
    for wid, entry in manifest["workloads"].items():
        if not a.filter or fnmatch.fnmatch(wid, a.filter):
            report["workloads"][wid] = workload_report(backend, fns, a.dir, entry, a.ir_chars)
            for rec in report["workloads"][wid]:
                print(summary(wid, rec), flush=True)
    a.out.write_text(json.dumps(report, indent=1))
    print(f"wrote {a.out}: {sum(len(v) for v in report['workloads'].values())} kernel(s) of "
          f"{len(report['workloads'])} workload(s) on {info.name} ({info.driver_version})")
    backend.close()


if __name__ == "__main__":
    main()
