"""Device profiles: one TOML file per GPU family in `device_profiles/`, matched to a live device by id and driver.

A file loads into a frozen, typed `Profile` (sections `Match`, `Limits`, `Codegen`); a key no section knows, or a
value of the wrong type, is refused with the file, the key and the nearest valid key, so a misspelt key cannot be
silently ignored.
"""

from __future__ import annotations

import dataclasses
import difflib
import tomllib
import types
import typing
from dataclasses import dataclass, field, fields
from functools import cache
from pathlib import Path
from typing import Any, Union

from .backend import DeviceInfo
from .errors import PortableError

PROFILE_DIR = Path(__file__).resolve().parent / "device_profiles"


class ProfileError(PortableError):
    """A device_profiles/*.toml file has a key no profile section knows or a value of the wrong type."""


IntList = tuple[int, ...]
StrList = tuple[str, ...]


@dataclass(frozen=True)
class Section:
    """A profile section: every field optional (None = not given, the compiler's default applies)."""

    def given(self) -> dict[str, Any]:
        """The keys the file gave, as the compiler's options read them (lists as TOML had them)."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self) if getattr(self, f.name) is not None}


@dataclass(frozen=True)
class Match(Section):
    """How a live device is recognised (see `match`): each key a value or a list of them."""

    api: StrList | None = None  # "vulkan" | "opencl"
    vendor_id: IntList | None = None  # PCI vendor ids
    device_id: IntList | None = None  # PCI device ids (with vendor_id agreeing)
    device_name: StrList | None = None  # substrings of the device name
    driver: StrList | None = None  # substrings of the driver name


@dataclass(frozen=True)
class Limits(Section):
    """What the hardware and driver allow; the live device's own values win where it reports them."""

    subgroup_size: int | None = None
    subgroup_sizes: IntList | None = None
    shared_memory_bytes: int | None = None
    max_workgroup_invocations: int | None = None
    max_workgroup_size: IntList | None = None
    max_workgroup_count: IntList | None = None
    max_storage_buffer_range: int | None = None
    max_buffer_bytes: int | None = None
    max_texel_buffer_elements: int | None = None
    min_storage_buffer_offset_alignment: int | None = None
    preferred_vector_width: int | None = None
    native_float_vector_width: int | None = None
    global_mem_cache_bytes: int | None = None
    fp16: bool | None = None
    fp64: bool | None = None
    int8: bool | None = None
    int16: bool | None = None
    int64: bool | None = None
    storage_buffer_8bit: bool | None = None
    storage_buffer_16bit: bool | None = None
    cooperative_matrix: bool | None = None
    cooperative_matrix_shapes: StrList | None = None


@dataclass(frozen=True)
class Codegen(Section):
    """Strategy knobs the compiler reads (compiler/strategy/choice.py and the passes named in each file's comments)."""

    workgroup_invocations: int | None = None
    matmul_workgroup_invocations: int | None = None
    elementwise_workgroup_invocations: int | None = None
    thread_tile: IntList | None = None
    thread_tile_native_vectors: int | None = None
    elementwise_per_thread: int | None = None
    elementwise_rows_per_thread: int | None = None
    elementwise_dividing_tiles: bool | None = None
    reduction_threads: int | None = None
    fill_threads: int | None = None
    launch_ops: int | None = None
    min_workgroups: int | None = None
    im2col_max_bytes: int | None = None
    conv_pixel_multiple: int | None = None
    conv_k_multiple: int | None = None
    conv_winograd: bool | None = None
    conv_batch_rows: bool | None = None
    max_loop_iterations: int | None = None
    max_vector_width: int | None = None
    max_bind_bytes: int | None = None
    vectorize: bool | None = None
    vectorize_gathers: bool | None = None
    conv_vector_taps: bool | None = None
    conv_row_columns: int | None = None
    conv_stride_phases: bool | None = None
    window_taps: int | None = None
    window_outputs_per_thread: int | None = None
    matmul_thread_tile: IntList | None = None
    matmul_k_tile: int | None = None
    matmul_threads_x: int | None = None
    matmul_threads_x_slab_bytes: int | None = None
    matmul_row_vector_cols: int | None = None
    matmul_short_rows_widen: bool | None = None
    matmul_promote_tiles: tuple[IntList, ...] | None = None
    matmul_promote_min_workgroups: int | None = None
    matmul_promote_k: int | None = None
    coop_workgroup_tile: IntList | None = None
    coop_subgroup_tile: IntList | None = None
    coop_small_tiles: IntList | None = None
    coop_small_tiles_below: int | None = None
    coop_stage_k: int | None = None
    subgroup_reduce: bool | str | None = None  # true: shuffles at subgroup_size; "varying": the device's own
    subgroup_shared_reads: int | None = None
    subgroup_rows: int | None = None
    subgroup_row_columns: int | None = None
    opencl_subgroups: bool | None = None
    opencl_asm: str | None = None
    row_registers: int | None = None
    row_vector_columns: int | None = None
    row_workgroup_columns: int | None = None
    row_fusion_shared_bytes: int | None = None
    row_fusion_private_bytes: int | None = None
    recompute_private_rows: bool | None = None
    loop_vectorize: int | None = None
    wide_buffers: bool | None = None
    texel_reads: bool | None = None
    gelu_as_sigmoid: bool | None = None
    sext_via_shifts: bool | None = None
    nontemporal_store_bytes: int | None = None
    spirv_version: str | None = None
    spirv_caps: StrList | None = None
    spirv_exts: StrList | None = None


@dataclass(frozen=True)
class Options(Codegen):
    """What one compile's strategies read: the [codegen] knobs, the limits `codegen_options` derives from the
    profile and the live device, and knobs the compiler sets for one choice. None: not set (the reader's default).
    Built from the options dict the pipeline passes (`Options.of`), which refuses keys it does not know."""

    name: str | None = None
    max_workgroup_count: IntList | None = None
    max_workgroup_size: IntList | None = None
    max_workgroup_invocations: int | None = None
    shared_memory_bytes: int | None = None
    subgroup_size: int | None = None
    subgroup_sizes: IntList | None = None
    bind_offset_alignment: int | None = None
    max_texel_buffer_elements: int | None = None
    fp16: bool | None = None
    cooperative_matrix_shapes: StrList | None = None
    vectorize_gathers: bool | str | None = None  # for_targets: "contiguous" where SPIR-V takes only plain loads
    # Set by the compiler for one strategy choice (compiler/strategy/choice.py, pipeline.py):
    vector_cols: int | None = None  # a matrix-vector product's columns per thread (key "_vector_cols")
    split_k_max_outputs: int | None = None
    matmul_promote_tile: IntList | None = None
    elementwise_grid_workgroups: int | None = None
    coop_stage_buffers: int | None = None

    @classmethod
    def of(cls, options: Any) -> Options:
        """Typed options from the dict the pipeline passes (or Options as they are)."""
        if isinstance(options, Options):
            return options
        hints = _hints(cls)
        values = {}
        for key, v in options.items():
            name = key.lstrip("_")
            if name not in hints:
                raise _unknown(Path("codegen options"), "the options", key, list(hints))
            values[name] = None if v is None else _convert(Path("codegen options"), key, hints[name], v)
        return cls(**values)

    def replace(self, **changes: Any) -> Options:
        return dataclasses.replace(self, **changes)

    def given(self) -> dict[str, Any]:
        """The options set (not None), as plain values: the cache key and `bench aot`'s record read them."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    # A read-only mapping view for callers outside the compiler (tests, benchmarks, conformance) that look a knob
    # up by name or override some with `dict(options, key=value)`; the compiler itself reads the fields.
    def keys(self) -> list[str]:
        return list(self.given())

    def items(self) -> list[tuple[str, Any]]:
        return list(self.given().items())

    def __iter__(self):
        return iter(self.given())

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self.given()

    def __getitem__(self, key: str) -> Any:
        value = getattr(self, key, None) if key in _hints(Options) else None
        if value is None:
            raise KeyError(key)
        return value

    def get(self, key: str, default: Any = None) -> Any:
        value = getattr(self, key, None) if key in _hints(Options) else None
        return default if value is None else value


@dataclass(frozen=True)
class Packaging(Section):
    """Ahead-of-time packages: live limits (a [limits]-like table each) whose kernels a package also carries."""

    variants: tuple[Limits, ...] | None = None


@dataclass(frozen=True)
class Profile:
    """One device_profiles/*.toml file, validated and typed."""

    name: str
    description: str
    path: Path | None = None
    quirks: StrList = ()
    match: Match = field(default_factory=Match)
    limits: Limits = field(default_factory=Limits)
    codegen: Codegen = field(default_factory=Codegen)
    package: Packaging = field(default_factory=Packaging)
    # The file as TOML read it, for the transition accessor below only.
    raw: dict = field(default_factory=dict, repr=False, compare=False, hash=False)

    def get(self, key: str, default: Any = None) -> Any:
        """Transition accessor: a top-level key or section as the TOML file had it (plain dicts and lists), for
        readers not yet on the typed fields (package.py, conformance/execute.py, tests that build options)."""
        return self.raw.get(key, default)

    def __getitem__(self, key: str) -> Any:
        return self.raw[key]

    def __str__(self) -> str:
        return self.name


SECTIONS = {"match": Match, "limits": Limits, "codegen": Codegen, "package": Packaging}
TOP_KEYS = ("name", "description", "quirks", *SECTIONS)


def _plain(v: Any) -> Any:
    """Typed values back to the TOML form the compiler's options use (lists, dicts)."""
    if isinstance(v, Section):
        return v.given()
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    return v


def _unknown(path: Path, where: str, key: str, valid: typing.Iterable[str]) -> ProfileError:
    near = difflib.get_close_matches(key, list(valid), n=1, cutoff=0.6)
    hint = f"; did you mean {near[0]!r}?" if near else f"; valid keys: {', '.join(sorted(valid))}"
    return ProfileError(f"{path}: unknown key {key!r} in {where}{hint} (fix or remove it: a key no section knows "
                        f"would be silently ignored)")


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _convert(path: Path, key: str, tp: Any, v: Any) -> Any:
    """`v` as type `tp` (scalars, tuples for lists; a scalar where a list is expected becomes a list of one)."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        errors = []
        for alt in typing.get_args(tp):
            if alt is type(None):
                continue
            try:
                return _convert(path, key, alt, v)
            except ProfileError as e:
                errors.append(e)
        raise errors[-1] if len(errors) == 1 else ProfileError(
            f"{path}: {key} = {v!r} should be "
            f"{' or '.join(_type_name(a) for a in typing.get_args(tp) if a is not type(None))}")
    if origin is tuple:
        item = typing.get_args(tp)[0]
        seq = v if isinstance(v, (list, tuple)) else [v]
        return tuple(_convert(path, key, item, x) for x in seq)
    if isinstance(tp, type) and issubclass(tp, Section):
        if not isinstance(v, dict):
            raise ProfileError(f"{path}: {key} should be a table of {tp.__name__.lower()} keys, got {v!r}")
        return _section(path, key, tp, v)
    ok = isinstance(v, tp) and not (tp is int and isinstance(v, bool))
    if not ok:
        raise ProfileError(f"{path}: {key} = {v!r} should be {_type_name(tp)}, not {type(v).__name__}")
    return v


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _section(path: Path, where: str, cls: type, data: dict) -> Section:
    hints = _hints(cls)
    names = [f.name for f in fields(cls)]
    values = {}
    for key, v in data.items():
        if key not in hints:
            raise _unknown(path, f"[{where}]", key, names)
        values[key] = _convert(path, f"[{where}] {key}", hints[key], v)
    return cls(**values)


def load(path: str | Path) -> Profile:
    """Read and validate one profile file; raises ProfileError naming the file and the key at fault."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ProfileError(f"{path}: not valid TOML ({e}); fix the line it names") from e
    for key in data:
        if key not in TOP_KEYS:
            raise _unknown(path, "the top level", key, TOP_KEYS)
    data.setdefault("name", path.stem)
    for key in ("name", "description"):
        if not isinstance(data.get(key, ""), str):
            raise ProfileError(f"{path}: {key} = {data[key]!r} should be str")
    sections = {k: _convert(path, k, cls, data.get(k, {})) for k, cls in SECTIONS.items()}
    quirks = _convert(path, "quirks", StrList, data.get("quirks", []))
    return Profile(name=data["name"], description=data.get("description", ""), path=path, quirks=quirks,
                   raw=data, **sections)


@cache
def all_profiles() -> dict[str, Profile]:
    """name -> Profile, read once from device_profiles/*.toml."""
    out = {}
    for p in sorted(PROFILE_DIR.glob("*.toml")):
        prof = load(p)
        out[prof.name] = prof
    if "generic" not in out:
        raise ProfileError(f"device_profiles/generic.toml is missing from {PROFILE_DIR}; reinstall portable (the "
                           "profiles ship with the package) or restore the file")
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
    Shared with portable.package, which matches targets on hosts that have no device_profiles/ folder."""
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


def match(info: DeviceInfo) -> Profile:
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
        score = match_score(prof.match.given(), info)
        if score is not None and score > best_score:
            best, best_score = prof, score
    return best if best is not None else all_profiles()["generic"]


def codegen_options(profile: Profile, info: DeviceInfo | None = None) -> Options:
    """The typed options the compiler reads: the profile's codegen knobs clamped to the live device's limits."""
    opts = profile.codegen.given()
    opts["name"] = profile.name
    limits = profile.limits.given()
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
    # kernels laid over another width than the default one require it (compiler/schedule/coop_matrix.py).
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
    # Streaming stores past the cache the live device reports (codegen_opencl/nontemporal.py).
    if opts.get("nontemporal_store_bytes") and limits.get("global_mem_cache_bytes"):
        opts["nontemporal_store_bytes"] = int(limits["global_mem_cache_bytes"])
    if opts.get("row_fusion_shared_bytes") and limits.get("shared_memory_bytes"):  # rows kept in workgroup memory
        opts["row_fusion_shared_bytes"] = min(int(opts["row_fusion_shared_bytes"]), int(limits["shared_memory_bytes"]))
    # The most bytes of a buffer one kernel may bind (Vulkan maxStorageBufferRange, the largest allocation):
    # kernels over larger tensors run in chunks (compiler/dispatch/split.py); [codegen] max_bind_bytes can only lower
    # it.
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
    # Reductions by the device's own subgroup reduction (compiler/schedule/subgroup_reduce.py, "varying") only where
    # the live device has it: Vulkan's subgroup arithmetic in compute, OpenCL's sub_group_* built-ins.
    if info is not None and opts.get("subgroup_reduce") == "varying":
        if info.api == "vulkan" and info.limits.get("subgroup_arithmetic") is False:
            opts["subgroup_reduce"] = False
        if info.api == "opencl":
            opts["opencl_subgroups"] = bool(opts.get("opencl_subgroups")) and bool(
                {"cl_khr_subgroups", "cl_intel_subgroups"} & set(info.limits.get("extensions") or ()))
    return Options.of(opts)
