"""A thread's reads of output elements it filled itself take the fill's constant (every profile, both APIs).

A matmul's kernel starts by storing the fill constant over the thread's own output elements (a loop nest of
scalar stores in the promoted form, then a barrier; vector stores in the register-blocked form), then
(loop_registers' hoisting) reads those same elements back as the K loop's accumulators. Here such reads take
the constant when the thread itself filled every element they read, and the fill goes when the thread later
overwrites all it stored and nobody reads it. On the H200 the promoted prologue (64 scalar stores, a barrier
fencing global memory, 64 scalar reads, and a scalar-typed output buffer) left the f32 matmul 4096 at 3.55 ms
against 3.27 ms with the accumulators started at zero; on lavapipe, where every buffer access is a loop over
the lanes, the round trip was a large part of short-K kernels (bmm 8x256x64 @ 8x64x256 CPU ms 5.5 -> 5.1).

Why thread-local reasoning is enough: all threads run the same code, so a thread's span from its fill to its
last forwarded read holds the same barriers as every other thread's; no op in that span writes the buffer, so
another thread's non-fill write to an element can follow that thread's own reads only, and reaching this
thread's read unordered would be a data race in the kernel as generated. Fill writes all store one constant.

The same reasoning forwards stored values (`forward_own_writes`): a matmul's fused epilogue reads back the outputs
its thread stored after the K loop and stores them again; the reads take the stored vectors and the first stores
go, so the epilogue runs on the accumulators and each output is written once.
"""

from __future__ import annotations

from ...ir.mlir import arith, ir
from ...ir.util import all_in_bounds, constant_int, kernel_blocks
from .loop_registers import touches

# Ops that neither write memory nor branch: barriers before the first other op order nothing.
_QUIET = ("arith.", "affine.apply", "gpu.block_id", "gpu.thread_id", "gpu.lane_id", "gpu.block_dim", "gpu.grid_dim",
          "vector.transfer_read", "memref.load", "ub.poison")


def _splat_write(op: ir.Operation) -> ir.Attribute | None:
    """The splat constant an unmasked, in-bounds, minor-identity transfer_write stores, else None."""
    value = op.operands[0]
    if not isinstance(value, ir.OpResult) or value.owner.operation.name != "arith.constant":
        return None
    attr = value.owner.attributes["value"]
    if not isinstance(attr, ir.DenseElementsAttr) or not attr.is_splat:
        return None
    if _segments(op)[-1] != 0 or not all_in_bounds(op) or not _minor_identity(op):
        return None
    return attr


def _minor_identity(op: ir.Operation) -> bool:
    amap = ir.AffineMapAttr(op.attributes["permutation_map"]).value
    n, r = amap.n_dims, len(amap.results)
    return [str(e) for e in amap.results] == [f"d{i}" for i in range(n - r, n)]


def _segments(op: ir.Operation) -> list[int]:
    return list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))


def _indices(op: ir.Operation) -> list[ir.Value]:
    seg = _segments(op)
    start = 1 if op.name == "vector.transfer_read" else 2
    return list(op.operands)[start:start + seg[1 if op.name == "vector.transfer_read" else 2]]


_MAX_ELEMENTS = 4096  # elements a thread's fill may cover for the enumeration below


def _linear(v: ir.Value, depth: int = 0) -> tuple[dict, int]:
    """`v` as ({leaf value: coefficient}, constant) over adds, subtracts and products with constants."""
    c = constant_int(v)
    if c is not None:
        return {}, c
    if depth < 32 and isinstance(v, ir.OpResult):
        op = v.owner.operation
        if op.name in ("arith.addi", "arith.subi"):
            (fa, ca), (fb, cb) = (_linear(x, depth + 1) for x in op.operands)
            sign = 1 if op.name == "arith.addi" else -1
            out = dict(fa)
            for k, n in fb.items():
                out[k] = out.get(k, 0) + sign * n
            return {k: n for k, n in out.items() if n}, ca + sign * cb
        if op.name == "arith.muli":
            for x, y in (op.operands, reversed(list(op.operands))):
                k = constant_int(y)
                if k is not None:
                    f, c = _linear(x, depth + 1)
                    return {a: n * k for a, n in f.items() if n * k}, c * k
    return {v: 1}, 0


def _fill_nest(loop: ir.Operation):
    """(store, [(iv, trip values)]) when `loop` is a perfect nest of constant-bound scf.for loops whose only
    effect is one memref.store of an arith.constant, else None."""
    ivs, op = [], loop
    while op.name == "scf.for" and len(list(op.operands)) == 3 and not len(op.results):
        lb, ub, step = (constant_int(v) for v in op.operands)
        if None in (lb, ub, step) or step <= 0 or ub <= lb:
            return None
        body = op.regions[0].blocks[0]
        ivs.append((body.arguments[0], range(lb, ub, step)))
        inner = [o.operation for o in body.operations if o.operation.name != "scf.yield"]
        rest = [o for o in inner if not o.name.startswith("arith.")]  # index arithmetic aside
        if len(rest) != 1:
            return None
        op = rest[0]
        if op.name == "memref.store":
            value = op.operands[0]
            const = isinstance(value, ir.OpResult) and value.owner.operation.name == "arith.constant"
            return (op, ivs) if const else None
    return None


def _elements(indices: list[ir.Value], ranges: dict, vshape: list[int]) -> set | None:
    """The elements (per dim: symbolic part, constant) that `indices` reach over the loop `ranges` (iv -> values)
    and a minor-identity vector of shape `vshape`; None when too many or not linear."""
    forms = [_linear(v) for v in indices]
    free = [iv for iv in ranges if any(iv in f for f, _ in forms)]
    count = 1
    for iv in free:
        count *= len(ranges[iv])
    for n in vshape:
        count *= n
    if count > _MAX_ELEMENTS:
        return None
    out = set()

    def rec(i: int, env: dict) -> None:
        if i < len(free):
            for x in ranges[free[i]]:
                rec(i + 1, {**env, free[i]: x})
            return
        base = []
        for f, c in forms:
            sym = frozenset((k, n) for k, n in f.items() if k not in env)
            base.append((sym, c + sum(n * env[k] for k, n in f.items() if k in env)))
        lead = len(base) - len(vshape)
        for offs in _offsets(vshape):
            out.add(tuple(b if d < lead else (b[0], b[1] + offs[d - lead]) for d, b in enumerate(base)))

    rec(0, {})
    return out


def _offsets(shape: list[int]) -> list[tuple[int, ...]]:
    out = [()]
    for n in shape:
        out = [o + (i,) for o in out for i in range(n)]
    return out


def _access(op: ir.Operation, mem: ir.Value) -> tuple[list[ir.Value], list[int]] | None:
    """(indices, vector shape) of an in-bounds, unmasked, minor-identity read or write of `mem` itself."""
    if op.name in ("memref.load", "memref.store"):
        at = 0 if op.name == "memref.load" else 1
        return (list(op.operands)[at + 1:], []) if op.operands[at] == mem else None
    if op.name in ("vector.transfer_read", "vector.transfer_write"):
        read = op.name == "vector.transfer_read"
        if op.operands[0 if read else 1] != mem or _segments(op)[-1] or \
                not all_in_bounds(op):
            return None
        if not _minor_identity(op):
            return None
        vtype = op.results[0].type if read else op.operands[0].type
        return _indices(op), list(ir.VectorType(vtype).shape)
    return None


def forward_fills(module: ir.Module) -> None:
    """In every single-block kernel, per buffer argument: the reads of elements the thread itself filled become
    the constant; the fill goes when it is dead; barriers no memory access precedes go after it."""
    for block in kernel_blocks(module):
        for mem in block.arguments:
            if isinstance(mem.type, ir.MemRefType):
                _forward_fill(block, mem)


def _constant_fill(op: ir.Operation, mem: ir.Value) -> tuple[ir.Attribute, set] | None:
    """(scalar constant, elements) when `op` only writes one constant to `mem`: a fill nest, a store of a constant,
    or a transfer_write of a splat."""
    if op.name == "scf.for":
        found = _fill_nest(op)
        if found is None or found[0].operands[1] != mem:
            return None
        store, ivs = found
        value, indices, ranges, shape = (store.operands[0].owner.attributes["value"], list(store.operands)[2:],
                                         dict(ivs), [])
    elif op.name == "memref.store" and op.operands[1] == mem:
        v = op.operands[0]
        if not isinstance(v, ir.OpResult) or v.owner.operation.name != "arith.constant":
            return None
        value, indices, ranges, shape = v.owner.attributes["value"], list(op.operands)[2:], {}, []
    elif op.name == "vector.transfer_write" and op.operands[1] == mem and (splat := _splat_write(op)) is not None:
        value, (indices, shape), ranges = splat.get_splat_value(), _access(op, mem), {}
    else:
        return None
    elements = _elements(indices, ranges, shape)
    return None if elements is None else (value, elements)


def _forward_fill(block: ir.Block, mem: ir.Value) -> None:
    touching = [o.operation for o in block.operations if touches(o.operation, [mem])]
    fills, value, filled = [], None, set()
    for op in touching:  # the buffer's first accesses, while they write one constant
        found = _constant_fill(op, mem)
        if found is None or value is not None and str(found[0]) != str(value):
            break
        value = found[0]
        filled |= found[1]
        fills.append(op)
    forwarded = []
    for op in touching[len(fills):] if fills else []:
        acc = _access(op, mem) if op.name in ("memref.load", "vector.transfer_read") else None
        got = _elements(acc[0], {}, acc[1]) if acc else None
        if got is None or not got <= filled:
            break
        forwarded.append(op)
    for r in forwarded:
        rtype = r.results[0].type
        with ir.InsertionPoint(r), r.location:
            if isinstance(rtype, ir.VectorType):
                const = arith.ConstantOp(rtype, ir.DenseElementsAttr.get_splat(rtype, value)).result
            else:
                const = arith.ConstantOp(rtype, value).result
        r.results[0].replace_all_uses_with(const)
        r.erase()
    if forwarded and _overwritten(block, fills[-1], mem, filled):
        for op in fills:
            op.erase()
        _drop_leading_barriers(block)


def _overwritten(block: ir.Block, last_fill: ir.Operation, mem: ir.Value, filled: set) -> bool:
    """The thread's top-level writes after its fill store every element it filled before anything else touches
    `mem` (reads after that see those writes: a matmul's epilogue reading the outputs back)."""
    written: set = set()
    after = False
    for o in (x.operation for x in block.operations):
        if o == last_fill:
            after = True
            continue
        if not after or not touches(o, [mem]):
            continue
        acc = _access(o, mem) if o.name in ("memref.store", "vector.transfer_write") else None
        if acc is None:
            return False  # a read, a view, or a write inside a region: the fill may still be seen
        got = _elements(acc[0], {}, acc[1])
        if got is None:
            return False
        written |= got
        if filled <= written:
            return True
    return False


def _drop_leading_barriers(block: ir.Block) -> None:
    """Barriers before any op that may touch memory order nothing."""
    for o in [x.operation for x in block.operations]:
        if o.name == "gpu.barrier":
            o.erase()
        elif o.regions or not o.name.startswith(_QUIET) or o.name in ("vector.transfer_read", "memref.load"):
            return


def _transfer(op: ir.Operation) -> tuple | None:
    """(buffer, indices, vector type, maps) of an unmasked, in-bounds, minor-identity vector transfer, else None."""
    if op.name not in ("vector.transfer_read", "vector.transfer_write") or _segments(op)[-1] or \
            not all_in_bounds(op) or not _minor_identity(op):
        return None
    read = op.name == "vector.transfer_read"
    vtype = op.results[0].type if read else op.operands[0].type
    return (op.operands[0 if read else 1], _indices(op), vtype, str(op.attributes["permutation_map"]),
            str(op.attributes["in_bounds"]))


def _same_place(a: tuple, b: tuple) -> bool:
    return a[0] == b[0] and len(a[1]) == len(b[1]) and all(x == y for x, y in zip(a[1], b[1])) and \
        a[2] == b[2] and a[3:] == b[3:]


def _apart(a: tuple, b: tuple) -> bool:
    """Two transfers of one buffer (minor-identity 1-d vectors) that provably touch no common element: some index
    differs by a constant, past the vector's length in the last dim."""
    if a[0] != b[0] or len(a[1]) != len(b[1]) or a[3] != b[3] or ir.VectorType(a[2]).rank != 1 or \
            ir.VectorType(b[2]).rank != 1:
        return False
    for d, (x, y) in enumerate(zip(a[1], b[1])):
        (fx, cx), (fy, cy) = _linear(x), _linear(y)
        if fx != fy:
            continue
        reach = max(ir.VectorType(a[2]).shape[0], ir.VectorType(b[2]).shape[0]) if d == len(a[1]) - 1 else 1
        if abs(cx - cy) >= reach:
            return True
    return False


def forward_own_writes(module: ir.Module) -> None:
    """forward_own_writes_in over every kernel's body (run after CSE: the read and the write then index with the
    same values)."""
    for block in kernel_blocks(module):
        forward_own_writes_in(block)


def forward_own_writes_in(block: ir.Block) -> None:
    """A matmul's epilogue reads back the outputs its thread just wrote after the K loop, then writes them again:
    each such read (same buffer, indices, vector type, nothing touching the buffer between) takes the value
    written, and the first write goes when the second covers it with nothing reading between. Thread-local, as
    the fill forwarding: another thread's write between the two would be a race in the kernel itself."""
    ops = [o.operation for o in block.operations]
    alive = [True] * len(ops)
    for i, w in enumerate(ops):
        place = _transfer(w) if alive[i] and w.name == "vector.transfer_write" else None
        if place is None:
            continue
        for j in range(i + 1, len(ops)):
            if not alive[j]:
                continue
            o = ops[j]
            other = _transfer(o)
            if other is not None and _same_place(place, other):
                if o.name == "vector.transfer_read":
                    o.results[0].replace_all_uses_with(w.operands[0])
                    o.erase()
                    alive[j] = False
                    continue
                w.erase()
                alive[i] = False
                break
            if other is not None and o.name == "vector.transfer_write" and _apart(place, other):
                continue  # another row of the tile
            if touches(o, [place[0]]):
                break
