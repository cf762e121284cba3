"""gpu.module -> SPIR-V words through upstream `convert-gpu-to-spirv` and `gpu-module-to-binary`."""

from .serialize import disassemble, spirv_from_gpu_module, validate

__all__ = ["spirv_from_gpu_module", "disassemble", "validate"]
