"""Walks a lowered gpu.func body and prints one C statement per op.

Naming: every SSA value gets a C name when it is defined (`v12` for op results, `i3` for loop induction
variables, `a0`/`p0` for buffer/scalar kernel arguments, `lm0`/`pm0` for local/private arrays); values are
keyed by `ir.Value`, which compares and hashes by the underlying MLIR value. Scalar constants are not
declared: their literal is used at each use, so addresses read `a0[v32 * 31 + i5]`.

A value lives in one C variable, or, for an N-D vector (nd_vectors.py), in one C vector per innermost row
(`rows`); scf ops (control.py) carry either kind. Ops that only rename a value (shape_cast, extracting a
whole row) print nothing.

f16 without cl_khr_fp16 (fp16=False): f16 values are C floats, and every f16 result of an op that could be
inexact is rounded to f16 precision. bf16 (always: OpenCL C has no bf16 type): values are C floats too; a bf16
result of an op that computes in f32 gets two variables, its wide float (`wide`, read by the next such op) and
that rounded to bf16 (read by every other op), see bf16.py. Buffers hold the 16-bit encodings (storage.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ..errors import CompileError, UnsupportedOp
from ..ir.bounds import Bounds
from ..ir.mlir import ir
from ..ir.util import multiple_of
from . import bf16, control, helpers, matrix, storage, transfer, vector_ops
from . import nd_vectors as nd
from . import ops as arith_math
from . import types as T
from .storage import Mem

_EXPRESSIONS = {**arith_math.HANDLERS, **vector_ops.HANDLERS}
_ID_FUNCS = {"gpu.thread_id": "get_local_id", "gpu.block_id": "get_group_id", "gpu.block_dim": "get_local_size",
             "gpu.grid_dim": "get_num_groups", "gpu.global_id": "get_global_id"}
_SUBGROUP_FUNCS = {"gpu.lane_id": "get_sub_group_local_id", "gpu.subgroup_id": "get_sub_group_id",
                   "gpu.num_subgroups": "get_num_sub_groups", "gpu.subgroup_size": "get_sub_group_size"}
_MAX_PRIVATE_ELEMENTS = 1 << 14  # a private array larger than this is a lowering bug, not a kernel
_IGNORED = {"memref.dealloc", "memref.assume_alignment"}  # no meaning for C arrays and pointers


# Ops whose f16 result is exactly an f16 value when their operands are: no rounding needed when fp16=False.
_EXACT_F16 = {"arith.constant", "ub.poison", "arith.select", "arith.negf", "math.absf", "math.copysign",
              "arith.maximumf", "arith.minimumf", "arith.maxnumf", "arith.minnumf", "math.floor", "math.ceil",
              "math.trunc", "math.round", "math.roundeven", "vector.broadcast", "vector.splat", "vector.extract",
              "vector.insert", "vector.shuffle", "vector.from_elements", "vector.shape_cast"}


def op_text(op) -> str:
    """First line of an op's assembly, for error messages."""
    return op.operation.get_asm(large_elements_limit=4).strip().splitlines()[0]


def memory_space(t: ir.MemRefType) -> str:
    """'global', 'workgroup' or 'private' from a memref's memory space attribute."""
    space = t.memory_space
    if space is None:
        return "global"
    text = str(space)
    for name in ("global", "workgroup", "private"):
        if text == f"#gpu.address_space<{name}>":
            return name
    raise UnsupportedOp(f"memref memory space {text}")


def row_major(shape: list[int]) -> tuple[int, ...]:
    strides, s = [], 1
    for d in reversed(shape):
        strides.append(s)
        s *= d
    return tuple(reversed(strides))


def _is_identity(t: ir.MemRefType) -> bool:
    layout = t.layout
    if isinstance(layout, ir.AffineMapAttr):
        amap = layout.value
        return amap == ir.AffineMap.get_identity(amap.n_dims)
    return False


class Emitter:
    """Prints the body of one kernel; `lines` holds the statements, `helpers`/`extensions` what they need."""

    def __init__(self, bounds: Bounds, fp16: bool = True, asm: str | None = None):
        self.bounds = bounds
        self.asm = asm  # the inline assembly this device's OpenCL C takes ("ptx"), None: none
        self.half = "half" if fp16 else "float"  # C type of f16 values
        self.names: dict[ir.Value, str] = {}
        self.consts: dict[ir.Value, int] = {}
        self.mems: dict[ir.Value, Mem] = {}
        self.rows: dict[ir.Value, list[str]] = {}  # N-D vector value -> one C vector per innermost row
        self.wide: dict[ir.Value, list[str]] = {}  # bf16 result of an f32-computing op -> its unrounded slots
        self.wide_operands = False  # while emitting an op that computes bf16 in f32: read the wide slots
        self.var_types: dict[str, str] = {}  # C variable -> its C type, for aliasing pure renames
        self.lines: list[str] = []
        self.helpers: dict[str, str] = {}
        self.extensions: set[str] = set()
        self.depth = 1
        self._counters: dict[str, int] = {}

    # -- naming and output ------------------------------------------------------------------------------
    def fresh(self, prefix: str = "v") -> str:
        n = self._counters.get(prefix, 0)
        self._counters[prefix] = n + 1
        return f"{prefix}{n}"

    def val(self, v: ir.Value) -> str:
        if isinstance(v, nd.RowValue):
            return v.expr
        if self.wide_operands and v in self.wide:
            return self.wide[v][0]
        try:
            return self.names[v]
        except KeyError:
            raise CompileError(f"OpenCL codegen: value used before its definition: {v}",
                               stage="codegen_opencl") from None

    def slots(self, v: ir.Value) -> list[str]:
        """The C variables/expressions holding v: one, or one per row of an N-D vector."""
        if self.wide_operands and v in self.wide:
            return self.wide[v]
        return self.rows[v] if nd.is_multi(v.type) else [self.val(v)]

    def bind(self, v: ir.Value, slots: list[str]) -> None:
        if nd.is_multi(v.type):
            self.rows[v] = slots
        else:
            self.names[v] = slots[0]

    def slot_type(self, t: ir.Type) -> str:
        """C type of one slot of a value of type t."""
        return self.ct(nd.row_type(t) if nd.is_multi(t) else t)

    def ct(self, t: ir.Type, unsigned: bool = False) -> str:
        if matrix.is_fragment(t):
            return matrix.c_type(self, t)
        ext = T.extension_of(t, self.half)
        if ext:
            self.extensions.add(ext)
        return T.c_type(t, unsigned, self.half)

    def helper(self, name: str, definition: str) -> str:
        self.helpers.setdefault(name, definition)
        return name

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def declare(self, ct: str, expr: str) -> str:
        """A new C variable of type ct holding expr; expr itself when it is a variable of that type."""
        if self.var_types.get(expr) == ct:  # a pure rename (shape_cast, one-lane extract, ...): no copy
            return expr
        name = self.fresh()
        self.line(f"{ct} {name} = {expr};")
        self.var_types[name] = ct
        return name

    def define(self, value: ir.Value, expr: str) -> str:
        name = self.declare(self.ct(value.type), expr)
        self.names[value] = name
        return name

    def rounded(self, op_name: str, t: ir.Type, expr: str) -> str:
        """expr, rounded to f16 precision when t is f16 computed as float and op_name may be inexact."""
        if self.half == "float" and T.is_f16(t) and op_name not in _EXACT_F16:
            return f"{helpers.round_f16(self, t)}({expr})"
        return expr

    def computed(self, op_name: str, t: ir.Type, expr: str) -> tuple[str, str | None]:
        """Declares the value of expr, an op's result (one slot) of type t: (variable, wide variable or None).
        A bf16 result of an op computing in f32 is declared as computed (wide) and rounded to bf16."""
        if not (self.wide_operands and T.is_bf16(t)):
            return self.declare(self.ct(t), self.rounded(op_name, t, expr)), None
        wide = self.declare(self.ct(t), expr)
        return self.declare(self.ct(t), bf16.rounded(self, T.width(t), wide)), wide

    # -- walking ---------------------------------------------------------------------------------------
    def emit_body(self, block: ir.Block) -> None:
        self.emit_block(block, {"gpu.return": lambda op: None})

    def emit_block(self, block: ir.Block, terminators: dict[str, Callable]) -> None:
        for op in block.operations:
            name = op.operation.name
            if name in terminators:
                terminators[name](op)
            else:
                self.emit_op(op)

    def emit_op(self, op) -> None:
        name = op.operation.name
        outer, self.wide_operands = self.wide_operands, bf16.computes_in_f32(op)
        try:
            if name in _STATEMENTS:
                _STATEMENTS[name](self, op)
            elif nd.involves(op):
                nd.emit(self, op, _EXPRESSIONS)
            elif name in _EXPRESSIONS:
                if len(op.results) != 1:
                    raise UnsupportedOp(f"{name} with {len(op.results)} results")
                self._expression(op, _EXPRESSIONS[name](self, op))
            elif name not in _IGNORED:
                raise UnsupportedOp(f"the OpenCL C code generator does not handle `{name}`")
        except UnsupportedOp as e:
            if getattr(e, "op_annotated", False):
                raise
            err = UnsupportedOp(f"{e}\n    at: {op_text(op)}")
            err.op_annotated = True
            raise err from None
        finally:
            self.wide_operands = outer

    def _expression(self, op, expr: str) -> None:
        result = op.results[0]
        if op.operation.name in ("arith.constant", "ub.poison") and T.width(result.type) == 0:
            self.ct(result.type)
            self.names[result] = expr  # scalar constants are used as literals
            attr = op.attributes.get("value", None)
            if isinstance(attr, ir.IntegerAttr) and not T.is_i1(result.type):
                self.consts[result] = attr.value
        else:
            self.names[result], wide = self.computed(op.operation.name, result.type, expr)
            if wide is not None:
                self.wide[result] = [wide]

    def assign(self, targets: list[list[str]], values) -> None:
        """Parallel assignment of `values` to the C variables `targets` (slots per value: scf.yield, scf.condition).

        A target is written only once no pending assignment still reads it; a cycle (a swap) is broken by
        saving one target in a temporary.
        """
        pending = []
        for slots, v in zip(targets, values, strict=True):
            ct = self.slot_type(v.type)
            pending += [[t, s, ct] for t, s in zip(slots, self.slots(v), strict=True) if t != s]
        while pending:
            for k, (t, s, _) in enumerate(pending):
                if not any(other[1] == t for j, other in enumerate(pending) if j != k):
                    self.line(f"{t} = {s};")
                    del pending[k]
                    break
            else:  # every target is still read: save the first one
                t, _, ct = pending[0]
                tmp = self.fresh("t")
                self.line(f"{ct} {tmp} = {t};")
                for p in pending:
                    if p[1] == t:
                        p[1] = tmp

    # -- memory ---------------------------------------------------------------------------------------
    def address(self, memref: ir.Value, indices, extra: int = 0) -> tuple[Mem, str]:
        """The memref's Mem and the C expression of the linear element offset of `indices` (plus `extra`)."""
        mem = self.mems.get(memref)
        if mem is None:
            raise UnsupportedOp("memref is not a kernel argument, attribution or alloc (views are not handled)")
        const, terms = mem.offset + extra, []
        for idx, stride in zip(indices, mem.strides, strict=True):
            if idx in self.consts:
                const += self.consts[idx] * stride
            elif stride:
                name = self.val(idx)
                terms.append(name if stride == 1 else f"{name} * {stride}")
        if const or not terms:
            terms.append(str(const) if const >= 0 else f"({const})")
        return mem, " + ".join(terms)

    def declare_array(self, value: ir.Value, t: ir.MemRefType, space: str, shape: list[int]) -> None:
        if not _is_identity(t):
            raise UnsupportedOp(f"{t}: only identity layouts for local/private arrays")
        size = 1
        for d in shape:
            size *= d
        if space == "private" and size > _MAX_PRIVATE_ELEMENTS:
            raise UnsupportedOp(f"private array of {size} elements ({t}) is too large for registers")
        qual, prefix = ("__local ", "lm") if space == "workgroup" else ("", "pm")
        name = self.fresh(prefix)
        element = "uchar" if T.is_i1(t.element_type) else self.ct(t.element_type)
        # 16-byte aligned, so vload4/vstore4 at indices the compiler sees are multiples of 4 become 128-bit
        # accesses (workgroup tiles of compiler/schedule/promotion.py); 32 where matrix fragments are loaded
        # (wmma.load).
        encoding, align = "", 16
        if space == "workgroup" and matrix.reads_fragments(value):
            align = 32
            if T.is_f16(t.element_type) and self.half == "float":
                element, encoding = "ushort", "bits16"  # fragments load raw f16 (storage.py)
        align = f" __attribute__((aligned({align})))" if space == "workgroup" else ""
        self.line(f"{qual}{element} {name}[{max(size, 1)}]{align};")
        self.mems[value] = Mem(name, t.element_type, row_major(shape), encoding=encoding, space=space)

    def aligned_vector(self, memref: ir.Value, indices, n: int, t: ir.Type, extra: int = 0) -> str | None:
        """The C vector type of an n-lane access of element type `t` at `indices` (+ `extra`) of a global buffer,
        when its address is provably a multiple of the vector's size, else None. vloadN / vstoreN only assume
        the element's alignment: NVIDIA's compiler then splits them into scalar accesses (an add of 64 Mi
        floats: 78% of HBM bandwidth with vload4, 89% through a float4 pointer; H200, OpenCL profiling events).
        Buffers start aligned to CL_DEVICE_MEM_BASE_ADDR_ALIGN (at least 128 bytes), sub-buffers too."""
        mem = self.mems.get(memref)
        if mem is None or mem.space != "global" or mem.encoding or T.is_i1(mem.element) or n not in (2, 4, 8, 16):
            return None
        if (mem.offset + extra) % n:
            return None
        for idx, stride in zip(indices, mem.strides, strict=True):
            if idx in self.consts:
                if self.consts[idx] * stride % n:
                    return None
            elif stride % n and not multiple_of(idx, n // math.gcd(stride, n)):
                return None
        return f"{self.ct(t)}{n}"


# -- statement handlers ---------------------------------------------------------------------------------
def _load(em: Emitter, op) -> None:
    mem, idx = em.address(op.operands[0], op.operands[1:])
    em.define(op.results[0], storage.load(mem, idx))


def _store(em: Emitter, op) -> None:
    mem, idx = em.address(op.operands[1], op.operands[2:])
    em.line(storage.store(mem, idx, em.val(op.operands[0])))


def _vector_access(em: Emitter, memref, indices, vt: ir.Type) -> tuple[int, Mem, str]:
    mem, idx = em.address(memref, indices)
    n = T.width(vt)
    if n and mem.strides and mem.strides[-1] != 1:
        raise UnsupportedOp("vector access to non-contiguous memory")
    return n, mem, idx


def _vector_load(em: Emitter, op) -> None:
    vt = op.results[0].type
    if nd.is_multi(vt):
        em.bind(op.results[0], [em.declare(em.slot_type(vt), storage.vload(mem, n, idx))
                                for n, mem, idx in _wide_access(em, op.operands[0], op.operands[1:], vt)])
        return
    n, mem, idx = _vector_access(em, op.operands[0], op.operands[1:], vt)
    aligned = em.aligned_vector(op.operands[0], op.operands[1:], n, vt.element_type) if n else None
    em.define(op.results[0], storage.vload(mem, n, idx, aligned) if n else storage.load(mem, idx))


def _vector_store(em: Emitter, op) -> None:
    vt = op.operands[0].type
    if nd.is_multi(vt):
        for x, (n, mem, idx) in zip(em.slots(op.operands[0]), _wide_access(em, op.operands[1], op.operands[2:], vt),
                                    strict=True):
            em.line(storage.vstore(mem, n, idx, x))
        return
    n, mem, idx = _vector_access(em, op.operands[1], op.operands[2:], vt)
    x = em.val(op.operands[0])
    aligned = em.aligned_vector(op.operands[1], op.operands[2:], n, vt.element_type) if n else None
    streaming = "nontemporal" in op.attributes and ir.BoolAttr(op.attributes["nontemporal"]).value
    em.line(storage.vstore(mem, n, idx, x, aligned, streaming) if n else storage.store(mem, idx, x))


def _vector_gather(em: Emitter, op) -> None:
    """vector.gather of a 1-D vector: lane i reads the element at the base position plus index lane i (an offset
    in the contiguous buffer), where its mask lane is set, else the pass-through lane."""
    base, rt = op.operands[0], op.results[0].type
    rank = base.type.rank
    index_vec, mask, passthru = op.operands[1 + rank:4 + rank]
    if nd.is_multi(rt) or T.width(rt) == 0:
        raise UnsupportedOp(f"vector.gather into {rt}")
    mem, idx = em.address(base, op.operands[1:1 + rank])
    if mem.strides and mem.strides[-1] != 1:
        raise UnsupportedOp("vector.gather from non-contiguous memory")
    lanes = []
    for i, m, p in zip(nd.lanes_of(em, index_vec), nd.lanes_of(em, mask), nd.lanes_of(em, passthru), strict=True):
        x = storage.load(mem, f"{idx} + {i}")
        lanes.append(x if m == "-1" else f"({m} ? {x} : {p})")
    em.define(op.results[0], f"({em.ct(rt)})({', '.join(lanes)})")


def _wide_access(em: Emitter, memref, indices, vt: ir.Type) -> list[tuple[int, Mem, str]]:
    """A contiguous 1-D load/store wider than a C vector (vector<32xf32>): one access per slot of nd_vectors."""
    if len([d for d in vt.shape if d != 1]) != 1:
        raise UnsupportedOp(f"vector.load/store of the N-D vector {vt}")
    n = T.lanes(nd.row_type(vt))
    out = []
    for k in range(0, T.lanes(vt), n):
        mem, idx = em.address(memref, indices, k)
        if mem.strides and mem.strides[-1] != 1:
            raise UnsupportedOp("vector access to non-contiguous memory")
        out.append((n, mem, idx))
    return out


def _alloc(em: Emitter, op) -> None:
    t = op.results[0].type
    space = memory_space(t)
    if space == "global":
        space = "private"  # an alloc inside a kernel is per thread
    if space == "workgroup" and op.operation.parent.name != "gpu.func":
        raise UnsupportedOp("workgroup alloc outside the kernel's top-level block")
    shape, dynamic = [], iter(op.operands)
    for d in t.shape:
        if d == ir.ShapedType.get_dynamic_size():
            size = next(dynamic)
            bound = em.bounds.upper(size)
            if bound is None:
                raise UnsupportedOp(f"dynamic size {em.val(size)} of {t} has no known upper bound")
            d = max(bound, 0)
        shape.append(d)
    em.declare_array(op.results[0], t, space, shape)


def _gpu_id(em: Emitter, op) -> None:
    name = op.operation.name
    if name in _SUBGROUP_FUNCS:
        em.extensions.add("cl_khr_subgroups")
        em.define(op.results[0], f"(int){_SUBGROUP_FUNCS[name]}()")
        return
    dim = "xyz".index(str(op.attributes["dimension"])[-2])  # "#gpu<dim x>"
    em.define(op.results[0], f"(int){_ID_FUNCS[name]}({dim})")


def _barrier(em: Emitter, op) -> None:
    # A barrier that only orders workgroup memory (`memfence [#gpu.address_space<workgroup>]`, set where the
    # compiler knows, e.g. compiler/schedule/promotion.py's K steps) needs no global fence.
    spaces = str(op.attributes["address_spaces"]) if "address_spaces" in op.attributes else ""
    local_only = spaces and all("workgroup" in s for s in spaces.strip("[]").split(","))
    em.line("barrier(CLK_LOCAL_MEM_FENCE);" if local_only else "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);")


def _shuffle(em: Emitter, op) -> None:
    """gpu.shuffle xor of a 32-bit value over a whole subgroup, in the device's inline assembly (profile opencl_asm)."""
    mode = str(op.attributes["mode"])
    value, offset, width = op.operands
    if "xor" not in mode or em.asm is None:
        raise UnsupportedOp(f"gpu.shuffle ({mode}) has no OpenCL C form on this device (profile opencl_asm)")
    fn = helpers.shuffle_xor(em, em.asm, value.type, em.consts.get(width))
    em.define(op.results[0], f"{fn}({em.val(value)}, {em.val(offset)})")
    em.names[op.results[1]] = "1"  # every lane of a whole subgroup takes part


# gpu.subgroup_reduce kinds as cl_khr_subgroups' reductions (subgroup_reduce.py makes only these).
_SUBGROUP_REDUCE = {"add": "add", "maxnumf": "max", "minnumf": "min", "maxsi": "max", "minsi": "min",
                    "maxui": "max", "minui": "min"}


def _subgroup_reduce(em: Emitter, op) -> None:
    """gpu.subgroup_reduce of a scalar over the work-items of a subgroup (cl_khr_subgroups sub_group_reduce_*)."""
    kind = str(op.attributes["op"]).split()[-1].rstrip(">")
    value = op.operands[0]
    if kind not in _SUBGROUP_REDUCE or isinstance(value.type, ir.VectorType) or "cluster_size" in op.attributes:
        raise UnsupportedOp(f"gpu.subgroup_reduce {kind} of {value.type} has no cl_khr_subgroups form")
    em.extensions.add("cl_khr_subgroups")
    em.define(op.results[0], f"sub_group_reduce_{_SUBGROUP_REDUCE[kind]}({em.val(value)})")


_STATEMENTS: dict[str, Callable[[Emitter, object], None]] = {
    "memref.load": _load,
    "memref.store": _store,
    "vector.load": _vector_load,
    "vector.store": _vector_store,
    "vector.gather": _vector_gather,
    "memref.alloc": _alloc,
    "memref.alloca": _alloc,
    "gpu.barrier": _barrier,
    "gpu.shuffle": _shuffle,
    "gpu.subgroup_reduce": _subgroup_reduce,
    **control.HANDLERS,
    **transfer.HANDLERS,
    **matrix.HANDLERS,
    "vector.to_elements": nd.to_elements,
    **{k: _gpu_id for k in (*_ID_FUNCS, *_SUBGROUP_FUNCS)},
}
