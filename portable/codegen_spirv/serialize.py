"""Serialize one lowered gpu.module to a SPIR-V binary in-process, and check it with spirv-val."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path

from ..errors import CompileError, UnsupportedOp
from ..ir.mlir import gpu, ir, passmanager
from ..ir.patterns import apply_patterns
from ..ir.util import find_ops, scalar_types
from ..profiles import Options
from .bf16_values import BF16_TO_F32, bf16_as_i16
from .bool_buffers import bools_as_bytes
from .f16_storage import f16_registers_as_f32, i16_registers_as_i32
from .loop_limit import limit_loop_iterations
from .math_ops import (
    accurate_log1p_expm1,
    accurate_tanh,
    expand_erf,
    f64_math_in_f32,
    narrow_float_to_int_via_i32,
    remf_by_infinity,
)
from .memory_model import needs_vulkan_model, to_vulkan_model
from .private_allocs import allocs_to_private, expand_absi
from .shifts import saturate_shifts, sign_extend_by_shifts
from .storage_classes import take_barrier_fences, workgroup_memory_as_storage_class
from .texel_reads import texel_reads
from .vce import pin_version
from .vector_buffers import vectorize_buffers

MMA_OPS = ("gpu.subgroup_mma_load_matrix", "gpu.subgroup_mma_store_matrix", "gpu.subgroup_mma_compute",
           "gpu.subgroup_mma_constant_matrix", "gpu.subgroup_mma_elementwise")


def target_env_options(o: Options) -> str:
    """Options for `spirv-attach-target`, from the profile's SPIR-V version, capabilities and extensions."""
    ver = o.spirv_version or "v1.3"
    caps = ("Shader",) if o.spirv_caps is None else o.spirv_caps
    exts = ("SPV_KHR_storage_buffer_storage_class",) if o.spirv_exts is None else o.spirv_exts
    opts = [f"ver={ver}", f"caps={','.join(caps)}"]
    if exts:
        opts.append(f"exts={','.join(exts)}")
    return " ".join(opts)


def _with_subgroup_size(target: ir.Attribute, o: Options) -> ir.Attribute:
    """The target environment with the device's subgroup size (GPUToSPIRV lowers a gpu.shuffle only over a whole
    subgroup, by default 32 lanes; lavapipe's are 8): spirv-attach-target has no option for it."""
    size = o.subgroup_size or 0
    text = str(target)
    if not size or "#spirv.resource_limits<>" not in text:
        return target
    limits = f"#spirv.resource_limits<subgroup_size = {size}>"
    return ir.Attribute.parse(text.replace("#spirv.resource_limits<>", limits))


def _subgroup_reductions_non_uniform(gm: ir.Operation) -> None:
    """Canonicalization marks a gpu.subgroup_reduce outside conditionals `uniform`, which convert-gpu-to-spirv turns
    into OpGroupF*/OpGroupI* (the Groups capability, which Vulkan does not have); without the mark they become the
    GroupNonUniform arithmetic Vulkan devices report."""
    for op in find_ops(gm, ("gpu.subgroup_reduce",)):
        if "uniform" in op.attributes:
            del op.attributes["uniform"]


def spirv_from_gpu_module(gpu_module: ir.Operation, workgroup_size: tuple[int, int, int], o: Options,
                          dump=None, access: tuple[str, ...] = ()) -> tuple[bytes, tuple[int, ...]]:
    """SPIR-V bytes for the single kernel of `gpu_module`, and the bindings it reads as uniform texel buffers
    (texel_reads.py; empty unless the profile asks for them). The conversion rewrites a copy of its own, in a
    module of its own in the kernel's context: the caller's gpu.module is left as it was."""
    with gpu_module.context, ir.Location.unknown():
        module = ir.Module.create()
        module.operation.attributes["gpu.container_module"] = ir.UnitAttr.get()
        module.body.append(gpu_module.clone())
        gm = next(op for op in module.body.operations if op.operation.name == "gpu.module")
        if find_ops(gm.operation, MMA_OPS):
            # The KHR cooperative-matrix instructions exist from SPIR-V 1.6 on (what VK_KHR_cooperative_matrix
            # devices accept: it needs Vulkan 1.3).
            o = o.replace(spirv_version="v1.6")
        caps = list(("Shader",) if o.spirv_caps is None else o.spirv_caps)
        # Barriers that order workgroup memory only are remembered in order, the rest get buffer semantics too
        # (_barriers_cover_buffers); workgroup memory names its SPIR-V storage class (storage_classes.py).
        local_only = take_barrier_fences(gm.operation)
        workgroup_memory_as_storage_class(gm.operation)
        f16_storage_only, i16_storage_only = _storage_only_types(scalar_types(gm.operation), caps)
        # The conversion needs the narrow types in its target to keep them on the buffers; the capabilities leave
        # the binary after it (f16_storage.py).
        o = o.replace(spirv_caps=tuple(caps + ["Float16"] * f16_storage_only + ["Int16"] * i16_storage_only))
        for f in gm.regions[0].blocks[0].operations:
            if f.operation.name == "gpu.func":
                x, y, z = workgroup_size
                f.attributes["spirv.entry_point_abi"] = ir.Attribute.parse(
                    f"#spirv.entry_point_abi<workgroup_size = [{x}, {y}, {z}]>")
        try:
            # Vector transfers become scalar loads/stores (a pointer bitcast to a vector type is invalid in
            # Vulkan's logical addressing); the arithmetic stays on vectors.
            # First unroll to 1-d transfers and make the aligned ones vec4 buffer accesses, then scalarize the
            # rest.
            passmanager.PassManager.parse(
                "builtin.module(gpu.module(convert-vector-to-scf{full-unroll=true target-rank=1},canonicalize))"
            ).run(module.operation)
            gmod = next(op for op in module.body.operations if op.operation.name == "gpu.module").operation
            allocs_to_private(gmod)
            expand_absi(gmod)
            saturate_shifts(gmod)
            if o.sext_via_shifts:
                sign_extend_by_shifts(gmod)
            vectorize_buffers(gmod)
            passmanager.PassManager.parse(
                "builtin.module(gpu.module(convert-vector-to-scf{full-unroll=true target-rank=0}))"
            ).run(module.operation)
            apply_patterns(module, ["vector.lower_transfer max_transfer_rank = 1", "canonicalization"])
            bools_as_bytes(gmod, "StorageBuffer8BitAccess" in o.spirv_caps)
            f64_math_in_f32(gmod)
            expand_erf(gmod)
            accurate_log1p_expm1(gmod)
            accurate_tanh(gmod)
            remf_by_infinity(gmod)
            narrow_float_to_int_via_i32(gmod)
            passmanager.PassManager.parse(
                f"builtin.module(spirv-attach-target{{{target_env_options(o)}}})").run(module.operation)
            # The math/ub conversions read the target (which types and capabilities exist) from a
            # `spirv.target_env` attribute; without it they assume a bare Vulkan 1.0 device, emulate f16 in
            # f32 and leave f64 ops alone.
            gm = next(op for op in module.body.operations if op.operation.name == "gpu.module")
            target = _with_subgroup_size(ir.ArrayAttr(gm.attributes["targets"])[0], o)
            gm.attributes["targets"] = ir.ArrayAttr.get([target])
            gm.attributes["spirv.target_env"] = target
            # BF16_TO_F32: f16/bf16 math functions and bf16 arithmetic compute in f32 (f16 transcendentals are
            # imprecise on some GPUs; f16 arithmetic stays f16); its arith-expand also expands ceildivsi,
            # floordivsi and the like, which ArithToSPIRV has no pattern for.
            emulate = ",arith-emulate-unsupported-floats{source-types=f16 target-type=f32}" if f16_storage_only else ""
            passmanager.PassManager.parse(
                f"builtin.module(gpu.module(lower-affine,{BF16_TO_F32}{emulate},math-expand-ops{{ops=fpowi}},"
                "canonicalize))").run(module.operation)
            bf16_as_i16(gm.operation)
            if f16_storage_only:
                f16_registers_as_f32(gm.operation)
            if i16_storage_only:
                i16_registers_as_i32(gm.operation)
            if "Float64" not in caps and "f64" in scalar_types(gm.operation):  # what the math passes left in f64
                raise UnsupportedOp("float64 values in a kernel for a Vulkan target without 64-bit floats (its profile "
                                    "or device lacks shaderFloat64): cast the graph to float32, or compile for "
                                    "OpenCL or a device with shaderFloat64")
            # After lower-affine and canonicalize: loop bounds are constants where they can be.
            limit_loop_iterations(gm.operation, o.max_loop_iterations or 0, o.name or "")
            passmanager.PassManager.parse(
                "builtin.module(gpu.module(canonicalize,convert-math-to-spirv,convert-ub-to-spirv))"
            ).run(module.operation)
            _subgroup_reductions_non_uniform(gm.operation)
            passmanager.PassManager.parse(
                "builtin.module(convert-gpu-to-spirv,spirv.module(spirv-lower-abi-attrs,spirv-update-vce,canonicalize))"
            ).run(module.operation)
        except ir.MLIRError as e:
            raise CompileError(f"convert-gpu-to-spirv failed: {e}", stage="spirv") from e
        (spv,) = find_ops(module.operation, ("spirv.module",))
        pin_version(spv, o.spirv_version or "v1.3")
        vulkan_model = needs_vulkan_model(spv)
        names = _decorate_buffers(module, access)
        _barriers_cover_buffers(module, local_only, vulkan_model)
        if vulkan_model:
            to_vulkan_model(spv)
        texels = texel_reads(module, access, o.max_texel_buffer_elements or 65536) if o.texel_reads else ()
        if dump:
            dump("spirv-dialect", str(module))
        # gpu-module-to-binary serializes the spirv.module nested in the gpu.module that carries the target.
        gm = next(op for op in module.body.operations if op.operation.name == "gpu.module")
        spv = next(op for op in module.body.operations if op.operation.name == "spirv.module")
        gblock = gm.regions[0].blocks[0]
        for op in list(gblock.operations):
            op.operation.erase()
        gblock.append(spv.operation.detach_from_parent())
        try:
            passmanager.PassManager.parse("builtin.module(gpu-module-to-binary)").run(module.operation)
        except ir.MLIRError as e:
            raise CompileError(f"gpu-module-to-binary failed: {e}", stage="spirv") from e
        binary = next(op for op in module.body.operations if op.operation.name == "gpu.binary")
        objects = ir.ArrayAttr(binary.attributes["objects"])
        spirv = bytes(gpu.ObjectAttr(objects[0]).object)
        spirv = _restore_names(spirv, names)
        if f16_storage_only:
            spirv = _drop_capability(spirv, FLOAT16)
        return (_drop_capability(spirv, INT16) if i16_storage_only else spirv), texels


FLOAT16, INT16 = 9, 22  # the Float16 and Int16 capabilities' operands


def _storage_only_types(types: set[str], caps: list[str]) -> tuple[bool, bool]:
    """(f16, i16) that this kernel (of scalar `types`) holds in 16-bit storage only, computing on them in 32-bit
    registers (f16_storage.py): f16 without Float16 (Mali v9 under panvk), and the i16 bits of bf16
    (bf16_values.py) without Int16. int16 arithmetic without Int16 is a clear error here, before any conversion."""
    storage16 = "StorageBuffer16BitAccess" in caps
    f16 = storage16 and "Float16" not in caps and "f16" in types
    i16 = storage16 and "Int16" not in caps and "bf16" in types
    if storage16 and not i16 and "Int16" not in caps and "i16" in types:
        # Upstream's conversion would read i16 registers as i32 against i16 buffers (a legalization failure).
        raise UnsupportedOp("int16 values in a kernel for a Vulkan target with 16-bit storage but no 16-bit integers "
                            "(its profile or device lacks shaderInt16): compute in int32, or compile for OpenCL or a "
                            "device with shaderInt16")
    return f16, i16


def _drop_capability(spirv: bytes, cap: int) -> bytes:
    """`spirv` without its OpCapability `cap` instruction."""
    import struct

    words = list(struct.unpack(f"<{len(spirv) // 4}I", spirv))
    i = 5
    while i < len(words):
        n, op = words[i] >> 16, words[i] & 0xFFFF
        if op == 17 and n == 2 and words[i + 1] == cap:  # OpCapability
            del words[i:i + 2]
            continue
        i += max(n, 1)
    return struct.pack(f"<{len(words)}I", *words)


def _barriers_cover_buffers(module: ir.Module, local_only: list[bool], vulkan_model: bool = False) -> None:
    """A gpu.barrier orders buffer (global) memory too in our kernels (a workgroup reduction's output is
    zeroed by every thread, then accumulated by one), as OpenCL's barrier(CLK_GLOBAL_MEM_FENCE) does; upstream
    lowers it with WorkgroupMemory semantics only, which leaves that a race in the Vulkan memory model. Add
    UniformMemory, except on barriers that `local_only` (one flag per gpu.barrier, in order) marks as ordering
    workgroup memory alone; if the conversion changed how many barriers there are, every one gets it. Under the
    Vulkan memory model (memory_model.py) a barrier also makes those storage classes available and visible."""
    make = "|MakeAvailable|MakeVisible" if vulkan_model else ""
    full = ir.Attribute.parse(f"#spirv.memory_semantics<AcquireRelease|UniformMemory|WorkgroupMemory{make}>")
    local = ir.Attribute.parse(f"#spirv.memory_semantics<AcquireRelease|WorkgroupMemory{make}>")
    barriers: list[ir.Operation] = []

    def walk(op: ir.Operation) -> None:
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    if inner.operation.name == "spirv.ControlBarrier":
                        barriers.append(inner.operation)
                    walk(inner.operation)

    for spv in module.body.operations:
        if spv.operation.name == "spirv.module":
            walk(spv.operation)
    flags = local_only if len(local_only) == len(barriers) else [False] * len(barriers)
    for op, flag in zip(barriers, flags):
        op.attributes["memory_semantics"] = local if flag else full


def _decorate_buffers(module: ir.Module, access: tuple[str, ...]) -> dict[str, str]:
    """Restrict on every buffer, NonWritable on those the kernel only reads: what GLSL's `restrict readonly`
    gives, and what lets drivers use their read-only caches (the serializer turns these unit attributes
    into OpDecorate).

    A read-only buffer whose block type a written buffer shares (two tensors of one shape get one struct type)
    gets a block type of its own first: with NonWritable on a shared type, the NVIDIA Vulkan driver (580)
    dropped the writes to the other buffer (measured on the H200: a GEMV with a residual input of the output's
    shape returned the residual).

    The context uniques a named struct type by its name, and every kernel of a compile shares the context (the
    arguments of one kernel are named as another's): the IR names each block type for its body too, and the
    returned {name in the IR: name} is what the binary's OpName strings take back (_restore_names)."""
    names: dict[str, str] = {}
    for spv in module.body.operations:
        if spv.operation.name != "spirv.module":
            continue
        bound = [op.operation for op in spv.regions[0].blocks[0].operations
                 if op.operation.name == "spirv.GlobalVariable" and "binding" in op.attributes]
        binding = {id(op): ir.IntegerAttr(op.attributes["binding"]).value for op in bound}
        written = {op.attributes["type"] for op in bound
                   if binding[id(op)] >= len(access) or "w" in access[binding[id(op)]]}
        renamed: dict[str, ir.Type] = {}
        for op in bound:
            i = binding[id(op)]
            op.attributes["restrict"] = ir.UnitAttr.get()
            if i >= len(access) or "w" in access[i]:
                continue
            text = str(op.attributes["type"])
            if op.attributes["type"] in written and "!spirv.struct<(" in text:
                name = ir.StringAttr(op.attributes["sym_name"]).value
                own = f"{name}_block_{hashlib.sha256(text.encode()).hexdigest()[:16]}"
                new = ir.Type.parse(text.replace("!spirv.struct<(", f"!spirv.struct<{own}, (", 1))
                op.attributes["type"] = ir.TypeAttr.get(new)
                renamed[name] = new
                names[own] = f"{name}_block"
            elif op.attributes["type"] in written:
                continue  # a block type that cannot be given a name of its own: leave it writable
            op.attributes["non_writable"] = ir.UnitAttr.get()
        if renamed:
            _retype_addresses(spv.operation, renamed)
    return names


def _restore_names(spirv: bytes, names: dict[str, str]) -> bytes:
    """`spirv` with each OpName string that `names` holds replaced by the name it maps to (_decorate_buffers)."""
    import struct

    if not names:
        return spirv
    words = list(struct.unpack(f"<{len(spirv) // 4}I", spirv))
    out, i = words[:5], 5
    while i < len(words):
        n, op = words[i] >> 16, words[i] & 0xFFFF
        inst = words[i:i + max(n, 1)]
        if op == 5 and n > 2:  # OpName: target id, then a nul-terminated string padded to whole words
            text = struct.pack(f"<{n - 2}I", *inst[2:])
            name = text[:text.index(b"\0")].decode()
            if name in names:
                new = names[name].encode() + b"\0"
                new += b"\0" * (-len(new) % 4)
                inst = [((2 + len(new) // 4) << 16) | 5, inst[1], *struct.unpack(f"<{len(new) // 4}I", new)]
        out += inst
        i += max(n, 1)
    return struct.pack(f"<{len(out)}I", *out)


def _retype_addresses(op: ir.Operation, renamed: dict[str, ir.Type]) -> None:
    """spirv.mlir.addressof results follow their variable's new type (access chains index the same members)."""
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                o = inner.operation
                if o.name == "spirv.mlir.addressof":
                    sym = ir.FlatSymbolRefAttr(o.attributes["variable"]).value
                    if sym in renamed:
                        o.results[0].set_type(renamed[sym])
                _retype_addresses(o, renamed)


def find_tool(name: str) -> str | None:
    """A SPIR-V tool: the virtual environment's own first (scripts/setup.sh links there a spirv-val newer than
    Debian bookworm's, which knows SPV_KHR_cooperative_matrix; found whether or not the environment is activated),
    then PATH."""
    return shutil.which(name, path=os.pathsep.join([sysconfig.get_path("scripts"), os.environ.get("PATH", "")]))


def _tool(name: str) -> str:
    path = find_tool(name)
    if path is None:
        raise CompileError(f"{name} not found: install Debian/Ubuntu package 'spirv-tools'", stage="spirv")
    return path


def validate(spirv: bytes, target_env: str = "vulkan1.1") -> None:
    """Run spirv-val; raise CompileError with its message if the module is invalid."""
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "k.spv"
        p.write_bytes(spirv)
        r = subprocess.run([_tool("spirv-val"), "--target-env", target_env, str(p)], capture_output=True, text=True)
        if r.returncode != 0:
            raise CompileError(f"spirv-val rejected a kernel: {r.stdout}{r.stderr}", stage="spirv-val")


def disassemble(spirv: bytes) -> str:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "k.spv"
        p.write_bytes(spirv)
        r = subprocess.run([_tool("spirv-dis"), str(p)], capture_output=True, text=True)
        return r.stdout if r.returncode == 0 else f"; spirv-dis failed: {r.stderr}"
