"""Checks of an Executable's plan against its kernels, its own buffers and a device's limits, run before anything
reaches a driver.

A package is plain data anyone can edit, and its content hash is not a signature: a plan that binds the wrong
number of buffers, asks for a grid past the device's limits, declares an output larger than its buffer or aliases
an input to the weights would otherwise crash the driver or return wrong numbers. Every check here is about the
plan's own consistency; none reads a kernel's code (what a kernel does inside its bindings is the driver's).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .errors import InvalidPlan
from .executable import Executable, TensorSig

SLOT_KINDS = ("input", "output", "constant", "temp")
ACCESS = ("r", "w", "rw")
# Kernels take their group and global ids as 32-bit signed ints (codegen_opencl casts get_group_id to int;
# SPIR-V index arithmetic is i32): more work-items per dimension would wrap.
MAX_ITEMS_PER_DIM = 2**31 - 1
_ADVICE = "the package or executable is damaged or was edited; rebuild it with `portable compile`"


def _int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _plain(dtype: np.dtype) -> bool:
    """Numbers a device buffer holds: bool, integers, floats, and bfloat16 (ml_dtypes: kind V, no fields)."""
    return dtype.kind in "biufV" and not dtype.hasobject and not dtype.fields and dtype.itemsize > 0


def _fail(where: str, what: str, advice: str = _ADVICE) -> InvalidPlan:
    return InvalidPlan(f"{where}: {what}; {advice}")


def _sig_bytes(sig: TensorSig, what: str, where: str) -> int:
    if not all(_int(d) and d >= 0 for d in sig.shape):
        raise _fail(where, f"{what} has shape {sig.shape!r}, not a tuple of counts >= 0")
    for name in (sig.dtype, sig.device_dtype):
        try:
            ok = isinstance(name, str) and _plain(np.dtype(name))
        except (TypeError, ValueError, UnicodeError):  # not a dtype name, or text numpy cannot even read
            ok = False
        if not ok:
            raise _fail(where, f"{what} has dtype {str(name)[:40]!r}, not a numeric numpy dtype name")
    # Python ints: a product of edited dimensions must not wrap around as numpy's int64 would.
    return math.prod(int(d) for d in sig.shape) * np.dtype(sig.device_dtype).itemsize


def check_plan(exe: Executable, where: str = "executable") -> None:
    """InvalidPlan unless every dispatch, slot, input, output and constant of `exe` is consistent with the
    kernels and the slots: what a device needs to run it without reading or writing outside its buffers."""
    slots = exe.slots
    for i, s in enumerate(slots):
        if s.id != i or not _int(s.nbytes) or s.nbytes < 0 or s.kind not in SLOT_KINDS:
            raise _fail(where, f"slot {i} is {s!r}: slots must be numbered in order, with a byte size >= 0 and a "
                               f"kind among {SLOT_KINDS}")
        if s.nbytes > 1 << 48:
            raise _fail(where, f"slot {i} declares {s.nbytes} bytes, more than any device holds")
    for j, k in enumerate(exe.kernels):
        if not isinstance(k.name, str) or not k.name.isidentifier() or not k.name.isascii():
            raise _fail(where, f"kernel {j} is named {str(k.name)[:80]!r}, not a C identifier")
        if not isinstance(k.spirv, (bytes, type(None))) or not isinstance(k.opencl, (str, type(None))):
            raise _fail(where, f"kernel {j} ({k.name}) holds no SPIR-V bytes / OpenCL C text")
        wg = tuple(k.workgroup_size)
        if len(wg) != 3 or not all(_int(w) and w >= 1 for w in wg):
            raise _fail(where, f"kernel {j} ({k.name!r}) has workgroup size {wg!r}, not three counts >= 1")
        if not _int(k.num_buffers) or k.num_buffers < 0:
            raise _fail(where, f"kernel {j} ({k.name!r}) takes {k.num_buffers!r} buffers")
        if k.access and (len(k.access) != k.num_buffers or any(a not in ACCESS for a in k.access)):
            raise _fail(where, f"kernel {j} ({k.name!r}) lists access {k.access!r} for {k.num_buffers} buffers")
        if any(not _int(b) or not 0 <= b < k.num_buffers for b in k.texel_buffers):
            raise _fail(where, f"kernel {j} ({k.name!r}) reads texel buffers {k.texel_buffers!r} of "
                               f"{k.num_buffers} buffers")
    written: set[int] = set()
    for n, d in enumerate(exe.dispatches):
        if not _int(d.kernel) or not 0 <= d.kernel < len(exe.kernels):
            raise _fail(where, f"dispatch {n} runs kernel {d.kernel!r} of {len(exe.kernels)}")
        k = exe.kernels[d.kernel]
        what = f"dispatch {n} ({k.name})"
        if len(d.slots) != k.num_buffers:
            raise _fail(where, f"{what} binds {len(d.slots)} buffers, the kernel takes {k.num_buffers}")
        if any(not _int(sid) or not 0 <= sid < len(slots) for sid in d.slots):
            raise _fail(where, f"{what} binds slots {d.slots!r}, the plan has {len(slots)}")
        if len(d.grid) != 3 or not all(_int(g) and g >= 1 for g in d.grid):
            raise _fail(where, f"{what} has grid {d.grid!r}, not three workgroup counts >= 1")
        if len(d.push_constants) != len(k.push_constants) or \
                any(not _int(v) or not -(1 << 31) <= v < (1 << 32) for v in d.push_constants):
            raise _fail(where, f"{what} passes push constants {d.push_constants!r}, the kernel takes "
                               f"{len(k.push_constants)} 32-bit values {k.push_constants!r}")
        if d.offsets or d.sizes:
            if len(d.offsets) != len(d.slots) or len(d.sizes) != len(d.slots):
                raise _fail(where, f"{what} binds byte ranges {d.offsets!r}/{d.sizes!r} for {len(d.slots)} buffers")
            for i, (sid, off, size) in enumerate(zip(d.slots, d.offsets, d.sizes)):
                if not (_int(off) and _int(size)) or off < 0 or size < 1 or off + size > slots[sid].nbytes:
                    raise _fail(where, f"{what} binds bytes [{off}, {off}+{size}) of slot {sid} as argument {i}, "
                                       f"which holds {slots[sid].nbytes} bytes")
        # Generated kernels index their buffers from the group ids without bounds checks (the grid is part of the
        # compiled plan): a grid past the data writes outside it. A real plan has no more workgroups than bytes it
        # binds (each workgroup covers at least one element).
        bound = sum(d.binding(i, slots[sid].nbytes)[1] for i, sid in enumerate(d.slots))
        if math.prod(d.grid) > max(bound, 1):
            raise _fail(where, f"{what} asks for a grid of {tuple(d.grid)} workgroups for the {bound} bytes it binds: "
                               f"more workgroups than bytes, which no compiled plan has")
        for i, sid in enumerate(d.slots):
            if not k.access or "w" in k.access[i]:
                written.add(sid)
            # Weights are uploaded once per bound executable: a kernel writing them would change every later run.
            if k.access and "w" in k.access[i] and slots[sid].kind == "constant":
                raise _fail(where, f"{what} writes argument {i} into slot {sid}, which holds weights")
    if len(exe.input_slots) != len(exe.inputs):
        raise _fail(where, f"{len(exe.inputs)} input(s) but {len(exe.input_slots)} input slot(s)")
    if not all(_int(sid) for sid in exe.input_slots):
        raise _fail(where, f"input slots {str(exe.input_slots)[:80]} are not slot numbers")
    if len(set(exe.input_slots)) != len(exe.input_slots):
        raise _fail(where, f"inputs share slots {exe.input_slots!r}: one input would overwrite another")
    for i, (sid, sig) in enumerate(zip(exe.input_slots, exe.inputs)):
        if not _int(sid) or not 0 <= sid < len(slots):
            raise _fail(where, f"input {i} is held in slot {sid!r}, the plan has {len(slots)}")
        if slots[sid].kind != "input" or sid in exe.constants:
            raise _fail(where, f"input {i} is held in slot {sid}, a {slots[sid].kind} slot"
                               f"{' holding weights' if sid in exe.constants else ''}: inputs need slots of their own")
        need = _sig_bytes(sig, f"input {i}", where)
        if need > slots[sid].nbytes:
            raise _fail(where, f"input {i} {tuple(sig.shape)} {sig.device_dtype} needs {need} bytes, its slot {sid} "
                               f"holds {slots[sid].nbytes}")
    for s in slots:
        if s.kind == "input" and (not _int(s.index) or not 0 <= s.index < len(exe.input_slots)
                                  or exe.input_slots[s.index] != s.id):
            raise _fail(where, f"input slot {s.id} says it holds input {s.index!r}, which the plan keeps elsewhere")
    for k_out, (sid, sig) in enumerate(exe.outputs):
        if not _int(sid) or not 0 <= sid < len(slots):
            raise _fail(where, f"output {k_out} is held in slot {sid!r}, the plan has {len(slots)}")
        need = _sig_bytes(sig, f"output {k_out}", where)
        if need > slots[sid].nbytes:
            raise _fail(where, f"output {k_out} {tuple(sig.shape)} {sig.device_dtype} needs {need} bytes, its slot "
                               f"{sid} holds {slots[sid].nbytes}: it would read past its buffer")
        # Inputs and weights returned as they are need no kernel; any other output a kernel must write, or it
        # would hand back whatever the buffer held before (another executable's data).
        if slots[sid].kind in ("output", "temp") and sid not in written and need:
            raise _fail(where, f"output {k_out} (slot {sid}) is written by no dispatch: it would return stale "
                               f"device memory")
    for sid, arr in exe.constants.items():
        if not _int(sid) or not 0 <= sid < len(slots) or slots[sid].kind != "constant":
            kind = slots[sid].kind if _int(sid) and 0 <= sid < len(slots) else "missing"
            raise _fail(where, f"weights are given for slot {sid!r}, which is {kind}, not a constant slot")
        if not isinstance(arr, np.ndarray) or not _plain(arr.dtype):
            raise _fail(where, f"the weights of slot {sid} are not a numeric array")
        if arr.nbytes != slots[sid].nbytes and not (arr.nbytes < 4 and slots[sid].nbytes == 4):  # slots hold >= 4
            raise _fail(where, f"the weights of slot {sid} are {arr.shape} {arr.dtype} ({arr.nbytes} bytes), the "
                               f"slot holds {slots[sid].nbytes} bytes")
    for s in slots:
        if s.kind == "constant" and s.id not in exe.constants:
            raise _fail(where, f"constant slot {s.id} has no weights")


def check_device(exe: Executable, limits: dict, device: str) -> None:
    """InvalidPlan unless every dispatch's grid fits the device: non-zero counts within maxComputeWorkGroupCount
    and at most MAX_ITEMS_PER_DIM work-items per dimension (the kernels' 32-bit ids)."""
    max_count = tuple(limits.get("max_workgroup_count") or (MAX_ITEMS_PER_DIM,) * 3)
    for n, d in enumerate(exe.dispatches):
        k = exe.kernels[d.kernel]
        items = tuple(g * w for g, w in zip(d.grid, k.workgroup_size))
        if any(g > m for g, m in zip(d.grid, max_count)) or any(i > MAX_ITEMS_PER_DIM for i in items):
            raise _fail(device, f"dispatch {n} ({k.name}) asks for a grid of {tuple(d.grid)} workgroups of "
                                f"{tuple(k.workgroup_size)} ({items} work-items), past this device's limit of "
                                f"{max_count} workgroups and {MAX_ITEMS_PER_DIM} work-items per dimension",
                        "compile the graph for this device's profile (its plan then splits the dispatch), or "
                        "rebuild the package if it was edited")
