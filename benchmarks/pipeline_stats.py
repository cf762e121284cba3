"""What the driver says about each kernel of a `portable bench --export` directory: registers, spills, shared memory.

    python3 benchmarks/pipeline_stats.py DIR --device vulkan:0 [--filter GLOB] --out stats.json

Vulkan (VK_KHR_pipeline_executable_properties): each pipeline is built with CAPTURE_STATISTICS and
CAPTURE_INTERNAL_REPRESENTATIONS and no pipeline cache (a real compile); per executable: name, description, subgroup
size, every statistic, internal representations (truncated; some drivers give none). No extension: a message
naming device and driver, exit status 2. OpenCL (opencl:N): build log (NVIDIA with -cl-nv-verbose puts ptxas'
registers/spills/shared memory there) and binary if text (PTX). Needs only numpy + `vulkan` / `pyopencl`."""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from portable.bench.aot import read_manifest  # noqa: E402
from portable.devices import parse_uri  # noqa: E402
from portable.errors import DeviceNotFound, DriverError  # noqa: E402
from portable.executable import Executable  # noqa: E402
from portable.runtime_vk import VulkanBackend, pipelines  # noqa: E402
from portable.runtime_vk._vk import new_struct, vk  # noqa: E402
from portable.runtime_vk.errors import check  # noqa: E402

FEATURE = "pipelineExecutableInfo"  # runtime_vk.features.OPT_IN
IR_CHARS = 20_000  # per internal representation: a kernel's assembly, not a whole module dump
_PROPS, _STATS, _IRS = ("vkGetPipelineExecutablePropertiesKHR", "vkGetPipelineExecutableStatisticsKHR",
                        "vkGetPipelineExecutableInternalRepresentationsKHR")
# VkPipelineExecutableStatisticFormatKHR 0..3 -> (name, field of the value union, Python type)
_FORMATS = {0: ("bool32", "b32", bool), 1: ("int64", "i64", int), 2: ("uint64", "u64", int),
            3: ("float64", "f64", float)}


def device_functions(device: Any) -> dict[str, Any]:
    """The extension's three entry points for `device` (a VkDevice), through vkGetDeviceProcAddr."""
    raw = {name: vk.lib.vkGetDeviceProcAddr(device, name.encode()) for name in (_PROPS, _STATS, _IRS)}
    if any(r == vk.ffi.NULL for r in raw.values()):
        raise DriverError(f"vkGetDeviceProcAddr gave NULL for {list(raw)}: was the extension enabled on the device?")
    return {name: vk.ffi.cast(f"PFN_{name}", r) for name, r in raw.items()}


def statistic(stat: Any) -> dict:
    """A VkPipelineExecutableStatisticKHR as name, description, format, value (a union chosen by `format`)."""
    fmt, field, cast = _FORMATS.get(int(stat.format), (f"format {stat.format}", "u64", int))
    return {"name": _text(stat.name), "description": _text(stat.description), "format": fmt,
            "value": cast(getattr(stat.value, field))}


def _query(fns: dict, name: str, device: Any, info: Any, ctype: str, stype: int) -> Any:
    """The two calls (count, then array; each item's sType set first) of an enumerating entry point. Returns the
    whole array: it owns the items' memory (a slice would not keep it alive); a pipeline's counts never change."""
    count = vk.ffi.new("uint32_t*")
    check(int(fns[name](device, info, count, vk.ffi.NULL)), name)
    items = vk.ffi.new(f"{ctype}[{count[0]}]")
    for i in range(count[0]):
        items[i].sType = stype
    check(int(fns[name](device, info, count, items)), name)
    return items


def _text(chars: Any) -> str:
    return vk.ffi.string(chars).decode("utf-8", errors="replace").strip()


def _clip(data: bytes, limit: int) -> dict:
    text = data.rstrip(b"\0").decode("utf-8", errors="replace")
    return {"bytes": len(data), "text": text[:limit], "truncated": len(text) > limit}


def _representations(fns: dict, device: Any, info: Any, ir_chars: int) -> list[dict]:
    """The executable's internal representations: a third call fills the buffers the second one sized."""
    reps = _query(fns, _IRS, device, info, "VkPipelineExecutableInternalRepresentationKHR",
                  vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION_KHR)
    datas = [vk.ffi.new("char[]", max(1, r.dataSize)) for r in reps]
    for r, d in zip(reps, datas):
        r.pData = d
    result = int(fns[_IRS](device, info, vk.ffi.new("uint32_t*", len(reps)), reps))
    check(0 if result == vk.VK_INCOMPLETE else result, _IRS)  # INCOMPLETE: a text was cut short; keep what came
    out = []
    for r, d in zip(reps, datas):
        raw = vk.ffi.buffer(d, r.dataSize)[:]
        out.append({"name": _text(r.name), "description": _text(r.description), "is_text": bool(r.isText),
                    **_clip(raw if r.isText else raw.hex().encode(), ir_chars)})
    return out


def pipeline_report(device: Any, fns: dict, pipeline: Any, ir_chars: int = IR_CHARS) -> list[dict]:
    """Per executable of `pipeline`: name, description, stages, subgroup size, statistics, representations."""
    pinfo = new_struct("VkPipelineInfoKHR", vk.VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, pipeline=pipeline)
    out = []
    for i, p in enumerate(_query(fns, _PROPS, device, pinfo, "VkPipelineExecutablePropertiesKHR",
                                 vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR)):
        einfo = new_struct("VkPipelineExecutableInfoKHR", vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR,
                           pipeline=pipeline, executableIndex=i)
        stats = [statistic(s) for s in _query(fns, _STATS, device, einfo, "VkPipelineExecutableStatisticKHR",
                                              vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR)]
        out.append({"name": _text(p.name), "description": _text(p.description), "stages": int(p.stages),
                    "subgroup_size": int(p.subgroupSize), "statistics": stats,
                    "internal_representations": _representations(fns, device, einfo, ir_chars)})
    return out


def vulkan_reporter(index: int, ir_chars: int):
    """(DeviceInfo, close, kernel -> report): a pipeline built with the capture flags, no cache; then destroyed."""
    backend = VulkanBackend(index, opt_in=(FEATURE,))
    dev = backend._own.device
    fns = device_functions(dev.handle)
    flags = (vk.VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR
             | vk.VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR)

    def report(kernel: Any) -> dict:
        lk = pipelines.build(kernel, dev, None, flags)
        try:
            return {"executables": pipeline_report(dev.handle, fns, lk.pipeline, ir_chars)}
        finally:
            pipelines.destroy(dev, lk)
    return backend.info, backend.close, report


def opencl_reporter(index: int, ir_chars: int):
    """(DeviceInfo, close, kernel -> report): build log and text binary of the OpenCL C, built with the runtime's
    options (plus -cl-nv-verbose on NVIDIA: other drivers may refuse it)."""
    from portable.runtime_cl import OpenCLBackend
    from portable.runtime_cl.clapi import cl, program_binary, program_from_source
    from portable.runtime_cl.programs import BUILD_OPTIONS

    backend = OpenCLBackend(index)
    device = backend._found.device
    options = BUILD_OPTIONS + (" -cl-nv-verbose" if backend.info.vendor_id == 0x10DE else "")

    def report(kernel: Any) -> dict:
        program = program_from_source(backend._res.context, kernel.opencl)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pyopencl warns on any build log: the log is what we want here
            program.build(options.encode(), [device])
        binary, log = program_binary(program), program.get_build_info(device, cl.program_build_info.LOG)
        return {"options": options, "build_log": str(log).strip(),
                "binary": _clip(binary, ir_chars) if binary.rstrip(b"\0").isascii() else {"bytes": len(binary)}}
    return backend.info, backend.close, report


def summary(wid: str, rec: dict) -> str:
    """One line per kernel: every statistic of every executable, or the build log's ptxas lines."""
    stats = "; ".join(f"{e['name']} sg{e['subgroup_size']}: " + ", ".join(
        f"{s['name']}={s['value']}" for s in e["statistics"]) for e in rec.get("executables", []))
    log = " | ".join(ln.strip() for ln in rec.get("build_log", "").splitlines() if "ptxas" in ln or "spill" in ln)
    return f"{wid} {rec['kernel']} wg{tuple(rec['workgroup_size'])}: {stats or log or rec.get('error', 'none given')}"


def workload_report(report_kernel, api: str, root: Path, entry: dict) -> list[dict]:
    """report_kernel for each kernel of one manifest entry's executable; a kernel the driver refuses is a result."""
    path = entry.get("portable_by_api", {}).get(api)
    if not path:
        return [{"kernel": "-", "workgroup_size": [], "error": entry.get("portable_error", f"no {api} executable")}]
    out = []
    for k in Executable.load(root / path).kernels:
        rec = {"kernel": k.name, "workgroup_size": list(k.workgroup_size)}
        try:
            out.append(dict(rec, **report_kernel(k)))
        except Exception as e:  # noqa: BLE001 - PortableError or a driver's own (pyopencl) error
            out.append(dict(rec, error=f"{type(e).__name__}: {str(e)[:2000]}"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--device", default="vulkan:0")
    ap.add_argument("--filter", help="glob over workload ids (e.g. 'matmul_4096*')")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--ir-chars", type=int, default=IR_CHARS, help="keep this much of each internal representation")
    a = ap.parse_args()
    api, index = parse_uri(a.device)
    manifest = read_manifest(a.dir)
    try:
        info, close, report_kernel = (vulkan_reporter if api == "vulkan" else opencl_reporter)(index, a.ir_chars)
    except DeviceNotFound as e:
        print(f"pipeline_stats: {e}: no driver statistics here", file=sys.stderr)
        sys.exit(2)
    report = {"device": a.device, "name": info.name, "driver": info.driver, "driver_version": info.driver_version,
              "export": str(a.dir), "profile": manifest.get("profile"), "workloads": {}}
    for wid, entry in manifest["workloads"].items():
        if not a.filter or fnmatch.fnmatch(wid, a.filter):
            report["workloads"][wid] = workload_report(report_kernel, api, a.dir, entry)
            for rec in report["workloads"][wid]:
                print(summary(wid, rec), flush=True)
    a.out.write_text(json.dumps(report, indent=1))
    print(f"wrote {a.out}: {len(report['workloads'])} workload(s) on {a.device} ({info.name}, {info.driver_version})")
    close()


if __name__ == "__main__":
    main()
