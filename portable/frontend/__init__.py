"""Frontends: everything that turns a user's graph into MLIR text of linalg on tensors."""
