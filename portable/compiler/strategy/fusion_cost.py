"""The cost model that decides whether an elementwise producer stays fused into the reduction that reads it.

Upstream elementwise fusion (`linalg-fuse-elementwise-ops`, in the preprocess stage) moves a producer's body into
every consumer, a matmul's included: there the producer runs once per (row, k) *per output column*, n times the
work of computing it once. Keeping it fused saves writing its result and reading it back, 2 x its bytes; taking
it out costs one kernel and those bytes. So a producer leaves the product when

    values x cost(body) x (reuse - 1)  >  values x FLOPS_PER_BYTE x 2 x element bytes + LAUNCH_OPS

with cost(body) its ops weighted by how long they take next to an add (WEIGHTS: transcendental functions many,
a division a few), reuse how many times the consumer evaluates each producer value (a matmul's n), values how
many values the producer has, and LAUNCH_OPS what one more kernel costs, in the same units.
GELU (erf: ~20 ops with its polynomial) before BERT's FFN down projection, n = hidden size, is far past it; a
cast or a scale before a product with a few columns stays fused.
"""

from __future__ import annotations

from ...ir.mlir import ir

# Relative cost of one evaluation, an add or multiply being 1 (the libm-style expansions of the transcendental
# functions are tens of operations on every driver these kernels target).
WEIGHTS = {
    "math.erf": 20, "math.tanh": 16, "math.exp": 12, "math.exp2": 10, "math.expm1": 14, "math.log": 14,
    "math.log1p": 16, "math.log2": 14, "math.powf": 28, "math.sin": 16, "math.cos": 16, "math.atan": 20,
    "math.atan2": 24, "math.sqrt": 4, "math.rsqrt": 4, "math.fpowi": 8, "math.ipowi": 8,
    "arith.divf": 4, "arith.remf": 8, "arith.divsi": 8, "arith.divui": 8, "arith.remsi": 8, "arith.remui": 8,
}
FREE = {"arith.constant", "linalg.yield", "linalg.index"}
# Arithmetic a device does in the time it moves one byte to and from its memory: ~10 for CPUs' memory
# bandwidth against their vector units, 10-20 for GPUs. Lower keeps fewer producers fused.
FLOPS_PER_BYTE = 4
# One more dispatch (its launch, the barrier before its reader) as arithmetic: tens of microseconds of a device
# doing a few GFLOP/s (a CPU driver); small producers, a pooled vector before a classifier, stay fused.
LAUNCH_OPS = 250_000


def body_cost(ops: list[ir.Operation]) -> int:
    """Weighted count of the ops a producer evaluates per value."""
    return sum(0 if o.name in FREE else WEIGHTS.get(o.name, 1) for o in ops)


def keep_fused(cost: int, reuse: int, elem_bytes: int, values: int, launch_ops: int | None = None) -> bool:
    """Whether recomputing `values` values of a producer of `cost` `reuse` times each costs less than storing them
    and reading them back (elem_bytes each way) in a kernel of their own; `launch_ops`: the profile's figure for
    one more kernel (default LAUNCH_OPS)."""
    launch = LAUNCH_OPS if launch_ops is None else launch_ops
    return values * cost * max(reuse - 1, 0) <= values * FLOPS_PER_BYTE * 2 * elem_bytes + launch


__all__ = ["WEIGHTS", "FLOPS_PER_BYTE", "LAUNCH_OPS", "body_cost", "keep_fused"]
