"""Rewrites of lowered kernels for Vulkan drivers that run a subgroup as the SIMD lanes of one CPU thread (lavapipe),
and SPIR-V-only vector shapes; lane_kernels.rewrite runs them on the Vulkan copy of a kernel.
"""
