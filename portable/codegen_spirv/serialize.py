"""Serialize one lowered gpu.module to a SPIR-V binary in-process, and check it with spirv-val."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from ..compiler.mlir import gpu, ir, passmanager
from ..compiler.patterns import apply_patterns
from ..errors import CompileError
from .bool_buffers import bools_as_bytes
from .private_allocs import allocs_to_private, expand_absi
from .vector_buffers import vectorize_buffers


def target_env_options(profile: dict) -> str:
    """Options for `spirv-attach-target`, from the profile's SPIR-V version, capabilities and extensions."""
    ver = profile.get("spirv_version", "v1.3")
    caps = profile.get("spirv_caps", ["Shader"])
    exts = profile.get("spirv_exts", ["SPV_KHR_storage_buffer_storage_class"])
    opts = [f"ver={ver}", f"caps={','.join(caps)}"]
    if exts:
        opts.append(f"exts={','.join(exts)}")
    return " ".join(opts)


def spirv_from_gpu_module(gpu_module_asm: str, workgroup_size: tuple[int, int, int], profile: dict,
                          dump=None, access: tuple[str, ...] = ()) -> bytes:
    """SPIR-V bytes for the single kernel in `gpu_module_asm` (textual `gpu.module`)."""
    if "gpu.subgroup_mma" in gpu_module_asm:
        # The KHR cooperative-matrix instructions exist from SPIR-V 1.6 on (what VK_KHR_cooperative_matrix
        # devices accept: it needs Vulkan 1.3).
        profile = dict(profile, spirv_version="v1.6")
    with ir.Context() as ctx, ir.Location.unknown():
        ctx.allow_unregistered_dialects = False
        # Workgroup memory stays a memref.alloc that MemRefToSPIRV turns into a Workgroup variable; this
        # build of convert-gpu-to-spirv crashes on gpu.func workgroup attributions, and its memory-space map
        # does not take #gpu.address_space here, so name the storage class directly.
        gpu_module_asm = gpu_module_asm.replace("#gpu.address_space<workgroup>", "#spirv.storage_class<Workgroup>")
        module = ir.Module.parse("module attributes {gpu.container_module} {\n" + gpu_module_asm + "\n}")
        gm = next(op for op in module.body.operations if op.operation.name == "gpu.module")
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
            vectorize_buffers(gmod)
            passmanager.PassManager.parse(
                "builtin.module(gpu.module(convert-vector-to-scf{full-unroll=true target-rank=0}))").run(module.operation)
            apply_patterns(module, ["vector.lower_transfer max_transfer_rank = 1", "canonicalization"])
            bools_as_bytes(gmod, "StorageBuffer8BitAccess" in profile.get("spirv_caps", ()))
            passmanager.PassManager.parse(
                f"builtin.module(spirv-attach-target{{{target_env_options(profile)}}},"
                "gpu.module(lower-affine,math-expand-ops{ops=fpowi},canonicalize,convert-math-to-spirv,convert-ub-to-spirv),"
                "convert-gpu-to-spirv,"
                "spirv.module(spirv-lower-abi-attrs,spirv-update-vce,canonicalize))"
            ).run(module.operation)
        except ir.MLIRError as e:
            raise CompileError(f"convert-gpu-to-spirv failed: {e}", stage="spirv") from e
        _pin_version(module, profile.get("spirv_version", "v1.3"))
        _decorate_buffers(module, access)
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
        return bytes(gpu.ObjectAttr(objects[0]).object)


def _pin_version(module: ir.Module, version: str) -> None:
    """spirv-update-vce picks the lowest version the ops need, but lowering already used features of the
    target version (e.g. NoSignedWrap decorations, core in 1.4): keep the target's version in the header."""
    import re

    for spv in module.body.operations:
        if spv.operation.name == "spirv.module" and "vce_triple" in spv.attributes:
            vce = str(spv.attributes["vce_triple"])
            spv.attributes["vce_triple"] = ir.Attribute.parse(re.sub(r"v1\.\d", version, vce, count=1))


def _decorate_buffers(module: ir.Module, access: tuple[str, ...]) -> None:
    """Restrict on every buffer, NonWritable on those the kernel only reads: what GLSL's `restrict readonly`
    gives, and what lets drivers use their read-only caches (the serializer turns these unit attributes
    into OpDecorate)."""
    for spv in module.body.operations:
        if spv.operation.name != "spirv.module":
            continue
        for op in spv.regions[0].blocks[0].operations:
            if op.operation.name != "spirv.GlobalVariable" or "binding" not in op.attributes:
                continue
            i = ir.IntegerAttr(op.attributes["binding"]).value
            op.attributes["restrict"] = ir.UnitAttr.get()
            if i < len(access) and "w" not in access[i]:
                op.attributes["non_writable"] = ir.UnitAttr.get()


def _tool(name: str) -> str:
    path = shutil.which(name)
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
