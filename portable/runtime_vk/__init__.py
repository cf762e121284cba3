"""Vulkan runtime: runs portable's compiled kernels (SPIR-V) on any Vulkan device.

Never imports MLIR; needs only numpy and the `vulkan` (cffi) package, which is imported lazily enough
that a host without a Vulkan loader still imports this module and gets reasons from enumerate_devices().
"""

from .backend import VulkanBackend
from .discovery import enumerate_devices

__all__ = ["VulkanBackend", "enumerate_devices"]
