"""ONNX model -> MLIR text of linalg on tensors, in-process, through torch-mlir's ONNX importer.

    text = onnx_to_mlir("model.onnx", input_shapes={"input": (8, 3, 224, 224)})

Stages: load (path, bytes or onnx.ModelProto) -> check ops and dtypes -> pin shapes -> onnx shape inference
-> expand function ops (onnx_functions.py) -> fold constants (onnx_fold.py) -> `torch_mlir.extras.onnx_importer`
-> `torch-onnx-to-torch-backend-pipeline` -> `torch-backend-to-linalg-on-tensors-backend-pipeline` -> check the
result is within the compiler's contract.

Ops torch-mlir cannot lower but that ONNX defines as functions (Attention, RMSNormalization, RotaryEmbedding,
Swish, ...) are expanded into their schema function bodies: ops of domains torch-mlir does not lower (and the
few in ALWAYS_EXPAND) up front, default-domain ops when an import attempt fails at a node of that op; the
import then runs again, up to MAX_EXPANSIONS ops.

Dynamic dimensions: compile per shape. The compiler takes static tensors only (one plan, one buffer layout,
grids fixed at compile time), so every dynamic dimension is pinned before import: to the shape the caller
passes in `input_shapes`, else to the model's own dim_value, else 1 (a symbolic dim such as "batch" or
"seq" gets the same value in every input that names it). Serving a new shape means a new compile; the
compile cache (keyed by the MLIR text, which carries the shapes) makes a repeated shape free. Inputs whose
*values* decide a shape (Reshape's shape, TopK's k, Slice's starts) can be folded into the model as
constants with `input_values`; the graph is then specialized to those values too.

Every failure is a PortableError naming the node, its op type and the reason: `UnsupportedOp` for ops,
dtypes and types with no lowering and for any failure of torch-mlir's importer or pipelines on a node (its first
line names the node and its attributes, torch-mlir's diagnostics follow), `CompileError` for a malformed model,
`ShapeMismatch` for `input_shapes` that contradict the model. The MLIR text keeps torch-mlir's locations (each op
at its node's name), so the compiler can name the node too.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ..errors import CompileError, PortableError, UnsupportedOp
from .onnx_checks import (
    check_dtypes,
    check_inferred,
    check_known_failures,
    check_ops,
    iter_nodes,
    name_nodes,
    pad_outputs,
)
from .onnx_control import unroll_control_flow, unroll_legacy_scans
from .onnx_decomp_quant import dequantize_matmul_nbits
from .onnx_decompose import annotate, decompose
from .onnx_describe import node_detail
from .onnx_fold import fold_constants
from .onnx_functions import expand_nodes, has_function_body, opsets_of
from .onnx_shapes import infer_shapes, pin_shapes, runtime_inputs
from .onnx_weights import SplitModel, detach, is_stub, split

ONNX_TO_TORCH = "builtin.module(torch-onnx-to-torch-backend-pipeline)"
TORCH_TO_LINALG = "builtin.module(torch-backend-to-linalg-on-tensors-backend-pipeline)"


# torch-mlir's ONNX lowerings are registered from about opset 13 on (MaxPool from 12, for instance): older
# models are first brought to UPGRADE_TO with onnx's version converter.
MIN_OPSET, UPGRADE_TO = 13, 17

# Dialects the compiler's contract allows in the module we hand it (frontend -> compiler).
_CONTRACT_DIALECTS = {"builtin", "func", "linalg", "tensor", "arith", "math", "affine", "scf", "cf", "complex",
                      "bufferization", "ub"}


def _onnx():
    try:
        import onnx
    except ImportError as e:  # pragma: no cover - the onnx extra is not installed
        raise UnsupportedOp(f"ONNX models need the 'onnx' package ({e}): pip install 'portable[onnx]'") from e
    return onnx


def is_onnx(obj: Any) -> bool:
    """True for what `onnx_to_mlir` takes: an onnx.ModelProto, bytes, a path ending in .onnx, or a SplitModel."""
    if isinstance(obj, (bytes, bytearray, memoryview, SplitModel)):
        return True
    if isinstance(obj, Path) or (isinstance(obj, str) and "\n" not in obj and len(obj) < 4096):
        return str(obj).lower().endswith(".onnx")
    return type(obj).__name__ == "ModelProto" and hasattr(obj, "graph")


# ---------------------------------------------------------------------------------------------- loading
def load_model(model: Any) -> tuple[Any, dict]:
    """(onnx.ModelProto, {initializer name: array}) from a path, serialized bytes or a ModelProto: the model with
    its large initializers as stubs (onnx_weights.split; the caller's model is untouched), a file's external data
    mapped rather than read."""
    onnx = _onnx()
    from google.protobuf.message import DecodeError

    if isinstance(model, SplitModel):
        return _check_loaded(model.model, dict(model.weights), "the model")
    if type(model).__name__ == "ModelProto":
        return _check_loaded(*split(model), "the ModelProto")
    if isinstance(model, (bytes, bytearray, memoryview)):
        try:
            m = onnx.load_from_string(bytes(model))
        except (DecodeError, ValueError, RuntimeError) as e:
            raise CompileError(f"the bytes are not a valid ONNX model (truncated or not ONNX): {e}",
                               stage="onnx-load") from e
        return _check_loaded(*split(m), "the bytes")
    if isinstance(model, (str, os.PathLike)):
        p = Path(model)
        if not p.is_file():
            raise CompileError(f"ONNX model {p} does not exist", stage="onnx-load")
        try:
            m = onnx.load(str(p), load_external_data=False)
            return _check_loaded(*split(m, p.parent), str(p))
        except PortableError:
            raise
        except (DecodeError, ValueError, RuntimeError, OSError) as e:
            raise CompileError(f"{p} is not a valid ONNX model (truncated or not ONNX): {e}", stage="onnx-load") from e
        except Exception as e:  # protobuf internals
            raise CompileError(f"{p} could not be loaded: {type(e).__name__}: {e}", stage="onnx-load") from e
    raise UnsupportedOp(f"cannot import a {type(model).__name__} as ONNX: pass a path, bytes or an onnx.ModelProto")


def _check_loaded(m, weights: dict, what: str) -> tuple[Any, dict]:
    # A truncated file often parses as a protobuf with a partial or empty graph: say so instead of importing it.
    if not m.HasField("graph") or (len(m.graph.node) == 0 and len(m.graph.output) == 0):
        raise CompileError(f"{what} holds no ONNX graph (empty, truncated or not an ONNX model)", stage="onnx-load")
    if not m.opset_import:
        raise CompileError(f"{what} has no opset_import: not a complete ONNX model", stage="onnx-load")
    for t in m.graph.initializer:
        if t.data_location == t.EXTERNAL and not is_stub(t):
            where = next((e.value for e in t.external_data if e.key == "location"), "?")
            raise CompileError(f"{what}: initializer '{t.name}' keeps its values in the external file '{where}', which "
                               f"was not read: pass the model's path, or onnx.load(path) with its external data "
                               f"(the default), not load_external_data=False", stage="onnx-load")
    # Contrib ops with a decomposition become standard ops before any check, shape inference or import sees them.
    m = dequantize_matmul_nbits(m, weights)
    return m, {**weights, **detach(m)}


# ---------------------------------------------------------------------------------------------- opsets
def upgrade_opset(m):
    """The model converted to opset UPGRADE_TO when its default-domain opset is older than MIN_OPSET."""
    onnx = _onnx()
    ver = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), None)
    if ver is None or ver >= MIN_OPSET:
        return m
    try:
        return onnx.version_converter.convert_version(m, UPGRADE_TO)
    except Exception as e:  # noqa: BLE001 - the converter lacks an adapter: import the model as it is
        import warnings

        warnings.warn(f"could not convert the model from opset {ver} to {UPGRADE_TO} ({e}); importing it as is",
                      stacklevel=3)
        return m


# ------------------------------------------------------------------------------------------- importing
class _Nodes:
    """Node name -> node, to turn MLIR diagnostic locations back into ONNX nodes."""

    def __init__(self, m):
        self.protos = {n.name: n for n in iter_nodes(m.graph)}

    def desc(self, name: str) -> str:
        """'node 'name' (op Type)': for diagnostic lines."""
        n = self.protos.get(name)
        dom, op = (n.domain, n.op_type) if n is not None else ("", "?")
        return f"node '{name}' (op {dom + ':' if dom and dom != 'ai.onnx' else ''}{op})"

    def detail(self, name: str) -> str:
        """The node with its attributes: for the first line of an error."""
        n = self.protos.get(name)
        return node_detail(n) if n is not None else self.desc(name)

    def in_location(self, loc: str) -> str | None:
        for s in re.findall(r'"((?:[^"\\]|\\.)*)"', loc):
            if s in self.protos:
                return s
        return None


def _diagnostics(e: Exception, nodes: _Nodes) -> tuple[str | None, str]:
    """(first node named by a diagnostic, the diagnostics as text)."""
    diags = getattr(e, "error_diagnostics", None) or []
    node = None
    lines = []
    for d in diags:
        loc = str(d.location)
        n = nodes.in_location(loc)
        node = node or n
        lines.append(f"{nodes.desc(n) if n else loc}: {d.message}")
        for note in d.notes:
            nn = nodes.in_location(str(note.location))
            node = node or nn
            lines.append(f"  note: {note.message[:400]}")
    text = "\n".join(lines) if lines else str(e)
    return node, text


_TORCH_PLUMBING = ("torch.constant.", "torch.prim.ListConstruct", "torch.vtensor.literal", "torch_c.")


def _unlowered_torch_op(module, nodes: _Nodes, ir) -> tuple[str, str | None] | None:
    """The first torch op left in `module` that is not a constant or list plumbing: (op name, ONNX node)."""
    found: list[tuple[str, str | None]] = []

    def visit(op):
        name = op.name
        if name.startswith("torch.") and not name.startswith(_TORCH_PLUMBING) and not found:
            found.append((name, nodes.in_location(str(op.location))))
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    return found[0] if found else None


def _run_pipeline(module, pipeline: str, stage: str, nodes: _Nodes, ir, passmanager) -> None:
    """Run one of torch-mlir's pipelines. A failure is torch-mlir's, not the model's (the model passed ONNX's
    checks and shape inference): UnsupportedOp naming the node and its attributes, the diagnostics after."""
    try:
        passmanager.PassManager.parse(pipeline).run(module)
    except ir.MLIRError as e:
        node, text = _diagnostics(e, nodes)
        legalize = re.search(r"failed to legalize operation '([^']+)'", text)
        what = None
        if legalize:
            what = legalize.group(1)
            if what == "torch.operator":
                m = re.search(r'name = "onnx\.([\w.]+)"', text)
                what = f"onnx.{m.group(1)}" if m else what
        if not node or (what and (what.startswith(_TORCH_PLUMBING) or what == "func.func")):
            # A constant or the function signature is only where the conversion stopped: the op it could not
            # lower is still in the (partially converted) module, at its ONNX node's location.
            stuck = _unlowered_torch_op(module, nodes, ir)
            if stuck:
                what, node = (stuck[0] if what else what), stuck[1] or node
        lead = f"{nodes.detail(node)}: " if node else ""
        if what:
            raise UnsupportedOp(f"{lead}torch-mlir has no lowering for '{what}' ({stage}):\n{text}") from e
        raise UnsupportedOp(f"{lead}torch-mlir's {stage} failed on it:\n{text}") from e


def _leftover_ops(module, nodes: _Nodes, allowed, ir) -> None:
    """After a pipeline, ops it should have removed mean an op it could not lower: name the ONNX node."""
    bad: list[tuple[str, str]] = []

    def visit(op):
        name = op.name
        if not allowed(name):
            detail = name
            if name == "torch.operator":
                detail = "onnx." + str(op.attributes["name"]).strip('"').removeprefix("onnx.")
            bad.append((detail, str(op.location)))
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    # Name an op at a node's location (module-level ones such as ml_program.global have none), not a terminator.
    bad.sort(key=lambda b: (nodes.in_location(b[1]) is None, b[0].endswith(".yield")))
    if bad:
        detail, loc = bad[0]
        n = nodes.in_location(loc)
        where = nodes.detail(n) if n else f"location {loc}"
        more = f" (and {len(bad) - 1} more op(s): {', '.join(sorted({b[0] for b in bad[1:]}))})" if len(bad) > 1 else ""
        raise UnsupportedOp(f"{where}: '{detail}' has no lowering to linalg on tensors{more}")


def _node_in_traceback(e: BaseException, nodes: _Nodes) -> str | None:
    """The ONNX node torch-mlir's importer was importing when it raised: the innermost frame holding a `node`
    local that is one of the model's nodes (the importer names none in its own exceptions)."""
    found, tb = None, e.__traceback__
    while tb is not None:
        n = tb.tb_frame.f_locals.get("node")
        if getattr(n, "op_type", None) is not None and getattr(n, "name", None) in nodes.protos:
            found = n.name
        tb = tb.tb_next
    return found


def _import_graph(importer, m, ctx, nodes: _Nodes, ir, weights: dict):
    """torch-mlir's importer on `m`: the module's operation. Failures name the node being imported."""

    class DetachedCache(importer.ContextCache):
        """Stubs left by `detach` are imported from their arrays, shared, not copied."""

        def tensor_proto_to_attr(self, tp):
            if not is_stub(tp):
                return super().tensor_proto_to_attr(tp)
            return ir.DenseResourceElementsAttr.get_from_buffer(
                weights[tp.name], self._sanitize_name(tp.name), self.tensor_proto_to_builtin_type(tp), alignment=8)

    try:
        info = importer.ModelInfo(m)
        module = info.create_module(context=ctx).operation
        importer.NodeImporter.define_function(info.main_graph, module, DetachedCache(ctx)).import_all()
        return module
    except PortableError:
        raise
    except ir.MLIRError as e:
        node, text = _diagnostics(e, nodes)
        node = node or _node_in_traceback(e, nodes)
        lead = f"{nodes.detail(node)}: " if node else ""
        raise UnsupportedOp(f"{lead}torch-mlir's ONNX importer failed on it:\n{text}") from e
    except Exception as e:  # OnnxImportError, or the importer's own asserts and indexing
        node = _node_in_traceback(e, nodes)
        if node is None and not isinstance(e, importer.OnnxImportError):
            raise CompileError(f"ONNX import failed: {type(e).__name__}: {e}", stage="onnx-import") from e
        lead = f"{nodes.detail(node)}: " if node else ""
        raise UnsupportedOp(f"{lead}torch-mlir's ONNX importer cannot import it: {type(e).__name__}: {e}") from e


def onnx_to_mlir(model: Any, input_shapes: dict[str, tuple] | None = None, *,
                 input_values: dict[str, Any] | None = None, weights: dict | None = None) -> str:
    """MLIR text (linalg on tensors, static shapes) for an ONNX model: a path, bytes or an onnx.ModelProto.

    `input_shapes` pins dynamic dimensions (default: the model's own, symbolic ones 1); `input_values` folds
    inputs into constants (for shape-determining inputs); `weights`: the arrays of a model whose initializers
    `onnx_weights.detach` already took out. Raises UnsupportedOp / CompileError / ShapeMismatch. The text is a
    `ModuleText`: its large constants ride beside it (portable/ir/weights.py).
    """
    m, loaded = load_model(model)
    weights = {**(weights or {}), **loaded}
    # The graph name becomes the function's symbol: an empty one prints as an invalid symbol, others are quoted
    # (the compiler makes the function's name an identifier in any case).
    name = m.graph.name if isinstance(m.graph.name, str) else ""  # bytes: protobuf's form of text not UTF-8
    m.graph.name = re.sub(r"\W", "_", name, flags=re.ASCII).strip("_") or "main_graph"
    name_nodes(m.graph)
    opsets = opsets_of(m)
    check_ops(m, expandable=lambda n: has_function_body(n.domain, n.op_type, opsets))
    pad_outputs(m.graph)
    check_dtypes(m)
    pin_shapes(m, input_shapes, input_values)
    m = upgrade_opset(unroll_legacy_scans(m, infer_shapes))  # before onnx's Scan 8->9 adapter mangles them
    weights.update(detach(m))  # the copies below carry the graph, not its weights
    # Ops of domains torch-mlir does not lower are expanded into their ONNX function bodies from the start; ops
    # of the default domain only once torch-mlir turns out to have no lowering for them (it has for most).
    opsets = opsets_of(m)
    expand = {(n.domain, n.op_type) for n in iter_nodes(m.graph)
              if (n.domain not in ("", "ai.onnx") or n.op_type in ALWAYS_EXPAND)
              and has_function_body(n.domain, n.op_type, opsets)}
    while True:
        try:
            return _import(m, expand, weights)
        except (UnsupportedOp, CompileError) as e:
            op = _expandable(e, expand, opsets) if len(expand) < MAX_EXPANSIONS else None
            if op is None:
                if expand:
                    raise _with_note(e, f"after expanding {', '.join(sorted(o for _, o in expand))} into "
                                        f"ONNX function bodies") from e
                raise
            expand.add(op)


# Default-domain ops whose torch-mlir lowering exists but computes wrong values: always expanded instead.
ALWAYS_EXPAND = {
    # aten.nll_loss_forward's lowering accumulates the total weight in int64: fractional class weights truncate
    # to 0 and a weighted 'mean' divides by zero (onnx node cases test_sce_mean_weight*, test_nllloss_*weight*).
    "NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss",
}
MAX_EXPANSIONS = 6  # ops expanded into their function bodies, one more per import attempt
_NODE_IN_MESSAGE = re.compile(r"node '[^']+' \(op (?:([\w.]+):)?(\w+)[,)]")
_EXPANDABLE_STAGES = {"onnx-import", "torch-onnx-to-torch-backend-pipeline",
                      "torch-backend-to-linalg-on-tensors-backend-pipeline"}


def _expandable(e: Exception, expand: set, opsets: dict) -> tuple[str, str] | None:
    """(domain, op) of the ONNX node an import error names, when that op has a function body not yet expanded."""
    if isinstance(e, CompileError) and e.stage not in _EXPANDABLE_STAGES:
        return None
    found = _NODE_IN_MESSAGE.search(str(e))
    if not found:
        return None
    op = (found.group(1) or "", found.group(2))
    if op in expand or (op[0] == "" and ("ai.onnx", op[1]) in expand) or not has_function_body(*op, opsets):
        return None
    return op


def _with_note(e: PortableError, note: str) -> PortableError:
    if isinstance(e, CompileError):
        return type(e)(f"{e} ({note})", stage=e.stage)
    return type(e)(f"{e} ({note})")


def _import(m0, expand: set, weights: dict):
    """Shape inference, function expansion, folding and checks on a copy of `m0`, then torch-mlir's importer and
    its two pipelines; returns the MLIR text. `weights`: the arrays of `m0`'s detached initializers."""
    m = type(m0)()
    m.CopyFrom(m0)
    m = infer_shapes(m)
    if expand:
        expand_nodes(m, lambda n: (n.domain, n.op_type) in expand
                     or (n.domain == "ai.onnx" and ("", n.op_type) in expand))
        name_nodes(m.graph)
        m = infer_shapes(m)
    m = fold_constants(m, infer_shapes, weights=weights)
    m = unroll_control_flow(m, infer_shapes, weights)
    m = decompose(m, infer_shapes, weights=weights)
    check_dtypes(m)  # inference may reveal intermediate values of unsupported dtypes
    check_inferred(m)
    check_known_failures(m, weights)
    nodes = _Nodes(m)
    from ..ir.mlir import ir, onnx_importer, passmanager, torch_dialect
    from ..ir.weights import outline

    importer = onnx_importer()
    ctx = ir.Context()
    torch_dialect.register_dialect(ctx)
    with ctx:
        module = _import_graph(importer, m, ctx, nodes, ir, weights)
        _run_pipeline(module, ONNX_TO_TORCH, "torch-onnx-to-torch-backend-pipeline", nodes, ir, passmanager)
        _leftover_ops(module, nodes, lambda n: n != "torch.operator", ir)
        _run_pipeline(module, TORCH_TO_LINALG, "torch-backend-to-linalg-on-tensors-backend-pipeline", nodes,
                      ir, passmanager)
        _leftover_ops(module, nodes, lambda n: n.split(".")[0] in _CONTRACT_DIALECTS, ir)
        _check_static_signature(module, m)
        annotate(module, m)  # which ops were decomposed: the compiler's dump shows it
        return outline(module, weights.values())


def _check_static_signature(module, m) -> None:
    from ..ir.mlir import ir

    funcs = [op for op in module.regions[0].blocks[0].operations if op.operation.name == "func.func"]
    if len(funcs) != 1:
        raise CompileError(f"the imported module has {len(funcs)} functions, expected one", stage="onnx-import")
    ftype = ir.FunctionType(ir.TypeAttr(funcs[0].attributes["function_type"]).value)
    for kind, types, vis in (("input", ftype.inputs, runtime_inputs(m)), ("output", ftype.results, m.graph.output)):
        for i, t in enumerate(types):
            if not (isinstance(t, ir.RankedTensorType) or ir.RankedTensorType.isinstance(t)) \
                    or not ir.RankedTensorType(t).has_static_shape:
                name = vis[i].name if i < len(vis) else f"#{i}"
                raise UnsupportedOp(f"{kind} '{name}' has type {t} after import: its shape depends on input values "
                                    f"(data-dependent shape); portable compiles per shape, so pass the "
                                    f"shape-determining inputs in input_values= to fold them")


__all__ = ["onnx_to_mlir", "load_model", "pin_shapes", "infer_shapes", "is_onnx", "runtime_inputs"]
