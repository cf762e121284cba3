"""Schedules: the transform-dialect script that tiles, bufferizes and maps each group to the GPU, and what it places
(grids, grid-stride and serial rows, workgroup-memory staging, cooperative matrices, subgroup reductions).
"""
