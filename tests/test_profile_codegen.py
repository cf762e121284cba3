"""What a device profile makes the compiler do (device_profiles/*.toml; loading and matching: test_profiles.py): the
codegen options fit the profile's and a live device's limits and follow what the live device reports, and every
profile's options compile a matmul+bias+relu and a softmax into SPIR-V that spirv-val accepts under the Vulkan
environment of the profile's SPIR-V version, plus OpenCL C. No device is needed."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_profiles import ALL, QCOM_VK, TARGET_ENV, info

from portable import profiles
from portable.backend import DeviceInfo


# ---- codegen options ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ALL)
def test_codegen_workgroups_fit_the_profile(name):
    prof = profiles.all_profiles()[name]
    opts = profiles.codegen_options(prof)
    cap = prof["limits"].get("max_workgroup_invocations", 128)  # Vulkan's guaranteed minimum when unstated
    for key in ("workgroup_invocations", "matmul_workgroup_invocations", "reduction_threads"):
        if opts.get(key):
            assert opts[key] <= cap, f"{name}: {key} {opts[key]} > max_workgroup_invocations {cap}"
            assert opts[key] & (opts[key] - 1) == 0, f"{name}: {key} {opts[key]} is not a power of two"
    sub = prof["limits"].get("subgroup_size", 1)
    for key in ("workgroup_invocations", "matmul_workgroup_invocations", "reduction_threads"):
        if sub > 1 and opts.get(key):
            assert opts[key] % sub == 0, f"{name}: {key} {opts[key]} is not a multiple of the subgroup {sub}"
    tm, tn = opts.get("thread_tile", (4, 4))
    # A GPU holds an accumulator per 32-bit register; a CPU profile's wide vectors (max_vector_width 8/16:
    # ymm/zmm) hold that many each.
    width = int(opts.get("max_vector_width", 1))
    regs = tm * -(-tn // width) if width > 4 else tm * tn
    assert regs <= 64, f"{name}: thread_tile {tm}x{tn} holds too many accumulators per thread"
    # The narrow and wide types a profile claims reach its SPIR-V target environment, and only those.
    lim = prof["limits"]
    for key, cap_name in (("fp16", "Float16"), ("int8", "Int8"), ("int16", "Int16"), ("int64", "Int64"),
                          ("fp64", "Float64"), ("storage_buffer_16bit", "StorageBuffer16BitAccess"),
                          ("storage_buffer_8bit", "StorageBuffer8BitAccess")):
        declared = cap_name in prof["codegen"].get("spirv_caps", [])
        assert (cap_name in opts["spirv_caps"]) == bool(lim.get(key) or declared), f"{name}: {cap_name}"


def test_codegen_options_clamp_to_a_smaller_live_device():
    """A live device with fewer invocations than the profile assumes wins (e.g. an A702 under the 6xx profile)."""
    prof = profiles.all_profiles()["qualcomm-adreno-6xx"]
    live = dataclasses.replace(info("Adreno (TM) 702", QCOM_VK, 0x5143),
                               limits={"max_workgroup_invocations": 64, "fp16": True})
    opts = profiles.codegen_options(prof, live)
    assert opts["workgroup_invocations"] == 64 and opts["fp16"] is True and "Float16" in opts["spirv_caps"]


@pytest.mark.parametrize("name", ["nvidia", "amd-rdna3", "intel-xe"])
def test_kernels_fit_a_live_device_smaller_than_the_profile(name):
    """Every thread count the profile asks for (rows, matmul, elementwise, promoted tiles) stays
    within the live device's invocations and shared memory, so the runtime never refuses a kernel the compiler
    chose (a part of a family with a smaller limit than the profile's)."""
    pytest.importorskip("torch_mlir", reason="the MLIR Python bindings (torch-mlir wheel) are not installed")
    from portable.compiler.pipeline import compile_module
    from portable.frontend.graph import Graph

    prof = profiles.all_profiles()[name]
    live = dataclasses.replace(info("small part", "x", 0), limits={"max_workgroup_invocations": 96,
                                                               "max_workgroup_size": [96, 96, 64],
                                                               "shared_memory_bytes": 8192})
    opts = profiles.codegen_options(prof, live)
    assert opts["reduction_threads"] <= 64 and opts["workgroup_invocations"] <= 64
    g = Graph()
    x = g.input((64, 4096))
    g.output(g.softmax(x, axis=-1), g.matmul(g.input((1024, 1024)), g.input((1024, 1024))), g.add(x, x))
    exe = compile_module(g.to_mlir(), opts, ("vulkan", "opencl"))
    for k in exe.kernels:
        assert int(np.prod(k.workgroup_size)) <= 96, k.workgroup_size
    # Shared memory alone: promoted tiles ([64, 64] x K 32 of f32 is 16 KiB) are not taken on an 8 KiB part.
    g = Graph()
    g.output(g.matmul(g.input((1024, 1024)), g.input((1024, 1024))))
    small = profiles.codegen_options(prof, dataclasses.replace(live, limits={"shared_memory_bytes": 8192}))
    big = profiles.codegen_options(prof, dataclasses.replace(live, limits={"shared_memory_bytes": 65536}))
    assert "barrier" in compile_module(g.to_mlir(), big, ("opencl",)).kernels[0].opencl
    assert "barrier" not in compile_module(g.to_mlir(), small, ("opencl",)).kernels[0].opencl


@pytest.mark.parametrize("lanes", [4, 8, 16])
def test_subgroup_layouts_follow_the_live_subgroup_size(lanes):
    """lavapipe's subgroup is as wide as the host's vectors: the strategies laid out over 8 lanes stay on only
    where the live device reports 8, and SPIR-V's target gets the live size (compiler/subgroup_*.py)."""
    prof = profiles.all_profiles()["lavapipe"]
    live = dataclasses.replace(info("llvmpipe (LLVM 15.0.6, 128 bits)", "llvmpipe", 0x10005, device_type="cpu"),
                               limits={"subgroup_size": lanes})
    opts = profiles.codegen_options(prof, live)
    assert opts["subgroup_size"] == lanes
    assert bool(opts["subgroup_rows"]) == bool(opts["subgroup_shared_reads"]) == (lanes == 8)


@pytest.mark.parametrize("lanes,tile", [(8, [8, 16]), (16, [8, 32]), (0, [8, 16])])
def test_pocl_tile_follows_the_host_vector_width(lanes, tile):
    """PoCL's matmul/conv thread tile is two of the host's SIMD float vectors wide (AVX2: 8 lanes, AVX-512: 16);
    where the width is not reported, the profile's 8x16 stays (it does not spill on AVX2)."""
    prof = profiles.all_profiles()["pocl"]
    live = dataclasses.replace(info("pthread-haswell-AMD EPYC", "Portable Computing Language", 0x1006, "opencl",
                                    device_type="cpu"), limits={"native_float_vector_width": lanes})
    assert profiles.codegen_options(prof, live)["thread_tile"] == tuple(tile)


@pytest.mark.parametrize("cache,threshold", [(32 << 20, 32 << 20), (256 << 20, 256 << 20), (0, 32 << 20)])
def test_pocl_streams_stores_past_the_live_cache(cache, threshold):
    """PoCL's kernels store with nontemporal hints once their buffers outgrow the cache the device reports
    (CL_DEVICE_GLOBAL_MEM_CACHE_SIZE); without the query the profile's 32 MiB stays. Other profiles never do."""
    prof = profiles.all_profiles()["pocl"]
    live = dataclasses.replace(info("pthread-haswell-AMD EPYC", "Portable Computing Language", 0x1006, "opencl",
                                    device_type="cpu"), limits={"global_mem_cache_bytes": cache})
    assert profiles.codegen_options(prof, live)["nontemporal_store_bytes"] == threshold
    nvidia = profiles.all_profiles()["nvidia"]
    assert not profiles.codegen_options(nvidia, live).get("nontemporal_store_bytes")


# ---- every profile compiles and validates -------------------------------------------------------------
def _matmul_bias_relu() -> str:
    from portable.frontend.graph import Graph

    rng = np.random.default_rng(0)
    g = Graph()
    x = g.input((64, 96))
    w = g.constant(rng.standard_normal((96, 128)).astype(np.float32))
    b = g.constant(rng.standard_normal((128,)).astype(np.float32))
    g.output(g.relu(g.add(g.matmul(x, w), b)))
    return g.to_mlir()


def _softmax() -> str:
    from portable.frontend.graph import Graph

    g = Graph()
    g.output(g.softmax(g.input((16, 1024))))  # rows long enough for every profile's workgroup reduction
    return g.to_mlir()


@pytest.fixture(scope="module")
def graphs():
    pytest.importorskip("torch_mlir", reason="the MLIR Python bindings (torch-mlir wheel) are not installed")
    return {"matmul_bias_relu": _matmul_bias_relu(), "softmax": _softmax()}


@pytest.mark.parametrize("name", ALL)
def test_every_profile_compiles_and_validates(name, graphs):
    from portable.codegen_spirv import validate
    from portable.compiler.pipeline import compile_module

    prof = profiles.all_profiles()[name]
    opts = profiles.codegen_options(prof)
    version = opts.get("spirv_version", "v1.3")
    env = TARGET_ENV[version]
    major, minor = (int(v) for v in version.lstrip("v").split("."))
    cap = prof["limits"].get("max_workgroup_invocations", 128)
    for gname, text in graphs.items():
        exe = compile_module(text, opts, ("vulkan", "opencl"))
        assert exe.kernels, f"{name}/{gname}: no kernels"
        for k in exe.kernels:
            assert k.spirv and k.opencl, f"{name}/{gname}/{k.name}: missing a target"
            header = np.frombuffer(k.spirv[:8], dtype=np.uint32)
            assert int(header[1]) == (major << 16) | (minor << 8), f"{name}/{gname}/{k.name}: SPIR-V version"
            validate(k.spirv, env)
            assert int(np.prod(k.workgroup_size)) <= cap, f"{name}/{gname}/{k.name}: {k.workgroup_size} > {cap}"


@pytest.mark.parametrize("name", [n for n in ALL if profiles.all_profiles()[n].get("codegen", {}).get(
    "subgroup_reduce") == "varying"])
def test_subgroup_reductions_follow_the_live_device(name):
    """A profile's reductions by the device's own subgroup reduction ("varying": AMD, Intel, Mali Valhall, Adreno)
    apply only where the live device has it: Vulkan subgroup arithmetic in compute; on OpenCL, where the profile
    allows subgroups at all, cl_khr_subgroups or cl_intel_subgroups among the device's extensions."""
    prof = profiles.all_profiles()[name]
    assert "GroupNonUniformArithmetic" in prof["codegen"]["spirv_caps"], name

    def live(api: str, **limits) -> DeviceInfo:
        return DeviceInfo(api=api, index=0, name="x", driver="x", driver_version="", vendor_id=0, device_id=0,
                          device_type="gpu", limits=dict(prof.get("limits", {}), **limits))

    assert profiles.codegen_options(prof, live("vulkan", subgroup_arithmetic=True))["subgroup_reduce"] == "varying"
    assert profiles.codegen_options(prof, live("vulkan", subgroup_arithmetic=False))["subgroup_reduce"] is False
    allowed = bool(prof["codegen"].get("opencl_subgroups"))
    with_ext = profiles.codegen_options(prof, live("opencl", extensions=["cl_khr_fp16", "cl_khr_subgroups"]))
    assert with_ext["opencl_subgroups"] is allowed
    assert profiles.codegen_options(prof, live("opencl", extensions=["cl_khr_fp16"]))["opencl_subgroups"] is False


def test_compile_options_are_typed_and_checked():
    """The options a compile reads become typed Options (strategies read fields); a misspelt override is refused
    with the nearest key instead of being ignored."""
    opts = profiles.Options.of(profiles.codegen_options(profiles.all_profiles()["nvidia"]))
    assert opts.thread_tile == (8, 4) and opts.max_workgroup_count == (2147483647, 65535, 65535)
    assert opts.matmul_thread_tile is None and opts.replace(thread_tile=(2, 2)).thread_tile == (2, 2)
    assert profiles.Options.of({"_vector_cols": 16}).vector_cols == 16
    with pytest.raises(profiles.ProfileError, match="'window_tap'.*did you mean 'window_taps'"):
        profiles.Options.of(dict(profiles.codegen_options(profiles.all_profiles()["generic"]), window_tap=27))
