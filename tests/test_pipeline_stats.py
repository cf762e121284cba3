"""benchmarks/pipeline_stats.py: driver statistics per pipeline (VK_KHR_pipeline_executable_properties) and, on
OpenCL, the build log and binary of each kernel.

On a device with the extension the real statistics are read; where it is missing (Mesa 22.3's lavapipe) the
device refuses the opt-in feature with a message naming the extension, the tool exits 2 saying so, and the
querying code runs against a fake driver that answers as the specification says."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import compile_and_load, matmul_mlir

from portable.errors import DeviceNotFound
from portable.runtime_vk.discovery import discovery_instance

ROOT = Path(__file__).resolve().parent.parent
EXTENSION = "VK_KHR_pipeline_executable_properties"
MATMUL = matmul_mlir(33, 40, 17)


def _tool():
    spec = importlib.util.spec_from_file_location("pipeline_stats", ROOT / "benchmarks" / "pipeline_stats.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _vulkan_index(device: str) -> int:
    if not device.startswith("vulkan"):
        pytest.skip("pipeline statistics are a Vulkan extension")
    return int(device.split(":")[1])


def _has_extension(index: int) -> bool:
    """Whether the driver offers the feature, asked as discovery asks (runtime_vk.features)."""
    pd = discovery_instance().compute_devices()[0][index]
    return pd.features["pipelineExecutableInfo"] and EXTENSION in pd.extensions


def _export(device: str, tmp_path: Path) -> Path:
    """A one-workload export directory (manifest + the executable for `device`'s API), as `portable bench
    --export` makes."""
    exe, graph = compile_and_load(MATMUL, device, tmp_path)
    a, b = np.ones((33, 40), np.float32), np.ones((40, 17), np.float32)
    np.testing.assert_allclose(graph(a, b)[0], a @ b)  # the kernel whose pipeline is measured is a right one
    (tmp_path / "export" / "portable").mkdir(parents=True)
    api = device.split(":")[0]
    exe.save(tmp_path / "export" / "portable" / f"mm.{api}.ptx")
    manifest = {"format": 1, "profile": "test", "size_class": "cpu",
                "workloads": {"mm": {"portable_by_api": {api: f"portable/mm.{api}.ptx"}},
                              "other": {"portable_error": "not compiled"}}}
    (tmp_path / "export" / "manifest.json").write_text(json.dumps(manifest))
    return tmp_path / "export"


def test_opt_in_feature_is_enabled_or_refused_by_name(device):
    from portable.runtime_vk import VulkanBackend

    index = _vulkan_index(device)
    with pytest.raises(ValueError, match="unknown"):
        VulkanBackend(index, opt_in=("noSuchFeature",))
    if not _has_extension(index):
        with pytest.raises(DeviceNotFound, match=EXTENSION):
            VulkanBackend(index, opt_in=("pipelineExecutableInfo",))
        return
    backend = VulkanBackend(index, opt_in=("pipelineExecutableInfo",))
    try:
        assert set(_tool().device_functions(backend._own.device.handle)) == {
            "vkGetPipelineExecutablePropertiesKHR", "vkGetPipelineExecutableStatisticsKHR",
            "vkGetPipelineExecutableInternalRepresentationsKHR"}
    finally:
        backend.close()


def test_tool_reports_statistics_or_says_why_not(device, tmp_path):
    out = tmp_path / "stats.json"
    export = _export(device, tmp_path)
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "pipeline_stats.py"), str(export),
                          "--device", device, "--filter", "m*", "--out", str(out)],
                         capture_output=True, text=True, timeout=300)
    if device.startswith("vulkan") and not _has_extension(_vulkan_index(device)):
        assert run.returncode == 2 and EXTENSION in run.stderr, run.stderr
        assert not out.exists()
        pytest.skip(f"{device} lacks {EXTENSION}: {run.stderr.strip()}")
    assert run.returncode == 0, run.stderr
    report = json.loads(out.read_text())
    assert list(report["workloads"]) == ["mm"]  # the filter left out "other"
    assert report["workloads"]["mm"]
    for rec in report["workloads"]["mm"]:
        assert "error" not in rec, rec
        if device.startswith("opencl"):  # what the build says (PoCL: empty log, a binary that is not text)
            assert rec["options"].startswith("-cl-std=CL1.2") and isinstance(rec["build_log"], str)
            assert rec["binary"]["bytes"] > 0
            continue
        assert rec["executables"], "the driver reported no executable for a compute pipeline"
        for exe in rec["executables"]:
            assert exe["subgroup_size"] > 0
            for s in exe["statistics"]:
                assert s["format"] in ("bool32", "int64", "uint64", "float64") and s["name"]


# ---- the querying code against a fake driver ------------------------------------------------------------

class FakeDriver:
    """The three entry points answering as the specification says: a NULL array asks for the count; a short
    array gets VK_INCOMPLETE; an internal representation with pData NULL gets its dataSize. Items whose sType
    was not set are refused (a real driver may read it)."""

    EXECUTABLES = [("Compute", "the compute shader", 32), ("Prolog", "a second executable", 16)]
    IRS = [("NVVM text", b"MOV R1, c[0x0][0x28]\n" * 50, True), ("binary", bytes(range(7)), False)]

    def __init__(self, vk):
        self.vk, self.ffi = vk, vk.ffi
        f = vk.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR
        self.stats = [("Registers", vk.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR, "u64", 168),
                      ("Stack delta", vk.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR, "i64", -8),
                      ("Occupancy", vk.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR, "f64", 0.375),
                      ("Spills", f, "b32", 1)]
        self.fns = {
            "vkGetPipelineExecutablePropertiesKHR": self.ffi.callback(
                "PFN_vkGetPipelineExecutablePropertiesKHR", self._props),
            "vkGetPipelineExecutableStatisticsKHR": self.ffi.callback(
                "PFN_vkGetPipelineExecutableStatisticsKHR", self._stats),
            "vkGetPipelineExecutableInternalRepresentationsKHR": self.ffi.callback(
                "PFN_vkGetPipelineExecutableInternalRepresentationsKHR", self._irs)}

    def _fill(self, count, items, rows, stype, put) -> int:
        if items == self.ffi.NULL:
            count[0] = len(rows)
            return self.vk.VK_SUCCESS
        n = min(count[0], len(rows))
        for i in range(n):
            if items[i].sType != stype:
                return self.vk.VK_ERROR_INITIALIZATION_FAILED
            put(items[i], rows[i])
        count[0] = n
        return self.vk.VK_INCOMPLETE if n < len(rows) else self.vk.VK_SUCCESS

    def _props(self, device, info, count, items):
        def put(p, row):
            p.name, p.description, p.subgroupSize = row[0].encode(), row[1].encode(), row[2]
            p.stages = self.vk.VK_SHADER_STAGE_COMPUTE_BIT
        return self._fill(count, items, self.EXECUTABLES, self.vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR,
                          put)

    def _stats(self, device, info, count, items):
        def put(s, row):
            s.name, s.description, s.format = row[0].encode(), f"about {row[0]}".encode(), row[1]
            setattr(s.value, row[2], row[3] + info.executableIndex)
        return self._fill(count, items, self.stats, self.vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR, put)

    def _irs(self, device, info, count, items):
        incomplete = []

        def put(r, row):
            r.name, r.description, r.isText = row[0].encode(), b"", row[2]
            data = row[1] + (b"\0" if row[2] else b"")  # texts end in a NUL, counted in dataSize
            if r.pData != self.ffi.NULL:
                self.ffi.memmove(r.pData, data, min(r.dataSize, len(data)))
                incomplete.append(r.dataSize < len(data))
            r.dataSize = min(r.dataSize, len(data)) if r.pData != self.ffi.NULL else len(data)
        res = self._fill(count, items, self.IRS,
                         self.vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION_KHR, put)
        return self.vk.VK_INCOMPLETE if res == self.vk.VK_SUCCESS and any(incomplete) else res


def test_report_against_a_fake_driver():
    tool = _tool()
    fake = FakeDriver(tool.vk)
    pipeline = tool.vk.ffi.cast("VkPipeline", 0x1234)
    report = tool.pipeline_report(tool.vk.ffi.cast("VkDevice", 0x10), fake.fns, pipeline, ir_chars=100)
    assert [(e["name"], e["description"], e["subgroup_size"]) for e in report] == FakeDriver.EXECUTABLES
    assert report[0]["stages"] == tool.vk.VK_SHADER_STAGE_COMPUTE_BIT
    for i, exe in enumerate(report):  # the fake adds the executable's index: each asked for its own
        assert [(s["name"], s["format"], s["value"]) for s in exe["statistics"]] == [
            ("Registers", "uint64", 168 + i), ("Stack delta", "int64", -8 + i), ("Occupancy", "float64", 0.375 + i),
            ("Spills", "bool32", True)]
        assert exe["statistics"][0]["description"] == "about Registers"
        text, binary = exe["internal_representations"]
        full = FakeDriver.IRS[0][1].decode()
        assert (text["name"], text["is_text"], text["text"], text["truncated"]) == ("NVVM text", True, full[:100], True)
        assert text["bytes"] == len(full) + 1
        assert (binary["is_text"], binary["text"], binary["truncated"]) == (False, bytes(range(7)).hex(), False)
    line = tool.summary("w", {"kernel": "k", "workgroup_size": [64, 1, 1], "executables": report})
    assert "Compute sg32: Registers=168, Stack delta=-8, Occupancy=0.375, Spills=True" in line


def test_summary_keeps_the_ptxas_lines_of_an_opencl_build_log():
    log = ("ptxas info    : Compiling entry function 'main_kernel' for 'sm_90'\n"  # NVIDIA, -cl-nv-verbose
           "    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
           "some other line\n"
           "ptxas info    : Used 255 registers, 384 bytes cmem[0]\n")
    line = _tool().summary("w", {"kernel": "k", "workgroup_size": [8, 8, 1], "build_log": log})
    assert line.endswith("4 bytes spill loads | ptxas info    : Used 255 registers, 384 bytes cmem[0]")
    assert "other" not in line
