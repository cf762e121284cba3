"""Dispatch formation: which linalg ops become one kernel (groups, row chains), and kernels split to fit what one
dispatch may bind.
"""
