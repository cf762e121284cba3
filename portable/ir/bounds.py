"""Interval bounds of index values, enough to size a private array whose memref.alloc has dynamic sizes.

Tiling leaves per-thread buffers like `memref.alloc(%17, %29) : memref<?x?xf32>` where %17 is
`max(min(ceil(32 / 8), ...), 0)` of thread and block ids. OpenCL C needs a constant array size, so the
emitter allocates the upper bound found here. Thread ids range over the workgroup size and block ids over
`known_grid_size`; anything this analysis does not know makes the bound unknown (the emitter then raises).
"""

from __future__ import annotations

from .mlir import ir

Interval = tuple[int, int]


class Bounds:
    def __init__(self, block_size: tuple[int, int, int], grid_size: tuple[int, int, int] | None):
        self.block_size = block_size
        self.grid_size = grid_size
        self._memo: dict[ir.Value, Interval | None] = {}

    def upper(self, value: ir.Value) -> int | None:
        r = self.of(value)
        return None if r is None else r[1]

    def of(self, value: ir.Value) -> Interval | None:
        if value not in self._memo:
            self._memo[value] = None  # cycles (loop-carried values) stay unknown
            self._memo[value] = self._compute(value)
        return self._memo[value]

    def _compute(self, value: ir.Value) -> Interval | None:
        if isinstance(value, ir.BlockArgument):
            return self._block_argument(value)
        op = value.owner.operation
        name = op.name
        args = [self.of(v) for v in op.operands]
        if name == "arith.constant":
            attr = op.attributes["value"]
            return (attr.value, attr.value) if isinstance(attr, ir.IntegerAttr) else None
        if name in ("gpu.thread_id", "gpu.block_dim", "gpu.block_id", "gpu.grid_dim"):
            return self._gpu_id(name, str(op.attributes["dimension"]))
        if name == "arith.select":
            args = args[1:]  # the condition's range does not matter
        if any(a is None for a in args):
            return None
        if name in ("arith.index_cast", "arith.index_castui", "arith.extsi"):
            return args[0]
        if name == "arith.select":
            (a0, a1), (b0, b1) = args
            return min(a0, b0), max(a1, b1)
        if len(args) != 2:
            return None
        (a0, a1), (b0, b1) = args
        if name == "arith.addi":
            return a0 + b0, a1 + b1
        if name == "arith.subi":
            return a0 - b1, a1 - b0
        if name == "arith.minsi":
            return min(a0, b0), min(a1, b1)
        if name == "arith.maxsi":
            return max(a0, b0), max(a1, b1)
        if name == "arith.muli":
            return _corners(lambda x, y: x * y, args)
        if b0 <= 0 <= b1:
            return None  # division by a range containing zero
        if name == "arith.divsi":
            return _corners(lambda x, y: abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1), args)
        if name == "arith.floordivsi":
            return _corners(lambda x, y: x // y, args)
        if name == "arith.ceildivsi":
            return _corners(lambda x, y: -(-x // y), args)
        if name == "arith.remsi":
            m = max(abs(b0), abs(b1)) - 1
            return (0 if a0 >= 0 else -m), (0 if a1 <= 0 else m)
        return None

    def _gpu_id(self, name: str, dimension: str) -> Interval | None:
        d = "xyz".index(dimension[-2])  # "#gpu<dim x>"
        if name == "gpu.thread_id":
            return 0, self.block_size[d] - 1
        if name == "gpu.block_dim":
            return self.block_size[d], self.block_size[d]
        if self.grid_size is None:
            return None
        if name == "gpu.block_id":
            return 0, self.grid_size[d] - 1
        return self.grid_size[d], self.grid_size[d]

    def _block_argument(self, arg: ir.BlockArgument) -> Interval | None:
        parent = arg.owner.owner.operation
        if parent.name == "scf.for" and arg.arg_number == 0:
            lb, ub = self.of(parent.operands[0]), self.of(parent.operands[1])
            if lb is None or ub is None:
                return None
            return lb[0], max(lb[0], ub[1] - 1)
        return None


def _corners(fn, args: list[Interval]) -> Interval:
    (a0, a1), (b0, b1) = args
    values = [fn(x, y) for x in (a0, a1) for y in (b0, b1)]
    return min(values), max(values)
