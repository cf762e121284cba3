"""Reads the host function left after outlining (allocs, views, gpu.launch_func, return) into a plan.

A dispatch binds each kernel argument to a slot: whole, or (for kernels run in chunks, see split.py) a byte
range of it, which the runtime binds as a view of the slot's buffer.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..errors import CompileError
from ..executable import Dispatch, Slot, TensorSig
from ..ir import weights
from ..ir.mlir import ir
from ..ir.util import as_operation, bf16_bits

_DTYPES = {"f32": "float32", "f16": "float16", "f64": "float64", "i32": "int32", "i64": "int64", "i8": "int8",
           "i16": "int16", "i1": "bool", "bf16": "bfloat16"}
_VIEWS = {"memref.collapse_shape", "memref.expand_shape", "memref.cast", "memref.reinterpret_cast"}
_IGNORED = {"arith.constant", "memref.dealloc"}


def numpy_dtype(element_type: ir.Type) -> str:
    name = str(element_type)
    if name not in _DTYPES:
        raise CompileError(f"element type {name} has no numpy equivalent in portable yet", stage="plan")
    return _DTYPES[name]


def memref_sig(t: ir.Type) -> TensorSig:
    mt = ir.MemRefType(t)
    if not mt.has_static_shape:
        raise CompileError(f"dynamic shape {t} reached the plan; only static shapes are compiled", stage="plan")
    return TensorSig(tuple(int(d) for d in mt.shape), numpy_dtype(mt.element_type))


def reach_bytes(t: ir.Type) -> int:
    """Bytes from the start of its buffer that a (static, possibly strided) memref can touch."""
    mt = ir.MemRefType(t)
    strides, offset = mt.get_strides_and_offset()
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
    if offset == dynamic or dynamic in strides:
        raise CompileError(f"a kernel argument {t} has a dynamic layout; only static views are compiled", stage="plan")
    shape = list(mt.shape)
    if any(d == 0 for d in shape):
        return 0
    span = offset + 1 + sum((d - 1) * st for d, st in zip(shape, strides))
    return span * np.dtype(numpy_dtype(mt.element_type)).itemsize


_READS = {"memref.load": 0, "vector.load": 0, "vector.transfer_read": 0, "vector.maskedload": 0,
          "vector.gather": 0}
_WRITES = {"memref.store": 1, "vector.store": 1, "vector.transfer_write": 1, "vector.maskedstore": 1,
           "vector.scatter": 1}


def kernel_access(func_op: ir.Operation) -> tuple[str, ...]:
    """Per buffer argument: 'r', 'w' or 'rw'. Any use other than a known load or store (a view, an atomic,
    a call) counts as both, so a label is never narrower than the truth: the runtime places barriers and
    SPIR-V marks buffers NonWritable from it."""
    args = list(func_op.regions[0].blocks[0].arguments)
    access = [set() for _ in args]
    for i, a in enumerate(args):
        if not isinstance(a.type, ir.MemRefType):
            continue
        for use in a.uses:
            op = as_operation(use.owner)
            n = use.operand_number
            if _READS.get(op.name) == n:
                access[i].add("r")
            elif _WRITES.get(op.name) == n:
                access[i].add("w")
            else:
                access[i].update("rw")
    return tuple(("r" if "r" in s else "") + ("w" if "w" in s else "") or "r" for s in access)


def _const_int(v: ir.Value) -> int:
    op = ir.OpResult(v).owner
    if op.operation.name != "arith.constant":
        raise CompileError(f"launch size is not a constant: {op}", stage="plan")
    return ir.IntegerAttr(op.attributes["value"]).value


def _global_data(module: ir.Module, sym: str, sig: TensorSig, find) -> np.ndarray:
    for op in module.body.operations:
        if op.operation.name == "memref.global" and ir.StringAttr(op.attributes["sym_name"]).value == sym:
            attr = op.attributes["initial_value"]
            dense = ir.DenseElementsAttr(attr)
            dtype = np.dtype(sig.dtype)
            if dense.is_splat:
                v = dense.get_splat_value()
                value = ir.FloatAttr(v).value if isinstance(v, ir.FloatAttr) else ir.IntegerAttr(v).value
                return np.full(sig.shape, value, dtype=dtype)
            if sig.dtype == "bfloat16":  # no bf16 in the buffer protocol: the bits, viewed as the runtime's dtype
                return np.array(bf16_bits(attr), np.uint16).view(dtype).reshape(sig.shape)
            same = find(np.asarray(dense))  # the caller's array of these values (ir/weights.py), else a copy
            if same is not None and same.dtype == dtype:
                return same.reshape(sig.shape)
            return np.array(dense, copy=True).astype(dtype, copy=False).reshape(sig.shape)
    raise CompileError(f"memref.global @{sym} not found", stage="plan")


class PlanBuilder:
    """Turns the host func into slots, dispatches, inputs and outputs."""

    def __init__(self, module: ir.Module, func_op: ir.Operation, arrays: Mapping[str, np.ndarray] | None = None):
        self.module = module
        self._find = weights.known(arrays or {})  # digest -> array: constants that are the caller's arrays
        self.func = func_op
        self.slots: list[Slot] = []
        self.slot_of: dict[str, int] = {}
        self.constants: dict[int, np.ndarray] = {}
        # (kernel as (gpu.module, gpu.func) names, slots, grid)
        self.launches: list[tuple[tuple[str, str], tuple[int, ...], tuple[int, int, int]]] = []
        self.reach: list[tuple[int, ...]] = []  # per launch, per argument: bytes from its slot's start it can touch
        self.writes: list[tuple[int, ...]] = []  # per launch: the slots its kernel writes
        self._reach: dict[str, int] = {}  # value name -> reach_bytes of a view of a slot
        self.inputs: list[TensorSig] = []
        self.input_slots: list[int] = []
        self.outputs: list[tuple[int, TensorSig]] = []
        # One naming state for the host func: Value.get_name() without one numbers the whole module (every
        # gpu.module included) on each call.
        self._names = ir.AsmState(func_op, use_local_scope=True)

    def _name(self, value: ir.Value) -> str:
        return value.get_name(self._names)

    def _new_slot(self, value: ir.Value, kind: str, index: int = -1) -> int:
        sid = len(self.slots)
        self.slots.append(Slot(id=sid, nbytes=max(memref_sig(value.type).nbytes, 4), kind=kind, index=index))
        self.slot_of[self._name(value)] = sid
        return sid

    def _slot(self, value: ir.Value) -> int:
        name = self._name(value)
        if name not in self.slot_of:
            raise CompileError(f"value {name} used by a kernel has no buffer", stage="plan")
        return self.slot_of[name]

    def build(self) -> None:
        block = self.func.regions[0].blocks[0]
        for i, arg in enumerate(block.arguments):
            sig = memref_sig(arg.type)
            self.inputs.append(sig)
            self.input_slots.append(self._new_slot(arg, "input", i))
        for op in block.operations:
            name = op.operation.name
            if name in _IGNORED:
                continue
            if name == "memref.alloc":
                self._new_slot(op.results[0], "temp")
            elif name in _VIEWS or name == "memref.subview":
                self.slot_of[self._name(op.results[0])] = self._slot(op.operands[0])
                self._reach[self._name(op.results[0])] = reach_bytes(op.results[0].type)
            elif name == "memref.get_global":
                sig = memref_sig(op.results[0].type)
                sid = self._new_slot(op.results[0], "constant")
                sym = ir.FlatSymbolRefAttr(op.attributes["name"]).value
                self.constants[sid] = _global_data(self.module, sym, sig, self._find)
            elif name == "gpu.launch_func":
                self._launch(op)
            elif name == "func.return":
                for v in op.operands:
                    sid = self._slot(v)
                    if self.slots[sid].kind == "temp":
                        s = self.slots[sid]
                        self.slots[sid] = Slot(id=s.id, nbytes=s.nbytes, kind="output")
                    self.outputs.append((sid, memref_sig(v.type)))
            else:
                raise CompileError(
                    f"host-side op '{name}' left after GPU mapping (it would need the CPU); "
                    f"this graph shape is not supported yet: {str(op).splitlines()[0][:200]}",
                    stage="plan",
                )

    def _launch(self, op: ir.OpView) -> None:
        seg = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
        operands = list(op.operands)
        # Segments: async deps, grid x/y/z, block x/y/z, cluster x/y/z, dynamic shared memory, kernel operands,
        # async object. Older versions have fewer cluster entries; index from the front.
        n_async = seg[0]
        grid = tuple(_const_int(v) for v in operands[n_async:n_async + 3])
        kernel_operands_count = seg[-2] if len(seg) >= 2 else 0
        start = sum(seg[:-2])
        args = operands[start:start + kernel_operands_count]
        for a in args:
            if not isinstance(a.type, ir.MemRefType):
                raise CompileError(f"kernel takes a scalar computed on the host ({a.type}); not supported yet",
                                   stage="plan")
        path = ir.SymbolRefAttr(op.attributes["kernel"]).value
        if len(path) != 2:
            raise CompileError(f"kernel reference {path} is not @module::@func", stage="plan")
        sym = (path[0], path[1])
        slots = tuple(self._slot(a) for a in args)
        self.launches.append((sym, slots, grid))
        self.reach.append(tuple(self._reach.get(self._name(a), self.slots[s].nbytes) for a, s in zip(args, slots)))
        access = kernel_access(self._kernel(sym))
        self.writes.append(tuple(dict.fromkeys(s for s, a in zip(slots, access) if "w" in a)))

    def _kernel(self, sym: tuple[str, str]) -> ir.Operation:
        """The gpu.func `sym` = (gpu.module name, gpu.func name), compared as symbols, not as printed text."""
        mod, fn = sym
        for gm in self.module.body.operations:
            if gm.operation.name == "gpu.module" and ir.StringAttr(gm.attributes["sym_name"]).value == mod:
                for f in gm.regions[0].blocks[0].operations:
                    if f.operation.name == "gpu.func" and ir.StringAttr(f.attributes["sym_name"]).value == fn:
                        return f.operation
        raise CompileError(f"kernel {sym} launched by the host is not in the module", stage="plan")


def dispatches(builder: PlanBuilder, kernel_index: dict[tuple[str, str], int],
               splits: dict | None = None) -> list[Dispatch]:
    """The plan's dispatches; a launch of a split group (`splits[i]`, split.Split, launch i = group i) becomes
    one dispatch per chunk, binding the buffers it reads and writes in chunks at the chunk's byte range."""
    out: list[Dispatch] = []
    for j, (sym, slots, grid) in enumerate(builder.launches):
        s = (splits or {}).get(j)
        if s is None:
            out.append(Dispatch(kernel=kernel_index[sym], slots=slots, grid=grid))
            continue
        row_bytes = _chunked_slots(builder, j, s)
        for start in s.starts:
            offsets, sizes = [], []
            for sid, reach in zip(slots, builder.reach[j]):
                whole = builder.slots[sid].nbytes
                if sid not in row_bytes:
                    offsets.append(0)
                    sizes.append(whole)
                    continue
                rb = row_bytes[sid]
                if reach < s.rows * rb or (start + s.rows) * rb > whole:
                    raise CompileError(f"launch {j} ({sym}) binds {reach} bytes of slot {sid} where a chunk of "
                                       f"{s.rows} rows x {rb} bytes was planned", stage="plan")
                offsets.append(start * rb)
                sizes.append(s.rows * rb)
            out.append(Dispatch(kernel=kernel_index[sym], slots=slots, grid=grid, offsets=tuple(offsets),
                                sizes=tuple(sizes)))
    return out


def _chunked_slots(builder: PlanBuilder, j: int, s) -> dict[int, int]:
    """slot -> bytes per row for the buffers launch j binds in chunks."""
    if len(builder.launches) <= max([j] + [g for kind, groups, _ in s.chunked if kind == "written" for g in groups]):
        raise CompileError(f"{len(builder.launches)} kernel launches do not match the dispatch groups", stage="plan")
    found: dict[int, int] = {}
    for kind, groups, rb in s.chunked:
        if kind == "input":
            sids = [builder.input_slots[groups[0]]]
        elif kind == "constant":  # groups = (its size,): split.py made sure no other constant it reads has it
            sids = list(dict.fromkeys(sid for sid in builder.launches[j][1] if builder.slots[sid].kind == "constant"
                                      and builder.slots[sid].nbytes == groups[0]))
            if len(sids) != 1:
                raise CompileError(f"launch {j}: {len(sids)} constant buffers of {groups[0]} bytes, one of them read "
                                   f"in chunks", stage="plan")
        else:
            writers = groups if kind == "written" else (j,)
            sids = [w for g in writers for w in builder.writes[g]]
            if len(sids) != len(writers):
                raise CompileError(f"launch {j}: the kernels {writers} that make a buffer read in chunks write "
                                   f"{len(sids)} buffers; cannot tell which one is chunked", stage="plan")
        for sid in sids:
            if found.setdefault(sid, rb) != rb:
                raise CompileError(f"launch {j}: slot {sid} is bound in chunks of two sizes", stage="plan")
    return found
