"""Lowering of the outlined kernels on memrefs: registers for loop-carried and row memory, constant fills forwarded,
barriers relaxed, row columns regrouped, loops vectorized.
"""
