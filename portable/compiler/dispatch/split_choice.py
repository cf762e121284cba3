"""How a dispatch group splits (split.py rebuilds it): along which parallel loop of its last op, how many rows
per chunk, and where the plan finds each buffer that advances with the chunk; or, where no loop allows it, the
OutOfDeviceMemory that names the buffer, its size and the limit.

A loop qualifies when it is the leading (outermost non-unit, so contiguous) dimension of every operand it indexes,
followed through every op of the group by the indexing maps; rows per chunk keep every chunk within the limit and
its binding offset aligned. The same analysis finds the cut that peels a matmul's rows into whole register tiles
and a remainder (`choose_peel`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...errors import OutOfDeviceMemory
from ...ir.linalg_info import classify, indexing_maps, iterator_types, num_inputs
from ...ir.mlir import ir
from ..graph.horizontal import dense_attr
from ..plan import numpy_dtype
from ..strategy.tiles import largest_divisor
from .groups import Group

_MIB = 1 << 20


@dataclass
class Choice:
    """How a group splits along loop `loop` of its target (`extent` rows): per op (by position in the group's
    op list) the loop that is chunked, None where the op runs whole in every chunk; per (op position,
    operand number) the operand dimension that is sliced (absent: bound whole)."""

    loop: int
    extent: int
    op_loop: dict[int, int | None] = field(default_factory=dict)
    sliced: dict[tuple[int, int], int] = field(default_factory=dict)
    row_bytes: list[tuple[str, int]] = field(default_factory=list)  # (buffer name, bytes per row)
    chunked: list[ir.Value] = field(default_factory=list)  # tensors from outside the group read in chunks
    # constants read in chunks along a dimension that is not their leading one: (constant, that dimension);
    # the split stores them with it first
    permuted: list[tuple[ir.Value, int]] = field(default_factory=list)


def nbytes(t: ir.Type) -> int:
    st = ir.ShapedType(t)
    return int(np.prod(list(st.shape), dtype=np.int64)) * np.dtype(numpy_dtype(st.element_type)).itemsize


def _uses_dim(expr: ir.AffineExpr, d: int) -> bool:
    """Whether loop `d` appears in `expr`, walked structurally."""
    if isinstance(expr, ir.AffineDimExpr):
        return expr.position == d
    if isinstance(expr, ir.AffineBinaryExpr):
        return _uses_dim(expr.lhs, d) or _uses_dim(expr.rhs, d)
    return False


def defined_in(v: ir.Value, ops: list[ir.Operation]) -> int | None:
    """Which of `ops` defines `v` (None: defined outside them)."""
    if not isinstance(v, ir.OpResult):
        return None
    owner = v.owner.operation
    return next((i for i, op in enumerate(ops) if op == owner), None)


class Namer:
    """Human names for the tensors a split error talks about: inputs and outputs by position."""

    def __init__(self, func_op: ir.Operation):
        block = func_op.regions[0].blocks[0]
        self.args = list(block.arguments)
        ret = list(block.operations)[-1]
        self.results = list(ret.operands) if ret.name == "func.return" else []

    def __call__(self, v: ir.Value) -> str:
        t = ir.RankedTensorType(v.type)
        desc = f"{tuple(t.shape)} {numpy_dtype(t.element_type)}"
        for i, a in enumerate(self.args):
            if a == v:
                return f"input {i} {desc}"
        for k, r in enumerate(self.results):
            if r == v:
                return f"output {k} {desc}"
        if isinstance(v, ir.OpResult) and v.owner.operation.name == "arith.constant":
            return f"constant {desc}"
        return f"intermediate {desc}"


def _captured(op: ir.Operation) -> list[ir.Value]:
    """Tensors the op's body reads from outside it (gathers: tensor.extract of a whole tensor)."""
    out = []

    def visit(inner):
        for v in inner.operands:
            if not isinstance(v.type, ir.RankedTensorType):
                continue
            owner = v.owner.operation if isinstance(v, ir.OpResult) else v.owner.owner
            if not _inside(owner, op):
                out.append(v)
        return ir.WalkResult.ADVANCE

    for inner in op.regions[0].blocks[0].operations:
        inner.operation.walk(visit)
    return out


def _inside(op: ir.Operation | None, container: ir.Operation) -> bool:
    while op is not None:
        if op == container:
            return True
        op = op.parent
    return False


def is_empty(v: ir.Value) -> bool:
    """Whether `v` is a tensor.empty (seen through reshapes: a collapsed one is the destination of a matmul whose
    unit dims were folded)."""
    while isinstance(v, ir.OpResult) and v.owner.operation.name in ("tensor.collapse_shape", "tensor.expand_shape"):
        v = v.owner.operation.operands[0]
    return isinstance(v, ir.OpResult) and v.owner.operation.name == "tensor.empty"


def _try_loop(g: Group, ops: list[ir.Operation], loop: int, limit: int, name: Namer,
              permute: bool = True) -> Choice | str:
    """The split of the group's ops along loop `loop` of its target, or why it is impossible. Slicing runs
    from the target's result back to the inputs: an op whose result is sliced along dim q runs its loop at
    output position q in chunks, and slices each operand along the dim that loop indexes."""
    target = next(i for i, op in enumerate(ops) if op == g.target)
    t = ops[target]
    its, ranges = iterator_types(t), classify(t).ranges
    if its[loop] != "parallel":
        return f"loop {loop} is a reduction"
    if ranges[loop] < 2:
        return f"loop {loop} has {ranges[loop]} iteration"
    out_map = indexing_maps(t)[num_inputs(t)]
    out_pos = [p for p, e in enumerate(out_map.results) if _uses_dim(e, loop)]
    if len(out_pos) != 1 or not isinstance(out_map.results[out_pos[0]], ir.AffineDimExpr):
        return f"loop {loop} does not index one output dimension alone"
    choice = Choice(loop=loop, extent=ranges[loop])
    result_dim: dict[int, int | None] = {target: out_pos[0]}  # op position -> sliced dim of its result
    for i in range(len(ops) - 1, -1, -1):
        op = ops[i]
        if i not in result_dim:
            return "an op of the kernel has a result used outside it"
        q = result_dim[i]
        d = None
        if q is not None:
            e = indexing_maps(op)[num_inputs(op)].results[q]
            if not isinstance(e, ir.AffineDimExpr) or iterator_types(op)[ir.AffineDimExpr(e).position] != "parallel":
                return f"an op of the kernel computes output dimension {q} through {e}"
            d = ir.AffineDimExpr(e).position
            if any(o.name == "linalg.index" and ir.IntegerAttr(o.attributes["dim"]).value == d
                   for o in op.regions[0].blocks[0].operations):
                return f"an op of the kernel reads the index of loop {d}"
        choice.op_loop[i] = d
        for k, (v, m) in enumerate(zip(op.operands, indexing_maps(op))):
            dim = None
            if d is not None:
                hits = [p for p, e in enumerate(m.results) if _uses_dim(e, d)]
                if len(hits) > 1 or (hits and not isinstance(m.results[hits[0]], ir.AffineDimExpr)):
                    return f"operand {k} of an op of the kernel is indexed by its loop {d} through {m}"
                dim = hits[0] if hits else None
            if dim is not None:
                choice.sliced[(i, k)] = dim
            j = defined_in(v, ops)
            if j is not None:
                if j in result_dim and result_dim[j] != dim:
                    return "a value inside the kernel is used both sliced and whole"
                result_dim[j] = dim
    # Every buffer the chunk kernel binds: sliced ones must be contiguous slices, whole ones within the limit;
    # one tensor is one kernel argument after bufferization, so it cannot be read both sliced and whole.
    seen: list[tuple[ir.Value, int | None]] = []
    for i, op in enumerate(ops):
        bound = [(v, choice.sliced.get((i, k))) for k, v in enumerate(op.operands)
                 if isinstance(v.type, ir.RankedTensorType) and defined_in(v, ops) is None]
        for v, dim in bound + [(v, None) for v in _captured(op)]:
            earlier = [d for u, d in seen if u == v]
            if earlier and earlier[0] != dim:
                return f"{name(v)} is read both sliced and whole (or along two dimensions)"
            if earlier:
                continue
            seen.append((v, dim))
            if permute and dim is not None and _leading_after(v, dim) and dense_attr(v) is not None:
                choice.permuted.append((v, dim))
                dim = 0
            why = _check_operand(v, dim, limit, name, choice)
            if why:
                return why
            if dim is not None and not is_empty(v):  # a sliced tensor.empty becomes a smaller one
                choice.chunked.append(v)
    constants = [nbytes(v.type) for v, _ in seen if isinstance(v, ir.OpResult)
                 and v.owner.operation.name == "arith.constant"]
    if any(_is_constant(v) and constants.count(nbytes(v.type)) > 1 for v in choice.chunked):
        # the plan tells a chunked constant's buffer from the others by its size
        return "the kernel reads two constants of one size, one of them in chunks"
    return _check_operand(t.results[0], out_pos[0], limit, name, choice) or choice


def _is_constant(v: ir.Value) -> bool:
    return isinstance(v, ir.OpResult) and v.owner.operation.name == "arith.constant"


def _leading_after(v: ir.Value, dim: int) -> bool:
    """Whether dimension `dim` of `v` is not its leading one (a non-unit dimension comes before it)."""
    return any(s != 1 for s in list(ir.RankedTensorType(v.type).shape)[:dim])


def _check_operand(v: ir.Value, dim: int | None, limit: int, name: Namer, choice: Choice) -> str | None:
    size = nbytes(v.type)
    if dim is None:
        if size > limit:
            return f"{name(v)} does not depend on loop {choice.loop} and is over the limit by itself"
        return None
    shape = list(ir.RankedTensorType(v.type).shape)
    if any(s != 1 for s in shape[:dim]):
        return f"{name(v)} is indexed by loop {choice.loop} in dimension {dim}, not its leading one"
    choice.row_bytes.append((name(v), size // choice.extent))
    return None


def _chunk_rows(choice: Choice, limit: int, alignment: int) -> tuple[int, str]:
    """Rows per chunk: every split operand's chunk within the limit and a multiple of `alignment` bytes
    (each chunk's binding offset is a multiple of the chunk). (0, why) when one chunk is over the limit."""
    quantum = 1
    for _, rb in choice.row_bytes:
        quantum = math.lcm(quantum, alignment // math.gcd(alignment, rb))
    widest_name, widest = max(choice.row_bytes, key=lambda x: x[1])
    most = (limit // widest) // quantum * quantum
    if most < 1:
        return 0, (f"split along loop {choice.loop}, {quantum} row(s) of {widest_name} (a chunk aligned to "
                   f"{alignment}-byte offsets) are {quantum * widest} bytes, over the limit")
    count = -(-choice.extent // most)
    even = -(-choice.extent // count)  # balanced chunks, rounded up to the alignment quantum
    return min(most, -(-even // quantum) * quantum), ""


def _origin(v: ir.Value, args: list[ir.Value], produced: list[tuple[ir.Value, tuple[int, ...]]]
            ) -> tuple[str, tuple[int, ...]] | None:
    """Where the plan finds the buffer of tensor `v`: a function argument or what earlier groups write."""
    while isinstance(v, ir.OpResult) and v.owner.operation.name in ("tensor.collapse_shape", "tensor.expand_shape"):
        v = v.owner.operation.operands[0]
    if _is_constant(v):
        return "constant", (nbytes(v.type),)
    for i, a in enumerate(args):
        if v == a:
            return "input", (i,)
    for value, groups in produced:
        if v == value:
            return "written", groups
    return None


def choose_peel(g: Group, ops: list[ir.Operation], rows_at_once: int, alignment: int, args: list[ir.Value],
          produced: list, name: Namer) -> tuple[Choice, int, list] | None:
    """(the group's outermost loop, the rows of its first part, the chunked buffers' origins) where that loop's
    extent has no divisor of at least half `rows_at_once` and a part of whole tiles, bound at aligned offsets,
    leaves a remainder; else None."""
    if rows_at_once < 2 or any(len(op.results) != 1 or op.name != "linalg.generic" for op in ops):
        return None
    ranges, its = classify(g.target).ranges, iterator_types(g.target)
    loop = next((d for d, r in enumerate(ranges) if r > 1), None)
    if loop is None or its[loop] != "parallel" or ranges[loop] <= rows_at_once or \
            largest_divisor(ranges[loop], rows_at_once) * 2 > rows_at_once:
        return None
    c = _try_loop(g, ops, loop, 1 << 62, name, permute=False)
    if isinstance(c, str):
        return None
    origins = [_origin(v, args, produced) for v in c.chunked]
    if None in origins:
        return None
    quantum = rows_at_once
    for _, rb in c.row_bytes:
        quantum = math.lcm(quantum, alignment // math.gcd(alignment, rb))
    rows = ranges[loop] // quantum * quantum
    if not rows:
        return None
    chunked = [(kind, groups, nbytes(v.type) // c.extent) for (kind, groups), v in zip(origins, c.chunked)]
    chunked.append(("result", (), nbytes(g.target.results[0].type) // c.extent))
    return c, rows, chunked


def choose_loop(g: Group, ops: list[ir.Operation], limit: int, alignment: int,
                 args: list[ir.Value], produced: list, name: Namer) -> tuple[Choice | None, int, list, list[str]]:
    """(the loop to run in chunks, rows per chunk, the chunked buffers' origins, reasons the others fail)."""
    reasons: list[str] = []
    if any(len(op.results) != 1 or op.name != "linalg.generic" for op in ops):
        return None, 0, [], ["an op of the kernel has several results"]
    for loop in range(len(iterator_types(g.target))):
        c = _try_loop(g, ops, loop, limit, name)
        if isinstance(c, str):
            reasons.append(c)
            continue
        origins = [_origin(v, args, produced) for v in c.chunked]
        if None in origins:
            reasons.append(f"{name(c.chunked[origins.index(None)])} is made by an op the plan cannot follow")
            continue
        rows, why = _chunk_rows(c, limit, alignment)
        if rows:
            chunked = [(kind, groups, nbytes(v.type) // c.extent) for (kind, groups), v in zip(origins, c.chunked)]
            chunked.append(("result", (), nbytes(g.target.results[0].type) // c.extent))
            return c, rows, chunked, reasons
        reasons.append(why)
    return None, 0, [], reasons


def oversized(ops: list[ir.Operation], g: Group, limit: int) -> list[ir.Value]:
    """Tensors the group's kernel would bind that are over `limit` bytes, largest first."""
    vals = [v for op in ops for v in op.operands if isinstance(v.type, ir.RankedTensorType)
            and defined_in(v, ops) is None] + [v for op in ops for v in _captured(op)] + [g.target.results[0]]
    big: list[ir.Value] = []
    for v in vals:
        if nbytes(v.type) > limit and not any(v == b for b in big):
            big.append(v)
    return sorted(big, key=lambda v: -nbytes(v.type))


def raise_unsplittable(big: list[ir.Value], limit: int, name: Namer, reasons: list[str]) -> None:
    v = big[0]
    size = nbytes(v.type)
    why = "; ".join(dict.fromkeys(reasons)) or "it has no parallel loop"
    raise OutOfDeviceMemory(
        f"buffer '{name(v)}' needs {size} bytes ({size / _MIB:.1f} MiB), above the largest range a kernel can "
        f"bind on this device (max_bind_bytes = {limit} bytes, {limit / _MIB:.1f} MiB: Vulkan "
        f"maxStorageBufferRange / OpenCL max_mem_alloc_size), and its kernel cannot run in chunks ({why}); "
        f"use a smaller batch or shape, or a device with a larger limit")
