"""onnxruntime's 4-bit weight-only matmul (`com.microsoft:MatMulNBits`) as standard ONNX ops. The packed weights are
constants, so their nibbles (the low one first) are unpacked here, offset by their block's zero point (8 where none
is given) into int8 codes; the graph casts the codes, scales them by their block's scale and multiplies A by the
[N, K] matrix transposed.

    Y[m, n] = sum_k A[m, k] * (q[n, k] - zp[n, k // block]) * scale[n, k // block]

The codes take a byte a weight, twice the packed form: a decode step's matvec then reads them and the scales in one
kernel (the cast and scale fuse into it, as for int8 weights), where splitting nibbles inside the graph
materialized the float32 matrix every step. `dequantize_matmul_nbits(model)` rewrites every such node of a model;
onnxruntime's own kernel is the reference."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import UnsupportedOp
from .onnx_weights import NONE
from .onnx_weights import value as weight_value


def _attr(node: Any, name: str, default: Any = None) -> Any:
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _unpack_nibbles(packed: np.ndarray, count: int) -> np.ndarray:
    """uint8 [..., bytes] -> uint8 [..., count] of 4-bit values, the low nibble first."""
    lo, hi = packed & 0x0F, packed >> 4
    return np.stack([lo, hi], axis=-1).reshape(*packed.shape[:-1], -1)[..., :count]


def dequantize_matmul_nbits(model: Any, weights: Mapping[str, np.ndarray] = NONE) -> Any:
    """`model` (onnx.ModelProto) with each com.microsoft:MatMulNBits node (4 bits, constant weights, scales and
    zero points) replaced by ONNX ops; other nodes untouched (`weights`: the arrays of its stubs). Returns a new
    model (`model` itself where it has no such node)."""
    import onnx
    from onnx import helper, numpy_helper

    if not any(n.op_type == "MatMulNBits" and n.domain == "com.microsoft" for n in model.graph.node):
        return model
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    inits = {t.name: t for t in g.initializer}
    consts = {n.output[0]: n for n in g.node if n.op_type == "Constant"}

    def value(name: str, node: Any, what: str) -> np.ndarray:
        if name in inits:
            return weight_value(inits[name], weights)
        if name in consts:
            return numpy_helper.to_array(_attr(consts[name], "value"))
        raise UnsupportedOp(f"node '{node.name}' (op com.microsoft:MatMulNBits): its {what} '{name}' is computed at "
                            f"run time; portable needs quantized weights stored in the model")

    out_nodes = []
    for k, node in enumerate(g.node):
        if not (node.op_type == "MatMulNBits" and node.domain == "com.microsoft"):
            out_nodes.append(node)
            continue
        bits, block = int(_attr(node, "bits", 4)), int(_attr(node, "block_size", 0))
        kk, nn = int(_attr(node, "K", 0)), int(_attr(node, "N", 0))
        if bits != 4:
            raise UnsupportedOp(f"node '{node.name}' (op com.microsoft:MatMulNBits): {bits}-bit weights; portable "
                                f"decomposes 4-bit ones only (re-quantize with bits=4)")
        if len(node.input) > 4 and any(node.input[4:]):
            raise UnsupportedOp(f"node '{node.name}' (op com.microsoft:MatMulNBits): g_idx or bias inputs are not "
                                f"supported; quantize without act-order (g_idx) and add the bias as its own Add")
        nb = (kk + block - 1) // block
        packed = value(node.input[1], node, "weights").reshape(nn, nb, block // 2)
        scales = value(node.input[2], node, "scales").astype(np.float32).reshape(nn, nb, 1)
        if len(node.input) > 3 and node.input[3]:
            zp = value(node.input[3], node, "zero points")
            if zp.dtype != np.uint8:
                raise UnsupportedOp(f"node '{node.name}' (op com.microsoft:MatMulNBits): zero points of type "
                                    f"{zp.dtype}; portable takes packed uint8 zero points")
            zero = _unpack_nibbles(zp.reshape(nn, -1), nb).astype(np.int16).reshape(nn, nb, 1)
        else:
            zero = np.full((nn, nb, 1), 8, np.int16)
        codes = (_unpack_nibbles(packed, block).astype(np.int16) - zero).astype(np.int8)  # [N, nb, block], -15..15
        p = f"{node.name or 'MatMulNBits'}_{k}/"
        new_inits = {p + "codes": codes, p + "scale": scales,
                     p + "shape": np.array([nn, nb * block], np.int64),
                     p + "starts": np.array([0], np.int64), p + "ends": np.array([kk], np.int64),
                     p + "axes": np.array([1], np.int64)}
        g.initializer.extend(numpy_helper.from_array(v, n) for n, v in new_inits.items())

        def mk(op: str, ins: list[str], out: str, prefix: str = p, **attrs: Any) -> str:
            out_nodes.append(helper.make_node(op, ins, [prefix + out], name=prefix + out, **attrs))
            return prefix + out

        q = mk("Cast", [p + "codes"], "q", to=onnx.TensorProto.FLOAT)
        w = mk("Reshape", [mk("Mul", [q, p + "scale"], "w_blocks"), p + "shape"], "w_padded")
        if nb * block != kk:
            w = mk("Slice", [w, p + "starts", p + "ends", p + "axes"], "w")
        wt = mk("Transpose", [w], "wt", perm=[1, 0])
        out_nodes.append(helper.make_node("MatMul", [node.input[0], wt], [node.output[0]], name=p + "matmul"))
    del g.node[:]
    g.node.extend(out_nodes)
    if not any(n.domain == "com.microsoft" for n in g.node):
        keep = [o for o in m.opset_import if o.domain != "com.microsoft"]
        del m.opset_import[:]
        m.opset_import.extend(keep)
    return m
