"""Small helpers over the MLIR Python bindings shared by the compiler and the code generators."""

from __future__ import annotations

from collections.abc import Callable

from .mlir import ir


def scalar_types(root: ir.Operation) -> set[str]:
    """The scalar types ("f16", "bf16", "i16", "f64", ...) of every value nested in `root` (op results and block
    arguments), looking through memref, vector and tensor types to their elements."""
    found: set[str] = set()

    def add(t: ir.Type) -> None:
        while isinstance(t, ir.ShapedType):
            t = ir.ShapedType(t).element_type
        found.add(str(t))

    def visit(op):
        for r in op.results:
            add(r.type)
        for region in op.regions:
            for block in region.blocks:
                for a in block.arguments:
                    add(a.type)
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    return found


def find_ops(root: ir.Operation, names: set[str] | tuple[str, ...],
             where: Callable[[ir.Operation], bool] | None = None) -> list[ir.Operation]:
    """Every op nested in `root` named in `names` (and passing `where`), in walk order; collected first so
    callers may rewrite or erase them."""
    found = []

    def visit(op):
        if op.name in names and (where is None or where(op)):
            found.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    return found


def sized_kernels(module: ir.Module) -> list[ir.Operation]:
    """Every kernel (gpu.func) whose workgroup size is known (`known_block_size`)."""
    return [fn for fn in find_ops(module.operation, ("gpu.func",)) if "known_block_size" in fn.attributes]


def kernel_blocks(module: ir.Module) -> list[ir.Block]:
    """The body of every kernel (gpu.func) written with structured control flow only (a single block)."""
    return [fn.regions[0].blocks[0] for fn in find_ops(module.operation, ("gpu.func",))
            if len(fn.regions[0].blocks) == 1]


def clone_body(block: ir.Block, args: list[ir.Value]) -> list[ir.Value]:
    """Clone the ops of `block` (a region body ending in a yield) at the current insertion point with its
    arguments bound to `args`; returns the values it yields."""
    mapping = dict(zip(block.arguments, args))
    ops = list(block.operations)
    for op in ops[:-1]:
        clone_mapped(op.operation, mapping)
    return [mapping.get(v, v) for v in ops[-1].operands]


def clone_mapped(op: ir.Operation, mapping: dict, ip: ir.InsertionPoint | None = None) -> ir.Operation:
    """Clone `op` (at `ip`, default the current insertion point) reading `mapping`'s values in place of the ones
    it names, nested ops included; its results are added to `mapping`."""
    new = op.clone(ip) if ip is not None else op.clone()
    _remap(new, mapping)
    for old, res in zip(op.results, new.results):
        mapping[old] = res
    return new


def clone_at(body: ir.Block, at: list, mapping: dict) -> ir.Value:
    """A linalg body's value at loop position `at` (index values), its ops cloned at the current insertion point:
    its linalg.index ops read `at`, its ops read `mapping`'s values in place of the ones it names (the block
    arguments the caller supplies). Returns the value it yields."""
    ops = list(body.operations)
    for o in ops[:-1]:
        if o.name == "linalg.index":
            mapping[o.results[0]] = at[ir.IntegerAttr(o.attributes["dim"]).value]
        else:
            clone_mapped(o.operation, mapping)
    y = ops[-1].operands[0]
    return mapping.get(y, y)


def _remap(op: ir.Operation, mapping: dict) -> None:
    """Replace operands of `op` and of the ops nested in it that `mapping` names."""
    def visit(o):
        for i, v in enumerate(o.operands):
            if v in mapping:
                o.operands[i] = mapping[v]
        return ir.WalkResult.ADVANCE

    op.walk(visit)


VIEWS = ("memref.subview", "memref.cast", "memref.reinterpret_cast", "memref.expand_shape", "memref.collapse_shape",
         "memref.view")


def reassociation_attr(groups: list[list[int]]) -> ir.ArrayAttr:
    """A reshape's `reassociation` attribute from its groups of dims."""
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(i64, d) for d in g]) for g in groups])


def keep_groups(keep: list[bool]) -> list[list[int]]:
    """Reassociation of a collapse that keeps the dims marked in `keep`: each kept dim with the dropped (size-1)
    dims before it, dropped dims after the last kept one joining its group."""
    groups: list[list[int]] = []
    pending: list[int] = []
    for d, k in enumerate(keep):
        if k:
            groups.append(pending + [d])
            pending = []
        else:
            pending.append(d)
    if pending and groups:
        groups[-1].extend(pending)
    return groups


def unreshaped(v: ir.Value) -> ir.Value:
    """`v` before any tensor.expand_shape / collapse_shape ops."""
    while isinstance(v, ir.OpResult) and v.owner.operation.name in ("tensor.expand_shape", "tensor.collapse_shape"):
        v = v.owner.operation.operands[0]
    return v


def reassociation_groups(reshape: ir.Operation) -> list[list[int]]:
    """The groups of dims of a tensor.collapse_shape / expand_shape."""
    return [[int(ir.IntegerAttr(d).value) for d in ir.ArrayAttr(g)]
            for g in ir.ArrayAttr(reshape.attributes["reassociation"])]


def base_buffer(v: ir.Value) -> ir.Value:
    """The buffer a memref value views (through subviews, casts, reshapes)."""
    while isinstance(v, ir.OpResult) and v.owner.operation.name in VIEWS:
        v = v.owner.operation.operands[0]
    return v


def grouped_memref(t: ir.MemRefType, lanes: int, element: ir.Type) -> ir.MemRefType | None:
    """`t` with every `lanes` innermost elements grouped into one `element` (a wider buffer element), its layout
    counted in those: identity stays identity, a static strided view (a slice of a wider buffer) keeps its offset
    and outer strides divided by `lanes`. None where they are not multiples of it (the caller then leaves the
    buffer as it is)."""
    shape = list(t.shape[:-1]) + [t.shape[-1] // lanes]
    layout = t.layout
    if isinstance(layout, ir.AffineMapAttr) and ir.AffineMapAttr(layout).value == ir.AffineMap.get_identity(t.rank):
        return ir.MemRefType.get(shape, element, memory_space=t.memory_space)
    strides, offset = t.get_strides_and_offset()
    if any(t.is_dynamic_stride_or_offset(v) for v in strides + [offset]) or strides[-1] != 1 or offset % lanes \
            or any(v % lanes for v in strides[:-1]):
        return None
    layout = ir.Attribute.parse(f"strided<[{', '.join(str(v // lanes) for v in strides[:-1] + [lanes])}], "
                                f"offset: {offset // lanes}>")
    return ir.MemRefType.get(shape, element, layout=layout, memory_space=t.memory_space)


def as_operation(owner) -> ir.Operation:
    """A use's owner as an ir.Operation (the bindings give an OpView for registered ops)."""
    return owner.operation if hasattr(owner, "operation") else owner


def pop_marked(root: ir.Operation, name: str, attr: str) -> list[ir.Operation]:
    """Ops named `name` under `root` that carry the unit attribute `attr` (a mark left by the transform script),
    with the mark removed."""
    found = find_ops(root, (name,), lambda op: attr in op.attributes)
    for op in found:
        del op.attributes[attr]
    return found


def bf16_bits(attr: ir.Attribute) -> list[int]:
    """Bit patterns of the elements of a bf16 dense attribute, read from its printed form (these Python bindings
    cannot read bf16 elements): `dense<[[1.0, 0x7F80], ...]>`; decimals are rounded to bf16 (ties to even)."""
    import struct

    text = str(attr)
    body = text[text.index("<") + 1:text.rindex(">", 0, text.rindex(":"))]
    if body.startswith('"'):  # the whole payload as one hex string (little-endian u16 per element)
        raw = bytes.fromhex(body.strip('"')[2:])
        return list(struct.unpack(f"<{len(raw) // 2}H", raw))
    bits = []
    for item in body.replace("[", "").replace("]", "").split(","):
        item = item.strip()
        if item.lower().startswith("0x"):
            bits.append(int(item, 16) & 0xFFFF)
            continue
        u = struct.unpack("<I", struct.pack("<f", float(item)))[0]
        bits.append(0x7FC0 if item.lower() == "nan" else ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF)
    return bits


def constant_int(v: ir.Value) -> int | None:
    """The value of an integer arith.constant, else None."""
    if isinstance(v, ir.OpResult) and v.owner.operation.name == "arith.constant":
        attr = v.owner.operation.attributes["value"]
        if isinstance(attr, ir.IntegerAttr):
            return attr.value
    return None


def multiple_of(v: ir.Value, n: int, depth: int = 0) -> bool:
    """Whether index `v` is provably a multiple of n (constants, products, sums, min/max and selects of multiples,
    shifts, index casts, loop ivs whose start and step are)."""
    if depth > 24:
        return False
    c = constant_int(v)
    if c is not None:
        return c % n == 0
    if isinstance(v, ir.BlockArgument):
        owner = v.owner.owner  # the op holding the block
        if owner is not None and owner.name == "scf.for" and v.arg_number == 0:
            return multiple_of(owner.operands[0], n, depth + 1) and multiple_of(owner.operands[2], n, depth + 1)
        return False
    op = v.owner.operation
    a = list(op.operands)
    if op.name == "arith.muli":
        return multiple_of(a[0], n, depth + 1) or multiple_of(a[1], n, depth + 1)
    if op.name in ("arith.addi", "arith.subi", "arith.minsi", "arith.minui", "arith.maxsi", "arith.maxui"):
        return multiple_of(a[0], n, depth + 1) and multiple_of(a[1], n, depth + 1)
    if op.name == "arith.select":
        return multiple_of(a[1], n, depth + 1) and multiple_of(a[2], n, depth + 1)
    if op.name == "arith.shli":
        s = constant_int(a[1])
        return s is not None and (1 << s) % n == 0 or multiple_of(a[0], n, depth + 1)
    if op.name in ("arith.index_cast", "arith.index_castui"):
        return multiple_of(a[0], n, depth + 1)
    if op.name == "vector.extract" and len(a) == 1:  # a lane at a static position of an index vector
        pos = list(ir.DenseI64ArrayAttr(op.attributes["static_position"]))
        return len(pos) == 1 and _lane_multiple(a[0], pos[0], n, depth + 1)
    return False


def _lane_multiple(v: ir.Value, lane: int, n: int, depth: int) -> bool:
    """Whether lane `lane` of 1-d index vector `v` is provably a multiple of n (broadcasts, vector.step, sums)."""
    if depth > 24 or not isinstance(v, ir.OpResult):
        return False
    op = v.owner.operation
    a = list(op.operands)
    if op.name == "vector.broadcast":
        return multiple_of(a[0], n, depth + 1)
    if op.name == "vector.step":
        return lane % n == 0
    if op.name in ("arith.addi", "arith.subi"):
        return _lane_multiple(a[0], lane, n, depth + 1) and _lane_multiple(a[1], lane, n, depth + 1)
    if op.name == "arith.muli":
        return _lane_multiple(a[0], lane, n, depth + 1) or _lane_multiple(a[1], lane, n, depth + 1)
    return False


def nested_ops(op: ir.Operation) -> list[ir.Operation]:
    """Every op nested in `op`, parents before their bodies; collected first, so that they can be replaced."""
    found = []

    def visit(o):
        found.append(o.operation)
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found[1:]  # not op itself


def retype_function(func_op: ir.Operation, ops: list[ir.Operation],
                    convert: Callable[[ir.Type], ir.Type | None]) -> tuple[list, list]:
    """`func_op`'s signature and the block arguments of it and of `ops` with `convert(t)` wherever that gives a
    type; returns the converted input and result types (None where a type stayed)."""
    ftype = ir.FunctionType(ir.TypeAttr(func_op.attributes["function_type"]).value)
    ins = [convert(t) for t in ftype.inputs]
    outs = [convert(t) for t in ftype.results]
    func_op.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
        [n or t for n, t in zip(ins, ftype.inputs)], [n or t for n, t in zip(outs, ftype.results)]))
    for holder in [func_op] + ops:
        for region in holder.regions:
            for block in region.blocks:
                for arg in block.arguments:
                    t = convert(arg.type)
                    if t is not None:
                        arg.set_type(t)
    return ins, outs


def with_element(t: ir.Type, old: ir.Type, new: ir.Type) -> ir.Type | None:
    """`t` with element type `old` replaced by `new` (a scalar, a vector or a memref of either), None if `t`
    holds no `old`."""
    if t == old:
        return new
    if isinstance(t, ir.VectorType) and t.element_type == old:
        return ir.VectorType.get(list(t.shape), new)
    if isinstance(t, ir.MemRefType) and t.element_type == old:
        return ir.MemRefType.get(list(t.shape), new, t.layout, t.memory_space)
    return None


def marked_launches(module: ir.Module, attr: str) -> list[tuple[ir.Operation, int]]:
    """The gpu.launch ops a transform script marked with integer attribute `attr`, with its value (removed)."""
    found = []
    for launch in find_ops(module.operation, ("gpu.launch",), lambda o: attr in o.attributes):
        found.append((launch, ir.IntegerAttr(launch.attributes[attr]).value))
        del launch.attributes[attr]
    return found


def launch_grid(launch: ir.Operation) -> tuple[int, list[int | None]]:
    """(index of the grid's first operand, the grid's three sizes where constant) of a gpu.launch."""
    first = list(ir.DenseI32ArrayAttr(launch.attributes["operandSegmentSizes"]))[0]  # after async deps
    return first, [constant_int(v) for v in list(launch.operands)[first:first + 3]]


def memory_space(v: ir.Value | ir.Type) -> str | None:
    """'workgroup', 'private' or 'global' for a memref value or type in one of those address spaces (the gpu
    dialect's attribute or SPIR-V's storage class, read as attributes, not as text); None otherwise."""
    t = v.type if isinstance(v, ir.Value) else v
    if not isinstance(t, ir.MemRefType):
        try:
            t = ir.MemRefType(t)
        except (ValueError, TypeError):
            return None
    space = t.memory_space
    if space is None:
        return None
    for name, spellings in _SPACES.items():
        if any(space == ir.Attribute.parse(s) for s in spellings):
            return name
    return None


_SPACES = {"workgroup": ("#gpu.address_space<workgroup>", "#spirv.storage_class<Workgroup>"),
           "private": ("#gpu.address_space<private>",), "global": ("#gpu.address_space<global>",)}


def all_in_bounds(op: ir.Operation) -> bool:
    """Whether a vector transfer's `in_bounds` marks every dim in bounds."""
    return all(ir.BoolAttr(a).value for a in ir.ArrayAttr(op.attributes["in_bounds"]))
