"""Rows of a row chain split across the lanes of a subgroup and kept in registers (CPU Vulkan drivers: lavapipe).

A row chain without workgroup reductions gives each invocation a whole row (softmax, layernorm), walked by column
loops on vec4 (loop_vectorize.py), each pass reading the row again. llvmpipe runs the S invocations of a subgroup
as the SIMD lanes of one CPU thread and reaches a buffer by a loop over the lanes per access, so the kernel costs
about one lane loop per pass, row and 4 columns, and for what all rows read alike (layernorm's scale and shift) as
much again. Here the S lanes of a subgroup take the subgroup's S rows one after the other instead, each lane
every S-th group of 4 columns: a column loop becomes a straight line of C / 4S vec4 accesses per lane (unrolled),
its partial reductions are combined across the lanes by shuffles; reads of the same input columns in later
passes then are the values already read (held in registers, spilled to the stack as whole SIMD vectors), and
the reads every row makes alike are made once for the subgroup's rows.

The kernel qualifies when its only thread index is x (each invocation's row comes from it); its top level is
straight-line code (private scalars, arith) around column loops from 0 to C (a multiple of 4S, at most
`max_columns`) in steps of 4 whose bodies access buffers along the loop only in the innermost index, whose
iter_args are vec4 partials each reduced by one vector.reduction, and whose written buffers nothing reads.
"""

from __future__ import annotations

from ...ir.mlir import arith, gpu, ir, passmanager, scf, vector
from ...ir.util import clone_mapped, constant_int, find_ops

WIDTH = 4
_COMBINE = {"add": "arith.addf", "mul": "arith.mulf", "maximumf": "arith.maximumf", "maxnumf": "arith.maxnumf",
            "minimumf": "arith.minimumf", "minnumf": "arith.minnumf"}
_WRITES = ("memref.store", "vector.transfer_write", "vector.store")
_TOP = ("memref.load", "memref.store", "vector.transfer_read", "vector.transfer_write", "vector.broadcast",
        "vector.reduction", "gpu.block_id", "gpu.thread_id", "memref.alloc", "memref.alloca", "gpu.return")
_HOIST = ("vector.broadcast", "vector.extract", "vector.extract_strided_slice", "vector.bitcast", "gpu.block_id",
          "gpu.lane_id", "affine.apply")
_CLEAN = "builtin.module(gpu.module(gpu.func(canonicalize,cse)))"


def split_rows(module: ir.Module, gpu_module, subgroup: int, max_columns: int) -> bool:
    """Rewrite the qualifying kernels of `gpu_module()` (a callable: the module is re-read after cleaning), in
    place; whether any was."""
    done = 0
    for fn in find_ops(gpu_module(), ("gpu.func",)):
        plan = _plan(fn, subgroup, max_columns)
        if plan is not None:
            _rewrite(fn, subgroup, *plan)
            done += 1
    if done:
        passmanager.PassManager.parse(_CLEAN).run(module.operation)
        for fn in find_ops(gpu_module(), ("gpu.func",), lambda f: "portable.subgroup_rows" in f.attributes):
            del fn.attributes["portable.subgroup_rows"]
            _share_reads(fn)
        passmanager.PassManager.parse(_CLEAN).run(module.operation)
    return done > 0


def _plan(fn: ir.Operation, subgroup: int, max_columns: int):
    """(the thread id op, the column loops) when `fn` qualifies, else None."""
    if "known_block_size" not in fn.attributes:
        return None
    block = [int(x) for x in ir.DenseI32ArrayAttr(fn.attributes["known_block_size"])]
    if block[0] % subgroup or block[1] != 1 or block[2] != 1:
        return None
    tids = find_ops(fn, ("gpu.thread_id",))
    if len(tids) != 1 or str(tids[0].attributes["dimension"]) != "#gpu<dim x>":
        return None
    tid = tids[0]
    entry = fn.regions[0].blocks[0]
    if tid.block != entry:
        return None
    loops = []
    for op in [o.operation for o in entry.operations]:
        if op.name == "scf.for":
            if not _column_loop(op, subgroup, max_columns):
                return None
            loops.append(op)
        elif op.regions or not (op.name in _TOP or op.name.startswith(("arith.", "math."))):
            return None
    if not loops or not _written_unread(fn, loops):
        return None
    return tid, loops


def _column_loop(loop: ir.Operation, subgroup: int, max_columns: int) -> bool:
    lb, ub, step = (constant_int(v) for v in list(loop.operands)[:3])
    if lb != 0 or step != WIDTH or ub is None or ub % (WIDTH * subgroup) or ub > max_columns:
        return False
    body = loop.regions[0].blocks[0]
    iv = body.arguments[0]
    for op in [o.operation for o in body.operations][:-1]:
        if op.regions:
            return False
        if op.name in ("vector.transfer_read", "vector.transfer_write"):
            if not _along(op, iv, loop):
                return False
        elif op.name == "memref.load":
            if any(_inside(v, loop) for v in list(op.operands)[1:]):
                return False
        elif not op.name.startswith(("arith.", "math.", "vector.broadcast")) or iv in list(op.operands):
            return False
    for res in loop.results:
        users = [u.owner.operation for u in res.uses]
        if not isinstance(res.type, ir.VectorType) or len(users) != 1 or users[0].name != "vector.reduction" or \
                len(users[0].operands) != 1 or _kind(users[0]) not in _COMBINE:
            return False
        if not isinstance(users[0].results[0].type, ir.F32Type):
            return False  # shuffled as f32 only (bf16 is emulated on integers, f16 needs its own capability)
    return True


def _along(op: ir.Operation, iv: ir.Value, loop: ir.Operation) -> bool:
    """A 1-d in-bounds vec4 transfer whose innermost index is the loop's iv and whose others are outside it."""
    seg = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    first = 1 if op.name == "vector.transfer_read" else 2
    idx = list(op.operands)[first:first + seg[first]]
    vt = ir.VectorType(op.results[0].type if op.results else op.operands[0].type)
    amap = ir.AffineMapAttr(op.attributes["permutation_map"]).value
    return (seg[-1] == 0 and str(op.attributes["in_bounds"]) == "[true]" and vt.shape == [WIDTH] and
            len(amap.results) == 1 and str(amap.results[0]) == f"d{amap.n_dims - 1}" and bool(idx) and
            idx[-1] == iv and not any(_inside(v, loop) for v in idx[:-1]))


def _words(loop: ir.Operation) -> bool:
    """Whether the loop's transfers move 32-bit elements (wide_buffers.py makes 8 of them one 32-byte access)."""
    for op in find_ops(loop, ("vector.transfer_read", "vector.transfer_write")):
        vt = ir.VectorType(op.results[0].type if op.results else op.operands[0].type)
        if not (isinstance(vt.element_type, ir.F32Type) or
                isinstance(vt.element_type, ir.IntegerType) and vt.element_type.width == 32):
            return False
    return True


def _inside(v: ir.Value, loop: ir.Operation) -> bool:
    owner = v.owner.owner if isinstance(v, ir.BlockArgument) else v.owner.operation
    while owner is not None and owner.name != "gpu.func":
        if owner == loop:
            return True
        owner = owner.parent.operation if owner.parent is not None else None
    return False


def _kind(red: ir.Operation) -> str:
    return str(red.attributes["kind"]).removeprefix("#vector.kind<").removesuffix(">")


def _written_unread(fn: ir.Operation, loops: list) -> bool:
    """Buffers the column loops write are read nowhere in the kernel (a lane would read another lane's)."""
    written = []
    for loop in loops:
        for w in find_ops(loop, _WRITES):
            written.append(w.operands[1])
    reads = find_ops(fn, ("memref.load", "vector.transfer_read", "vector.load"))
    return not any(r.operands[0] == m for r in reads for m in written)


def _rewrite(fn: ir.Operation, subgroup: int, tid: ir.Operation, loops: list) -> None:
    entry = fn.regions[0].blocks[0]
    ops = [o.operation for o in entry.operations]
    index = ir.IndexType.get()
    with ir.InsertionPoint.after(tid), fn.location:
        lane = gpu.LaneIdOp().result
        first = arith.SubIOp(tid.results[0], lane).result  # the subgroup's first invocation
        # 8 consecutive columns per lane where every loop's columns allow: one 32-byte access, not two of 16.
        span = 2 * WIDTH if all(constant_int(lp.operands[1]) % (2 * WIDTH * subgroup) == 0 and _words(lp)
                                for lp in loops) else WIDTH
        lane_cols = arith.MulIOp(lane, arith.ConstantOp(index, span).result).result
        ub = max(constant_int(loop.operands[1]) for loop in loops)
        pair = span // WIDTH
        offsets = [k // pair * span * subgroup + k % pair * WIDTH for k in range(ub // (WIDTH * subgroup))]
        cols = [lane_cols] + [arith.AddIOp(lane_cols, arith.ConstantOp(index, k).result).result for k in offsets[1:]]
        zero, one = arith.ConstantOp(index, 0).result, arith.ConstantOp(index, 1).result
        rows = arith.ConstantOp(index, subgroup).result
    term = ops[-1]
    with ir.InsertionPoint(term), fn.location:
        rloop = scf.ForOp(zero, rows, one)
    body = rloop.regions[0].blocks[0]
    with ir.InsertionPoint(body), fn.location:
        yield_op = scf.YieldOp([])
    for op in ops[:-1]:
        if op.name in ("memref.alloc", "memref.alloca") or op == tid:
            continue
        op.move_before(yield_op)
    uses = [(u.owner, u.operand_number) for u in tid.results[0].uses if u.owner != first.owner]
    with ir.InsertionPoint.at_block_begin(body), fn.location:
        mine = arith.AddIOp(first, body.arguments[0]).result  # the invocation whose row this is
    for owner, n in uses:
        owner.operands[n] = mine
    for loop in loops:
        _unroll(loop, cols[:constant_int(loop.operands[1]) // (WIDTH * subgroup)], subgroup, span // WIDTH)
    fn.attributes["portable.subgroup_rows"] = ir.UnitAttr.get()
    rloop.operation.attributes["portable.subgroup_rows"] = ir.UnitAttr.get()


def _unroll(loop: ir.Operation, cols: list, subgroup: int, pair: int) -> None:
    """The column loop as one copy of its body per group of 4 columns of this lane (`cols`, in the lane's order);
    with `pair` 2, two copies share their buffer accesses as one of 8 columns. Its reductions are then
    completed across the subgroup's lanes."""
    body = loop.regions[0].blocks[0]
    iv, accs = body.arguments[0], list(body.arguments)[1:]
    ops = [o.operation for o in body.operations]
    current = list(loop.operands)[3:]
    ip = ir.InsertionPoint(loop)
    wide = {}  # body transfer (by position) -> its 8-column read, or the operands of its first half's write
    for k, col in enumerate(cols):
        half = k % pair
        values = {iv: col}
        values.update(zip(accs, current))
        for i, op in enumerate(ops[:-1]):
            if pair == 2 and op.name in ("vector.transfer_read", "vector.transfer_write") and iv in list(op.operands):
                _paired(op, i, values, wide, half, ip)
                continue
            clone_mapped(op, values, ip)
        current = [values.get(v, v) for v in ops[-1].operands]
    for res, final in zip(loop.results, current):
        red = next(u.owner.operation for u in res.uses)
        res.replace_all_uses_with(final)
        _across_lanes(red, subgroup)
    loop.erase()


def _paired(op: ir.Operation, key: int, values: dict, wide: dict, half: int, ip: ir.InsertionPoint) -> None:
    """A vec4 transfer of the first (`half` 0) or second copy of a pair: reads take their half of one 8-column
    read; the write of the second copy writes both halves (nothing in the kernel reads what it writes)."""
    operands = [values.get(v, v) for v in op.operands]
    with ip, op.location:
        if op.name == "vector.transfer_read":
            vt = ir.VectorType(op.results[0].type)
            if half == 0:
                seg = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
                idx, pad = operands[1:1 + seg[1]], operands[1 + seg[1]]
                wide[key] = vector.TransferReadOp(ir.VectorType.get([2 * WIDTH], vt.element_type), operands[0], idx,
                                                 op.attributes["permutation_map"], pad, [True]).result
            values[op.results[0]] = vector.ExtractStridedSliceOp(vt, wide[key], [half * WIDTH], [WIDTH], [1]).result
        elif half == 0:
            wide[key] = operands
        else:
            first = wide[key]
            both = vector.ShuffleOp(first[0], operands[0], list(range(2 * WIDTH))).result
            seg = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
            vector.TransferWriteOp(None, both, first[1], first[2:2 + seg[2]], op.attributes["permutation_map"], [True])


def _across_lanes(red: ir.Operation, subgroup: int) -> None:
    """Combine the lanes' `vector.reduction` results by a butterfly of xor shuffles (every lane gets the total)."""
    combine = _COMBINE[_kind(red)]
    uses = [(u.owner, u.operand_number) for u in red.results[0].uses]
    i32 = ir.IntegerType.get_signless(32)
    v = red.results[0]
    with ir.InsertionPoint.after(red), red.location:
        width = arith.ConstantOp(i32, subgroup).result  # the whole subgroup (the target environment's size)
        offset = subgroup // 2
        while offset:
            other = gpu.ShuffleOp(v, arith.ConstantOp(i32, offset).result, width, gpu.ShuffleMode.XOR).results[0]
            v = ir.Operation.create(combine, results=[v.type], operands=[v, other]).results[0]
            offset //= 2
    for owner, n in uses:
        owner.operands[n] = v


def _read_only(fn: ir.Operation) -> set:
    args = list(fn.regions[0].blocks[0].arguments)
    written = {w.operands[1] for w in find_ops(fn, _WRITES)}
    return {a for a in args if a not in written}


def _share_reads(fn: ir.Operation) -> None:
    """In the loop over the subgroup's rows: a read of an input already made is that value; what does not differ
    between rows (reads of inputs included) is computed once, before the loop."""
    rloop = next(iter(find_ops(fn, ("scf.for",), lambda op: "portable.subgroup_rows" in op.attributes)), None)
    if rloop is None:
        return
    del rloop.attributes["portable.subgroup_rows"]
    inputs = _read_only(fn)
    body = rloop.regions[0].blocks[0]
    _forward_scalars(fn, body)
    seen = {}
    for op in [o.operation for o in body.operations][:-1]:
        if op.name == "vector.transfer_read" and op.operands[0] in inputs:
            key = (str(op.results[0].type), str(op.attributes["permutation_map"])) + tuple(
                _key(v) for v in op.operands)
            if key in seen:
                op.results[0].replace_all_uses_with(seen[key])
                op.erase()
                continue
            seen[key] = op.results[0]
        if _hoistable(op, inputs) and not any(_inside(v, rloop) for v in op.operands):
            op.move_before(rloop)


def _forward_scalars(fn: ir.Operation, body: ir.Block) -> None:
    """Loads of private scalars (constant indices) in straight-line `body` take the value last stored or loaded
    there (the unrolled passes read a row's statistics once per group of columns)."""
    stores = find_ops(fn, _WRITES)
    known = {}
    for op in [o.operation for o in body.operations]:
        if op.name not in ("memref.load", "memref.store"):
            continue
        mem = op.operands[0] if op.name == "memref.load" else op.operands[1]
        idx = list(op.operands)[1:] if op.name == "memref.load" else list(op.operands)[2:]
        owner = mem.owner.operation if isinstance(mem, ir.OpResult) else None
        if owner is None or owner.name not in ("memref.alloc", "memref.alloca") or \
                any(constant_int(v) is None for v in idx) or \
                any(w.name != "memref.store" for w in stores if w.operands[1] == mem):
            continue
        key = (mem,) + tuple(constant_int(v) for v in idx)
        if op.name == "memref.store":
            known[key] = op.operands[0]
        elif key in known:
            op.results[0].replace_all_uses_with(known[key])
            op.erase()
        else:
            known[key] = op.results[0]


def _key(v: ir.Value):
    c = v.owner.operation if isinstance(v, ir.OpResult) else None
    return str(c.attributes["value"]) if c is not None and c.name == "arith.constant" else v


def _hoistable(op: ir.Operation, inputs: set) -> bool:
    if op.regions or len(op.results) != 1:
        return False
    if op.name in ("vector.transfer_read", "memref.load"):
        return op.operands[0] in inputs
    return op.name.startswith(("arith.", "math.")) or op.name in _HOIST
