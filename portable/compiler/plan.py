"""Reads the host function left after outlining (allocs, views, gpu.launch_func, return) into a plan."""

from __future__ import annotations

import numpy as np

from ..errors import CompileError
from ..executable import Dispatch, Slot, TensorSig
from .mlir import ir

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


def _const_int(v: ir.Value) -> int:
    op = ir.OpResult(v).owner
    if op.operation.name != "arith.constant":
        raise CompileError(f"launch size is not a constant: {op}", stage="plan")
    return ir.IntegerAttr(op.attributes["value"]).value


def _global_data(module: ir.Module, sym: str, sig: TensorSig) -> np.ndarray:
    for op in module.body.operations:
        if op.operation.name == "memref.global" and ir.StringAttr(op.attributes["sym_name"]).value == sym:
            attr = op.attributes["initial_value"]
            dense = ir.DenseElementsAttr(attr)
            dtype = np.dtype(sig.dtype)
            if dense.is_splat:
                v = dense.get_splat_value()
                value = ir.FloatAttr(v).value if isinstance(v, ir.FloatAttr) else ir.IntegerAttr(v).value
                return np.full(sig.shape, value, dtype=dtype)
            return np.array(dense, copy=True).astype(dtype, copy=False).reshape(sig.shape)
    raise CompileError(f"memref.global @{sym} not found", stage="plan")


class PlanBuilder:
    """Turns the host func into slots, dispatches, inputs and outputs."""

    def __init__(self, module: ir.Module, func_op: ir.Operation):
        self.module = module
        self.func = func_op
        self.slots: list[Slot] = []
        self.slot_of: dict[str, int] = {}
        self.constants: dict[int, np.ndarray] = {}
        self.launches: list[tuple[str, tuple[int, ...], tuple[int, int, int]]] = []  # (kernel symbol, slots, grid)
        self.inputs: list[TensorSig] = []
        self.input_slots: list[int] = []
        self.outputs: list[tuple[int, TensorSig]] = []

    def _new_slot(self, value: ir.Value, kind: str, index: int = -1) -> int:
        sid = len(self.slots)
        self.slots.append(Slot(id=sid, nbytes=max(memref_sig(value.type).nbytes, 4), kind=kind, index=index))
        self.slot_of[value.get_name()] = sid
        return sid

    def _slot(self, value: ir.Value) -> int:
        name = value.get_name()
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
            elif name in _VIEWS:
                self.slot_of[op.results[0].get_name()] = self._slot(op.operands[0])
            elif name == "memref.get_global":
                sig = memref_sig(op.results[0].type)
                sid = self._new_slot(op.results[0], "constant")
                sym = ir.FlatSymbolRefAttr(op.attributes["name"]).value
                self.constants[sid] = _global_data(self.module, sym, sig)
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
        sym = ir.SymbolRefAttr(op.attributes["kernel"])
        self.launches.append((str(sym), tuple(self._slot(a) for a in args), grid))


def dispatches(builder: PlanBuilder, kernel_index: dict[str, int]) -> list[Dispatch]:
    return [Dispatch(kernel=kernel_index[sym], slots=slots, grid=grid) for sym, slots, grid in builder.launches]
