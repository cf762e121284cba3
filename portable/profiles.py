"""Device profiles: one TOML file per GPU family in `devices/`, matched to a live device by id and driver."""

from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path

from .backend import DeviceInfo

PROFILE_DIR = Path(__file__).resolve().parent.parent / "devices"


@lru_cache(maxsize=None)
def all_profiles() -> dict[str, dict]:
    """name -> profile dict, read once from devices/*.toml."""
    out = {}
    for p in sorted(PROFILE_DIR.glob("*.toml")):
        with open(p, "rb") as f:
            data = tomllib.load(f)
        data.setdefault("name", p.stem)
        out[data["name"]] = data
    if "generic" not in out:
        raise RuntimeError(f"devices/generic.toml is missing from {PROFILE_DIR}")
    return out


# A device id (PCI id) listed by a profile outranks any device name found: ids are exact, while a name can be
# generic ("AMD Radeon(TM) Graphics") or extend another ("Mali-G71" in "Mali-G710").
DEVICE_ID_SCORE = 1 << 16


def _as_list(v) -> list:
    return v if isinstance(v, list) else [v]


def _device_name_score(m: dict, name: str) -> int | None:
    """How specifically `m` names the device: the length of its longest `device_name` substring found in `name`
    (case-insensitive), 0 when the profile gives no `device_name`, None when it gives some and none is found."""
    if "device_name" not in m:
        return 0
    hits = [len(s) for s in _as_list(m["device_name"]) if s.lower() in name.lower()]
    return max(hits) if hits else None


def match_score(m: dict, info: DeviceInfo) -> int | None:
    """How well one profile's [match] rules fit `info` (higher is more specific), None when they do not.
    Shared with portable.package, which matches targets on hosts that have no devices/ folder."""
    if not m:
        return None
    if "api" in m and info.api not in _as_list(m["api"]):
        return None
    vendor_ok = "vendor_id" in m and info.vendor_id in _as_list(m["vendor_id"])
    driver_ok = "driver" in m and any(d.lower() in info.driver.lower() for d in _as_list(m["driver"]))
    if not (vendor_ok or driver_ok):
        return None
    if vendor_ok and info.device_id and info.device_id in _as_list(m.get("device_id", [])):
        return DEVICE_ID_SCORE
    return _device_name_score(m, info.name)


def match(info: DeviceInfo) -> dict:
    """The profile for a live device: all given match keys must agree; unknown hardware gets 'generic'.

    `api` must list the device's API; `vendor_id` or `driver` (a substring of the driver name) must agree. Then a
    profile whose `device_id` list holds the device's PCI id (with its `vendor_id` agreeing) is the match. Failing
    that, where a profile gives `device_name` (substrings of the device name; families of one vendor are told apart
    by it), one of them must occur in the name; an id missing from the lists (a part newer than them) still matches
    by name. Several profiles can agree when one name extends another ("Mali-G71" is in "Mali-G710"): the longest
    `device_name` found wins, and among equals (profiles without `device_name`) the first.
    """
    best, best_score = None, -1
    for prof in all_profiles().values():
        score = match_score(prof.get("match", {}), info)
        if score is not None and score > best_score:
            best, best_score = prof, score
    return best if best is not None else all_profiles()["generic"]


def codegen_options(profile: dict, info: DeviceInfo | None = None) -> dict:
    """Flat dict the compiler reads: the profile's codegen knobs clamped to the live device's limits."""
    opts = dict(profile.get("codegen", {}))
    opts["name"] = profile["name"]
    limits = dict(profile.get("limits", {}))
    if info is not None:
        limits.update({k: v for k, v in info.limits.items() if v is not None})
    opts["max_workgroup_count"] = tuple(limits.get("max_workgroup_count", (65535, 65535, 65535)))
    # Workgroup limits the strategies check their tiles against (strategy.py, coop_staging.py); every thread count
    # the profile asks for within the live device's invocations, as the largest power of two that fits.
    for key in ("max_workgroup_invocations", "max_workgroup_size", "shared_memory_bytes"):
        if limits.get(key):
            opts[key] = tuple(limits[key]) if isinstance(limits[key], (list, tuple)) else int(limits[key])
    cap = int(limits.get("max_workgroup_invocations") or 0)
    for key in ("workgroup_invocations", "matmul_workgroup_invocations", "elementwise_workgroup_invocations",
                "reduction_threads"):
        if cap and int(opts.get(key) or 0) > cap:
            opts[key] = 1 << (cap.bit_length() - 1)
    # The widths a pipeline may ask for (Vulkan subgroup size control on the live device, else the profile's list):
    # kernels laid over another width than the default one require it (compiler/coop_matrix.py).
    if info is not None and info.limits.get("subgroup_size_control"):
        lo, hi = int(info.limits["min_subgroup_size"]), int(info.limits["max_subgroup_size"])
        opts["subgroup_sizes"] = tuple(1 << b for b in range(lo.bit_length() - 1, hi.bit_length()))
    elif info is not None and info.limits.get("subgroup_size"):
        opts["subgroup_sizes"] = (int(info.limits["subgroup_size"]),)
    elif limits.get("subgroup_sizes"):
        opts["subgroup_sizes"] = tuple(int(v) for v in limits["subgroup_sizes"])
    # Strategies that lay data over a subgroup's lanes need its real width (the live device's where known); a key
    # written for another width is off (llvmpipe's subgroup is 4, 8 or 16 lanes with the host's vector width).
    if limits.get("subgroup_size"):
        opts["subgroup_size"] = int(limits["subgroup_size"])
        for key in ("subgroup_rows", "subgroup_shared_reads"):
            if opts.get(key) and int(opts[key]) != opts["subgroup_size"]:
                opts[key] = 0
    # CPU OpenCL: a thread's matmul/conv tile is this many of the host's SIMD float vectors wide.
    native = int(limits.get("native_float_vector_width") or 0)
    if opts.get("thread_tile_native_vectors") and native and opts.get("thread_tile"):
        opts["thread_tile"] = [int(opts["thread_tile"][0]), native * int(opts["thread_tile_native_vectors"])]
    # Streaming stores past the cache the live device reports (compiler/nontemporal.py).
    if opts.get("nontemporal_store_bytes") and limits.get("global_mem_cache_bytes"):
        opts["nontemporal_store_bytes"] = int(limits["global_mem_cache_bytes"])
    if opts.get("row_fusion_shared_bytes") and limits.get("shared_memory_bytes"):  # rows kept in workgroup memory
        opts["row_fusion_shared_bytes"] = min(int(opts["row_fusion_shared_bytes"]), int(limits["shared_memory_bytes"]))
    # The most bytes of a buffer one kernel may bind (Vulkan maxStorageBufferRange, the largest allocation):
    # kernels over larger tensors run in chunks (compiler/split.py); [codegen] max_bind_bytes can only lower it.
    bind = [int(v) for v in (limits.get("max_storage_buffer_range"), limits.get("max_buffer_bytes"),
                             opts.get("max_bind_bytes")) if v]
    opts["max_bind_bytes"] = min(bind) if bind else 0
    # Chunks start at multiples of this (Vulkan allows minStorageBufferOffsetAlignment up to 256 bytes).
    opts["bind_offset_alignment"] = max(256, int(limits.get("min_storage_buffer_offset_alignment") or 0))
    # Read-only streams through uniform texel buffers (codegen_spirv/texel_reads.py, where the profile or a caller
    # turns texel_reads on): at most this many 16-byte texels per buffer (Vulkan guarantees 65536).
    opts["max_texel_buffer_elements"] = int(limits.get("max_texel_buffer_elements") or 65536)
    # f16 arithmetic in kernels (OpenCL: cl_khr_fp16); without it f16 is storage only, math in f32.
    opts["fp16"] = bool(limits.get("fp16", False))
    # SPIR-V capabilities the device has for narrow and wide types, so such graphs compile natively.
    caps = list(opts.get("spirv_caps", ["Shader"]))
    exts = list(opts.get("spirv_exts", ["SPV_KHR_storage_buffer_storage_class"]))
    for key, cap, ext in (("fp16", "Float16", None), ("int8", "Int8", None), ("int16", "Int16", None),
                          ("int64", "Int64", None), ("fp64", "Float64", None),
                          ("storage_buffer_16bit", "StorageBuffer16BitAccess", "SPV_KHR_16bit_storage"),
                          ("storage_buffer_8bit", "StorageBuffer8BitAccess", "SPV_KHR_8bit_storage")):
        if limits.get(key) and cap not in caps:
            caps.append(cap)
            if ext and ext not in exts:
                exts.append(ext)
    if limits.get("cooperative_matrix") and limits.get("cooperative_matrix_shapes"):
        # Shapes the device multiplies on cooperative matrices (VK_KHR_cooperative_matrix), e.g.
        # "16x16x16 f16*f16+f32->f32"; the compiler uses them for f16 matmuls on Vulkan.
        opts["cooperative_matrix_shapes"] = tuple(limits["cooperative_matrix_shapes"])
        if "CooperativeMatrixKHR" not in caps:
            caps.append("CooperativeMatrixKHR")
            exts.append("SPV_KHR_cooperative_matrix")
    opts["spirv_caps"], opts["spirv_exts"] = caps, exts
    # Reductions by the device's own subgroup reduction (compiler/subgroup_reduce.py, "varying") only where the live
    # device has it: Vulkan's subgroup arithmetic in compute, OpenCL's sub_group_* built-ins.
    if info is not None and opts.get("subgroup_reduce") == "varying":
        if info.api == "vulkan" and info.limits.get("subgroup_arithmetic") is False:
            opts["subgroup_reduce"] = False
        if info.api == "opencl":
            opts["opencl_subgroups"] = bool(opts.get("opencl_subgroups")) and bool(
                {"cl_khr_subgroups", "cl_intel_subgroups"} & set(info.limits.get("extensions") or ()))
    return opts
