"""Kernels on cooperative matrices are declared under the Vulkan memory model.

SPIR-V requires it: a shader module that declares CooperativeMatrixKHR must declare VulkanMemoryModel too
(spirv-val: "If the Shader and CooperativeMatrixKHR capabilities are declared, the VulkanMemoryModel capability
must also be declared"), and the validation layer rejects the module otherwise. Upstream's convert-gpu-to-spirv
always picks GLSL450, so the memory model is changed here, on the spirv.module, for such kernels only (every
Vulkan 1.3 device, which cooperative-matrix kernels need, supports the Vulkan memory model).

Under the Vulkan model an access is private (not ordered with other invocations) unless marked, and a barrier
orders only what was made available and visible. These kernels communicate through memory within a workgroup
(staged operand tiles in workgroup memory, fragments stored to the output buffer and read back by the epilogue),
so every access to workgroup or buffer memory becomes non-private (NonPrivatePointer), and every barrier makes its
storage classes available and visible (MakeAvailable|MakeVisible, set with the rest of its semantics by
serialize._barriers_cover_buffers): what GLSL's `coherent` plus `barrier()` mean under that model.
"""

from __future__ import annotations

from ..ir.mlir import ir
from ..ir.util import find_ops
from .vce import add_capability

COOPERATIVE = ("spirv.KHR.CooperativeMatrixLoad", "spirv.KHR.CooperativeMatrixStore",
               "spirv.KHR.CooperativeMatrixMulAdd")
SHARED_CLASSES = ("StorageBuffer", "Workgroup")  # where invocations of a workgroup exchange data
_ACCESS_ATTR = {"spirv.Load": "memory_access", "spirv.Store": "memory_access",
                "spirv.KHR.CooperativeMatrixLoad": "memory_operand",
                "spirv.KHR.CooperativeMatrixStore": "memory_operand"}


def needs_vulkan_model(spv: ir.Operation) -> bool:
    """Whether this spirv.module uses cooperative-matrix instructions."""
    return bool(find_ops(spv, COOPERATIVE))


def to_vulkan_model(spv: ir.Operation) -> None:
    """Declare the Vulkan memory model on `spv` (a spirv.module) and make its shared accesses non-private."""
    spv.attributes["memory_model"] = ir.Attribute.parse("#spirv.memory_model<Vulkan>")
    add_capability(spv, "VulkanMemoryModel")  # core from SPIR-V 1.5: no extension
    for op in find_ops(spv, tuple(_ACCESS_ATTR)):
        pointer = op.operands[0].type
        if _storage_class(pointer) not in SHARED_CLASSES:
            continue
        name = _ACCESS_ATTR[op.name]
        flags = _flags(op.attributes[name]) if name in op.attributes else []
        if "NonPrivatePointer" not in flags:
            op.attributes[name] = ir.Attribute.parse(f"#spirv.memory_access<{'|'.join([*flags, 'NonPrivatePointer'])}>")


def _storage_class(pointer: ir.Type) -> str:
    """The storage class of a `!spirv.ptr<T, Class>` type."""
    return str(pointer).rsplit(",", 1)[-1].strip(" >")


def _flags(attr: ir.Attribute) -> list[str]:
    """The flags of a bit-enum attribute such as `#spirv.memory_access<Aligned|Volatile>` (none for `None`)."""
    inner = str(attr).split("<", 1)[1].rsplit(">", 1)[0]
    return [f.strip() for f in inner.split("|") if f.strip() and f.strip() != "None"]
