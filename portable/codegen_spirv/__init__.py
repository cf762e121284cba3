"""gpu.module -> SPIR-V words through upstream `convert-gpu-to-spirv` and `gpu-module-to-binary`."""

from .serialize import spirv_from_gpu_module, disassemble, validate

__all__ = ["spirv_from_gpu_module", "disassemble", "validate"]
