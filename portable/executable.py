"""The compiled form of a graph: kernels plus a plan, as plain data.

An Executable is what the compiler hands the runtime. It holds no MLIR objects, so it can be written to a
file here and run on a host that has only numpy plus `vulkan` or `pyopencl`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import math
import tokenize
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import archive
from .errors import InvalidArgument, InvalidPlan, PackageError, ShapeMismatch

FORMAT_VERSION = 6  # 2: dispatches may bind byte ranges of slots (offsets, sizes); 3: int64 held as int32;
# 4: float16 held as float32; 5: kernels may read buffers as uniform texel buffers; 6: kernels may require a
# subgroup width
READABLE_VERSIONS = (1, 2, 3, 4, 5, 6)


@dataclass(frozen=True)
class Kernel:
    """One GPU kernel in every form the targets need.

    Buffer argument i is descriptor (set 0, binding i) on Vulkan and kernel argument i on OpenCL.
    `push_constants` names 32-bit integer scalars that follow the buffers: Vulkan push constants at offset
    4*j, OpenCL trailing `int` arguments.
    """

    name: str
    workgroup_size: tuple[int, int, int]
    num_buffers: int
    spirv: bytes | None = None
    opencl: str | None = None
    push_constants: tuple[str, ...] = ()
    # Per buffer: "r", "w" or "rw" (lets a runtime place barriers only on real dependencies).
    access: tuple[str, ...] = ()
    # Buffers the SPIR-V reads as uniform texel buffers of R32G32B32A32_UINT texels (codegen_spirv/texel_reads.py):
    # Vulkan binds them through a buffer view of that format; OpenCL ignores this.
    texel_buffers: tuple[int, ...] = ()
    # The subgroup width the kernel is laid over (shuffles over that many lanes, cooperative matrices), which a
    # Vulkan pipeline then requires (VK_EXT_subgroup_size_control); 0: any width.
    subgroup_size: int = 0

    def key(self) -> str:
        """Content hash: names a kernel in driver caches."""
        h = hashlib.sha256()
        h.update(repr((self.name, self.workgroup_size, self.num_buffers, self.push_constants)).encode())
        if self.texel_buffers:  # (keys of kernels without stay as they were)
            h.update(repr(self.texel_buffers).encode())
        if self.subgroup_size:
            h.update(f"subgroup {self.subgroup_size}".encode())
        h.update(self.spirv or b"")
        h.update((self.opencl or "").encode())
        return h.hexdigest()[:32]


@dataclass(frozen=True)
class TensorSig:
    shape: tuple[int, ...]
    dtype: str  # numpy dtype name: "float32", "int32", ...: what the caller passes and gets back
    # What the device holds where it differs: "int32" for an int64 tensor on a device without 64-bit integers
    # (compiler/graph/narrow_i64.py), "float32" for a float16 one on a device without 16-bit storage
    # (compiler/graph/widen_f16.py); the runtime converts at the boundary.
    device: str = ""
    # (lo, hi, why): the values an integer input may hold, where a kernel reads memory at them unchecked (token ids
    # into an embedding); the runtime refuses others, as onnxruntime does.
    valid: tuple = ()

    @property
    def device_dtype(self) -> str:
        return self.device or self.dtype

    @property
    def nbytes(self) -> int:
        """Bytes on the device."""
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.device_dtype).itemsize

    def to_device(self, arr: np.ndarray, what: str) -> np.ndarray:
        """`arr` (already of `dtype`) as the device holds it; values that do not fit, or that leave `valid`, are an
        error."""
        if self.valid and arr.size:
            lo, hi, why = self.valid
            bad = (arr < lo) | (arr > hi)
            if bad.any():
                at = tuple(int(i) for i in np.argwhere(bad)[0])
                raise InvalidArgument(f"{what}: value {arr[at]} at {at} is out of range: {why} (valid: {lo} to {hi}); "
                                      f"check the ids against the model's vocabulary or table size")
        if not self.device:
            return arr
        if np.dtype(self.device).kind == "f":  # wider: every value fits
            return np.ascontiguousarray(arr.astype(self.device))
        info = np.iinfo(self.device)
        if arr.size and (arr.min() < info.min or arr.max() > info.max):
            raise ShapeMismatch(f"{what}: values from {arr.min()} to {arr.max()} do not fit {self.device}, which this "
                                f"executable computes {self.dtype} in (the device has no 64-bit integers)")
        return np.ascontiguousarray(arr.astype(self.device))

    def to_host(self, raw: np.ndarray) -> np.ndarray:
        """The device's bytes (uint8) as an array of `dtype` and `shape`."""
        out = raw.view(self.device_dtype).reshape(self.shape)
        return out.astype(self.dtype) if self.device else out


def _sig_dict(sig: TensorSig) -> dict:
    """A signature as plain data; `device` and `valid` only where set, so other plans stay as they were."""
    return {k: (list(v) if k == "valid" else v) for k, v in dataclasses.asdict(sig).items()
            if k not in ("device", "valid") or v}


def _sig(s: dict) -> TensorSig:
    valid = s.get("valid") or ()
    if valid and not (len(valid) == 3 and all(isinstance(v, int) and not isinstance(v, bool) for v in valid[:2])
                      and isinstance(valid[2], str)):
        raise InvalidPlan(f"an input's valid range {valid!r} is not [lo, hi, why]")
    return TensorSig(tuple(s["shape"]), s["dtype"], s.get("device", ""), tuple(valid))


@dataclass(frozen=True)
class Slot:
    """A buffer the plan uses. kind: input | output | constant | temp. Reshapes of a value share its slot."""

    id: int
    nbytes: int
    kind: str
    index: int = -1  # input position for kind == "input"


@dataclass(frozen=True)
class Dispatch:
    """One kernel launch. With `offsets`/`sizes` (one per buffer argument) argument i binds `sizes[i]` bytes of
    its slot from byte `offsets[i]` (a kernel run in chunks of a tensor larger than the device can bind);
    without them every slot is bound whole."""

    kernel: int  # index into Executable.kernels
    slots: tuple[int, ...]  # slot id per buffer argument
    grid: tuple[int, int, int]  # workgroup counts
    push_constants: tuple[int, ...] = ()
    offsets: tuple[int, ...] = ()
    sizes: tuple[int, ...] = ()

    def binding(self, i: int, slot_bytes: int) -> tuple[int, int]:
        """(byte offset, bytes) of argument i in its slot."""
        return (self.offsets[i], self.sizes[i]) if self.offsets else (0, slot_bytes)


@dataclass
class Executable:
    """Kernels + plan. `outputs[i]` = (slot, signature)."""

    kernels: list[Kernel]
    slots: list[Slot]
    dispatches: list[Dispatch]
    inputs: list[TensorSig]
    input_slots: list[int]
    outputs: list[tuple[int, TensorSig]]
    constants: dict[int, np.ndarray] = field(default_factory=dict)  # slot id -> data
    target: str = ""  # "vulkan" or "opencl"
    profile: str = ""  # device profile the kernels were tuned for
    source_hash: str = ""  # hash of the input graph + options (names caches)

    # ---- plain data: the plan as JSON-able dicts, blobs (kernels, constants) through put/get callbacks ----
    def plan_dict(self) -> dict:
        """Slots, dispatches and signatures as JSON-able data (kernels and constants are stored apart)."""
        return {
            "slots": [dataclasses.asdict(s) for s in self.slots],
            # Byte ranges only where a dispatch has them: plans without stay byte-identical to format 1.
            "dispatches": [{k: v for k, v in dataclasses.asdict(d).items() if v or k not in ("offsets", "sizes")}
                           for d in self.dispatches],
            "inputs": [_sig_dict(s) for s in self.inputs],
            "input_slots": self.input_slots,
            "outputs": [[slot, _sig_dict(sig)] for slot, sig in self.outputs],
        }

    @staticmethod
    def plan_from_dict(m: dict) -> dict:
        """Constructor arguments for the plan part of an Executable from plan_dict() data."""
        return {
            "slots": [Slot(**s) for s in m["slots"]],
            "dispatches": [Dispatch(kernel=d["kernel"], slots=tuple(d["slots"]), grid=tuple(d["grid"]),
                                 push_constants=tuple(d["push_constants"]), offsets=tuple(d.get("offsets", ())),
                                 sizes=tuple(d.get("sizes", ()))) for d in m["dispatches"]],
            "inputs": [_sig(s) for s in m["inputs"]],
            "input_slots": list(m["input_slots"]),
            "outputs": [(slot, TensorSig(tuple(sig["shape"]), sig["dtype"], sig.get("device", "")))
                        for slot, sig in m["outputs"]],
        }

    @property
    def format_version(self) -> int:
        """The oldest format that holds this plan: 2 only where dispatches bind byte ranges, which a reader of
        format 1 would silently bind whole."""
        if any(k.subgroup_size for k in self.kernels):
            return 6  # a reader of format 5 would let the driver pick another subgroup width: wrong values
        if any(k.texel_buffers for k in self.kernels):
            return 5  # a reader of format 4 would bind those buffers as storage buffers: the pipeline fails
        devices = [s.device for s in self.inputs + [sig for _, sig in self.outputs] if s.device]
        if any(np.dtype(d).kind == "f" for d in devices):
            return 4  # a reader of format 3 converts only integers at the boundary
        if devices:
            return 3  # a reader of format 2 would pass int64 arrays to int32 buffers
        return 2 if any(d.offsets for d in self.dispatches) else 1

    # ---- plain-data file format: a zip of manifest.json + kernel blobs + constants ----
    def save(self, path: str | Path) -> None:
        manifest = {
            "format": self.format_version,
            "target": self.target,
            "profile": self.profile,
            "source_hash": self.source_hash,
            "kernels": [],
            **self.plan_dict(),
            "constants": sorted(self.constants),
        }
        entries: dict[str, bytes] = {}
        for i, k in enumerate(self.kernels):
            manifest["kernels"].append(kernel_entry(k, f"kernels/{i}", entries.__setitem__))
        constants = [(f"constants/{sid}.npy", np.asarray(arr)) for sid, arr in self.constants.items()]
        archive.write_zip(path, [*entries.items(), *constants, ("manifest.json", json.dumps(manifest, indent=1))])
        from . import trust

        trust.remember(trust.file_digest(path))  # portable.load runs files this user wrote (portable.trust)

    @classmethod
    def load(cls, path: str | Path) -> Executable:
        """Read a file `save` wrote; PackageError for anything else (entries bounded before they are read, the
        plan checked against its kernels: portable.plan_check)."""
        from .plan_check import check_plan

        path = archive.as_path(path)
        if not path.exists():
            raise PackageError(f"{path}: no such file")
        what = str(path)
        try:
            with zipfile.ZipFile(path) as z:
                infos = archive.entries(z, what)
                if "manifest.json" not in infos:
                    raise PackageError(f"{what}: not a portable executable (no manifest.json)")
                manifest = archive.read_json(z, infos["manifest.json"], what)
                if manifest.get("format") not in READABLE_VERSIONS:
                    raise PackageError(
                        f"{path}: format version {str(manifest.get('format'))[:20]!r}, this portable reads "
                        f"{', '.join(map(str, READABLE_VERSIONS))}; recompile the graph with this version"
                    )
                plan = cls.plan_from_dict(manifest)
                nbytes = {s.id: s.nbytes for s in plan["slots"]}

                def get(name: str, limit: int = archive.MAX_KERNEL_BYTES) -> bytes:
                    if name not in infos:
                        raise PackageError(f"{what}: entry {str(name)[:80]!r} named by its manifest is missing; the "
                                           f"file is truncated, recompile and save it again")
                    return archive.read(z, infos[name], limit, what)[0]

                kernels = [kernel_from_entry(e, get) for e in manifest["kernels"]]
                constants = {sid: npy_load(get(f"constants/{sid}.npy", nbytes.get(sid, 0) + archive.NPY_HEADER_BYTES))
                             for sid in manifest["constants"]}
                exe = cls(kernels=kernels, **plan, constants=constants, target=str(manifest["target"]),
                          profile=str(manifest["profile"]), source_hash=str(manifest["source_hash"]))
        except PackageError:
            raise
        except (*archive.ZIP_ERRORS, *PLAN_ERRORS) as e:
            raise PackageError(f"{path}: not a readable portable executable ({type(e).__name__}: {str(e)[:200]}); "
                               f"recompile and save it again") from e
        check_plan(exe, what)
        return exe


# What turning edited plan data (JSON of other types or shapes) into plan objects raises.
PLAN_ERRORS = (KeyError, ValueError, TypeError, AttributeError, IndexError, OverflowError, RecursionError, EOFError,
               # the last two: numpy reading a damaged .npy header
               OSError, MemoryError, SyntaxError, tokenize.TokenError)


def kernel_entry(k: Kernel, prefix: str, put: Callable[[str, bytes], None]) -> dict:
    """A kernel's manifest entry; its SPIR-V / OpenCL C go to `put(name, data)` under `prefix`."""
    entry = {"name": k.name, "workgroup_size": list(k.workgroup_size), "num_buffers": k.num_buffers,
             "push_constants": list(k.push_constants), "access": list(k.access), "spirv": None, "opencl": None}
    if k.texel_buffers:
        entry["texel_buffers"] = list(k.texel_buffers)
    if k.subgroup_size:
        entry["subgroup_size"] = k.subgroup_size
    if k.spirv is not None:
        entry["spirv"] = f"{prefix}.spv"
        put(entry["spirv"], k.spirv)
    if k.opencl is not None:
        entry["opencl"] = f"{prefix}.cl"
        put(entry["opencl"], k.opencl.encode())
    return entry


def kernel_from_entry(e: dict, get: Callable[[str], bytes]) -> Kernel:
    return Kernel(name=e["name"], workgroup_size=tuple(e["workgroup_size"]), num_buffers=e["num_buffers"],
                  spirv=get(e["spirv"]) if e["spirv"] else None,
                  opencl=get(e["opencl"]).decode() if e["opencl"] else None,
                  push_constants=tuple(e["push_constants"]), access=tuple(e["access"]),
                  texel_buffers=tuple(int(b) for b in e.get("texel_buffers", ())),
                  subgroup_size=int(e.get("subgroup_size", 0)))


def npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    archive.write_npy(buf, arr)
    return buf.getvalue()


def npy_load(data: bytes) -> np.ndarray:
    """An array from .npy bytes, its header checked against the bytes that follow before anything is allocated
    (np.load allocates what a header claims first: a damaged one asks for terabytes). ValueError when they
    disagree."""
    from numpy.lib import format as npy

    f = io.BytesIO(data)
    version = npy.read_magic(f)
    if version not in ((1, 0), (2, 0), (3, 0)):
        raise ValueError(f".npy version {version}")
    read_header = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
    shape, fortran, dtype = read_header(f, max_header_size=1 << 16)
    # kind V: bfloat16 (ml_dtypes) is saved as raw 2-byte values
    if dtype.hasobject or dtype.fields or dtype.kind not in "biufV" or \
            not all(isinstance(d, int) and d >= 0 for d in shape):
        raise ValueError(f".npy header: dtype {dtype}, shape {shape}")
    start = f.tell()
    count = math.prod(shape)
    if count * dtype.itemsize != len(data) - start:
        raise ValueError(f".npy header says {shape} {dtype} ({count * dtype.itemsize} bytes), "
                         f"{len(data) - start} bytes follow")
    arr = np.frombuffer(data, dtype=dtype, count=count, offset=start)
    return arr.reshape(shape[::-1]).T if fortran else arr.reshape(shape)
