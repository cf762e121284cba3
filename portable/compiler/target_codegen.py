"""Each outlined gpu.module handed to the target rooms: SPIR-V words for Vulkan (codegen_spirv) and OpenCL C
(codegen_opencl), each target on its own copy of the kernel, as the compile's list of Kernels."""

from __future__ import annotations

from ..codegen_opencl import nontemporal
from ..codegen_spirv.lanes import lane_kernels
from ..executable import Kernel
from ..ir.mlir import ir
from ..ir.patterns import apply_patterns
from ..ir.util import find_ops
from ..profiles import Options
from ..progress import Progress
from . import plan
from .compilation import Dumper
from .lowering import loop_vectorize
from .schedule import coop_matrix, coop_staging


def _kernel_copy(gm: ir.Operation) -> ir.Module:
    """A module of its own holding a copy of `gm`: what one target's codegen rewrites."""
    single = ir.Module.create()
    single.operation.attributes["gpu.container_module"] = ir.UnitAttr.get()
    single.body.append(gm.operation.clone())
    return single


def _gpu_module(single: ir.Module) -> ir.Operation:
    return next(op for op in single.body.operations if op.operation.name == "gpu.module").operation


def _has_op(root: ir.Operation, prefix: str) -> bool:
    found = []

    def visit(op):
        if op.name.startswith(prefix):
            found.append(op)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    return bool(found)


def codegen(module: ir.Module, o: Options, targets: tuple[str, ...], dump: Dumper, progress: Progress | None = None):
    """Every gpu.module of `module` as a Kernel (SPIR-V words, OpenCL C), and (gpu.module, gpu.func) -> its index."""
    from ..codegen_spirv import disassemble, spirv_from_gpu_module

    kernels: list[Kernel] = []
    index: dict[tuple[str, str], int] = {}
    # (Repeated layers left one gpu.module each at the dedup-kernels stage.)
    gpu_modules = [gm for gm in module.body.operations if gm.operation.name == "gpu.module"]
    for k, gm in enumerate(gpu_modules):
        if progress is not None:
            progress.kernel(k + 1, len(gpu_modules))
        gname = ir.StringAttr(gm.attributes["sym_name"]).value
        fn = next(op for op in gm.regions[0].blocks[0].operations if op.operation.name == "gpu.func")
        fname = ir.StringAttr(fn.attributes["sym_name"]).value
        wg = tuple(int(x) for x in ir.DenseI32ArrayAttr(fn.attributes["known_block_size"]))
        nargs = len(fn.regions[0].blocks[0].arguments)
        access = plan.kernel_access(fn.operation)
        spirv = opencl = None
        texels: tuple[int, ...] = ()
        # Cooperative matrices are laid over 32 lanes, shuffles over the profile's subgroup: the Vulkan pipeline
        # requires that width (runtime_vk/pipelines.py), since a driver may pick another per pipeline.
        width = coop_matrix.SUBGROUP if _has_op(gm.operation, "gpu.subgroup_mma") else \
            (o.subgroup_size or 0) if find_ops(gm.operation, ("gpu.shuffle",)) else 0
        if "vulkan" in targets:
            # CPU drivers: fewer per-lane buffer accesses (lane_kernels.py, by option); staged fragments' copies
            # 16 bytes wide. Each on the Vulkan target's own copy of the kernel.
            vk = _kernel_copy(gm)
            lanes = lane_kernels.rewrite(vk, o, loop_vectorize.vectorize_loops)
            if not lanes:
                vk = _kernel_copy(gm)  # a rewrite that changed nothing may have cleaned up: the kernel as it was
            if coop_staging.wide_copies(vk) or lanes:
                dump(f"{gname}-lanes", _gpu_module(vk))
            # The boundary: the SPIR-V serializer takes the kernel's gpu.module and gives back words (codegen_spirv).
            spirv, texels = spirv_from_gpu_module(_gpu_module(vk), wg, o,
                                                  dump=lambda s, t, g=gname: dump(f"{g}-{s}", t), access=access)
            dump(f"{gname}", disassemble(spirv), ".spvasm")
        if "opencl" in targets:
            from ..codegen_opencl import emit_opencl
            from ..codegen_opencl.attributions import workgroup_allocs_to_attributions

            # OpenCL C has vloadN/vstoreN: in-bounds 1-d transfers become vector loads and stores. Staged
            # fragments (wmma through inline PTX) take the same 16-byte copies as on Vulkan.
            single = _kernel_copy(gm)
            coop_staging.wide_copies(single)
            if (o.loop_vectorize or 0) > 1:  # CPU OpenCL (PoCL): row loops on float16
                loop_vectorize.vectorize_loops(_gpu_module(single), o.loop_vectorize)
            apply_patterns(single, ["vector.lower_transfer max_transfer_rank = 1", "canonicalization"])
            workgroup_allocs_to_attributions(single)
            gmod = _gpu_module(single)
            nontemporal.mark(gmod, o.nontemporal_store_bytes or 0)
            ocl = emit_opencl(gmod, fp16=bool(o.fp16), asm=o.opencl_asm)
            opencl = ocl.source
            dump(f"{gname}", opencl, ".cl")
        index[(gname, fname)] = len(kernels)
        kernels.append(Kernel(name=fname, workgroup_size=wg, num_buffers=nargs, spirv=spirv, opencl=opencl,
                              access=access, texel_buffers=texels, subgroup_size=width if spirv else 0))
    return kernels, index


__all__ = ["codegen"]
