"""Frontends: everything that turns a user's graph into MLIR text of linalg on tensors."""

from .graph import Graph, Tensor

__all__ = ["Graph", "Tensor"]
