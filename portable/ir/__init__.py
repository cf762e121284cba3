"""The MLIR Python bindings (one shim, `mlir.py`) and helpers over IR objects, shared by the frontend, the
compiler and both codegen rooms. The runtime, memory and core files never import this package."""
