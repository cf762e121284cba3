"""Graph-level rewrites on linalg on tensors: named ops, decompositions, layouts, fusion and unfusion, convolutions as
matmuls, gathers, split-K and split rows; each run by a stage of compiler/pipeline.py.
"""
