"""Facts about linalg ops read from the IR: loop ranges, iterator kinds, what each op is."""

from __future__ import annotations

from dataclasses import dataclass

from .mlir import ir

# Attributes the rewrites put on the generics they build, read back when classifying them.
VECTOR_GATHER = "portable.vector_gather"
WINDOW = "portable.window"  # a small window reduction unrolled into a gather (windows.py)


def is_structured(op: ir.Operation) -> bool:
    """A linalg op that carries loops (after generalization every such op is linalg.generic)."""
    return op.name == "linalg.generic"


def iterator_types(op: ir.Operation) -> list[str]:
    """'parallel' / 'reduction' per loop."""
    out = []
    for a in ir.ArrayAttr(op.attributes["iterator_types"]):
        s = str(a)  # '#linalg.iterator_type<parallel>'
        out.append("parallel" if "parallel" in s else "reduction")
    return out


def indexing_maps(op: ir.Operation) -> list[ir.AffineMap]:
    return [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]


def num_inputs(op: ir.Operation) -> int:
    seg = ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])
    return int(seg[0])


def static_shape(value: ir.Value) -> list[int] | None:
    t = value.type
    if isinstance(t, ir.RankedTensorType):
        st = ir.RankedTensorType(t)
    elif isinstance(t, ir.MemRefType):
        st = ir.MemRefType(t)
    else:
        return []  # scalar
    if not st.has_static_shape:
        return None
    return list(st.shape)


def loop_ranges(op: ir.Operation) -> list[int] | None:
    """Static trip count per loop, read from operand shapes through the indexing maps."""
    maps = indexing_maps(op)
    n = maps[0].n_dims
    ranges: list[int | None] = [None] * n
    for value, amap in zip(op.operands, maps):
        shape = static_shape(value)
        if shape is None:
            return None
        for pos, expr in enumerate(amap.results):
            if isinstance(expr, ir.AffineDimExpr) and pos < len(shape):
                ranges[ir.AffineDimExpr(expr).position] = shape[pos]
    if any(r is None for r in ranges):
        return None
    return [int(r) for r in ranges]


def is_identity(amap: ir.AffineMap) -> bool:
    return amap.n_symbols == 0 and amap == ir.AffineMap.get_identity(amap.n_dims)


def loop_dims(amap: ir.AffineMap) -> list[int] | None:
    """The loop dim of each result of `amap` when every result is a plain loop dim; None otherwise (a constant
    index, an expression)."""
    if not all(isinstance(e, ir.AffineDimExpr) for e in amap.results):
        return None
    return [ir.AffineDimExpr(e).position for e in amap.results]


def dims_in_order(amap: ir.AffineMap) -> list[int] | None:
    """The loop dims `amap` reads when its results are distinct loop dims in increasing order (an operand read
    along the loops, broadcast over the others); None otherwise (a transposed read, a constant index)."""
    dims = loop_dims(amap)
    return dims if dims is not None and dims == sorted(set(dims)) else None


@dataclass(frozen=True)
class OpKind:
    """What the strategy needs to know: 'fill', 'elementwise', 'matmul', 'reduction', 'conv', 'generic'."""

    kind: str
    ranges: tuple[int, ...]
    iterators: tuple[str, ...]
    gathers: bool = False  # the body reads other tensors with tensor.extract (no vectorization for these)
    # Matmuls: the second input is read along the output's innermost loop, (k, n) rather than (n, k).
    contiguous_b: bool = False
    # Convolutions: the input is read along the output's innermost dim, with unit strides and dilations (each input
    # index a loop or a sum of two): "channels" (NHWC depthwise: channels stay channels) or "columns" (NCHW: the
    # output's columns shifted by the column tap); "" otherwise.
    channelwise: str = ""
    # A gather marked for vector loads (VECTOR_GATHER): "contiguous" or "lanes" ("" unmarked).
    vector_gather: str = ""
    window: bool = False  # a window reduction unrolled into a gather (windows.py)
    # One reduction loop, read contiguously: every input that it indexes has it as its innermost dim (a row
    # reduction; not split_k's sum over slices, whose threads read apart along the slices).
    contiguous_reduction: bool = False
    results: int = 1  # a reduction with several (ArgMax: the largest value and its index) combines them together


def body_op_names(op: ir.Operation) -> list[str]:
    return [o.name for o in op.regions[0].blocks[0].operations]


_WIDENING = {"arith.extf", "arith.extsi", "arith.extui", "arith.sitofp", "arith.uitofp"}


def _unit_window(e: ir.AffineExpr) -> bool:
    """A loop index, or the sum of two (an output position plus a tap, stride and dilation 1)."""
    if isinstance(e, ir.AffineDimExpr):
        return True
    if isinstance(e, ir.AffineAddExpr):
        add = ir.AffineAddExpr(e)
        return isinstance(add.lhs, ir.AffineDimExpr) and isinstance(add.rhs, ir.AffineDimExpr)
    return False


def _along(e: ir.AffineExpr | None, d: int) -> str:
    """How input index `e` walks with loop `d` at unit stride: "channels" (`d` itself) or "columns" (`d` plus a
    tap); "" otherwise."""
    if isinstance(e, ir.AffineDimExpr):
        return "channels" if ir.AffineDimExpr(e).position == d else ""
    if isinstance(e, ir.AffineAddExpr):
        add = ir.AffineAddExpr(e)
        if any(isinstance(x, ir.AffineDimExpr) and ir.AffineDimExpr(x).position == d for x in (add.lhs, add.rhs)):
            return "columns"
    return ""


def classify(op: ir.Operation) -> OpKind:
    its = iterator_types(op)
    ranges = loop_ranges(op) or []
    nin = num_inputs(op)
    ins = list(op.operands)[:nin]
    all_par = all(i == "parallel" for i in its)
    if all_par and all(not isinstance(v.type, ir.ShapedType) for v in ins) and body_op_names(op) == ["linalg.yield"]:
        kind = "fill"
    elif all_par:
        kind = "elementwise"
    else:
        body = body_op_names(op)
        has_mul = any(n in ("arith.mulf", "arith.muli") for n in body)
        maps = indexing_maps(op)
        # A window's reads (d1 + d4); a constant 0 (a unit dim, such as a mask's) is no window.
        non_dim = any(not isinstance(e, (ir.AffineDimExpr, ir.AffineConstantExpr)) for m in maps for e in m.results)
        if has_mul and nin == 2 and non_dim:
            kind = "conv"
        elif has_mul and nin == 2 and its.count("reduction") == 1 and \
                len([n for n in body if n not in _WIDENING]) <= 3 and \
                all(isinstance(e, ir.AffineDimExpr) for e in maps[-1].results):
            # mul + add + yield, with operand widening (f16 in, f32 accumulate) allowed. An output written at a
            # constant index (a ReduceSum with keepdims over a product) is no matrix: its register tiles would
            # be rows of a unit dim, which the row accumulators cannot hold (lavapipe failed to compile
            # MobileViTv2's attention context).
            kind = "matmul"
        else:
            kind = "reduction"
    contiguous_b = False
    if kind == "matmul":
        maps = indexing_maps(op)
        b_last, o_last = (m.results[-1] if len(m.results) else None for m in (maps[1], maps[-1]))
        contiguous_b = isinstance(b_last, ir.AffineDimExpr) and isinstance(o_last, ir.AffineDimExpr) and \
            ir.AffineDimExpr(b_last).position == ir.AffineDimExpr(o_last).position
    channelwise = ""
    if kind == "conv":
        maps = indexing_maps(op)
        x_last, o_last = (m.results[-1] if len(m.results) else None for m in (maps[0], maps[-1]))
        if isinstance(o_last, ir.AffineDimExpr) and all(_unit_window(e) for e in maps[0].results):
            channelwise = _along(x_last, ir.AffineDimExpr(o_last).position)
    vg = ir.StringAttr(op.attributes[VECTOR_GATHER]).value if VECTOR_GATHER in op.attributes else ""
    return OpKind(kind, tuple(ranges), tuple(its), "tensor.extract" in body_op_names(op), contiguous_b, channelwise,
                  vg, WINDOW in op.attributes, _contiguous_reduction(op, its), len(op.results))


def _contiguous_reduction(op: ir.Operation, its: list[str]) -> bool:
    if its.count("reduction") != 1:
        return False
    red = its.index("reduction")
    for value, amap in zip(list(op.operands)[:num_inputs(op)], indexing_maps(op)):
        if not isinstance(value.type, ir.ShapedType):
            continue
        dims = [ir.AffineDimExpr(e).position if isinstance(e, ir.AffineDimExpr) else None for e in amap.results]
        if red in dims and dims[-1] != red:
            return False
    return True


def fill_value(v: ir.Value) -> ir.Value | None:
    """The scalar a fill generic writes into `v` (v its result), usable outside the fill: a value defined above
    it, or the scalar operand it yields; None when `v` is not a fill's result."""
    p = v.owner.operation if isinstance(v, ir.OpResult) else None
    if p is None or p.name != "linalg.generic" or classify(p).kind != "fill":
        return None
    block = p.regions[0].blocks[0]
    value = list(block.operations)[-1].operands[0]
    if isinstance(value, ir.BlockArgument) and value.owner == block:
        return p.operands[value.arg_number] if value.arg_number < num_inputs(p) else None
    return value
