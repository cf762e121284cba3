"""numpy meaning of Graph nodes: what the emitted IR computes, node by node, for tests everywhere.

Floats round to their dtype after every elementwise op, as the IR does. Sums, matmuls and convolutions
of float16 accumulate in float32 here and round once (the IR accumulates in float16, in an order the
compiler picks), so compare float16 results with a tolerance that grows with the reduction length.
Integers wrap (two's complement); integer division rounds toward zero.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .graph_emit import live_nodes
from .graph_ir import Node, eval_instr


def _acc(dtype: str) -> str:
    return "float32" if dtype == "float16" else dtype


def _elementwise(n: Node, args: list[np.ndarray]) -> np.ndarray:
    views = []
    for a, dims in zip(args, n.attrs["dims"]):
        kept = [d for d in dims if d is not None]
        assert kept == sorted(kept), "elementwise dims must be increasing"
        view = [1] * len(n.shape)
        for d in kept:
            view[d] = n.shape[d]
        views.append(a.reshape(view))
    vals: list[np.ndarray] = []
    for ins in n.attrs["prog"]:
        if ins.op == "arg":
            vals.append(views[ins.attr])
        else:
            vals.append(eval_instr(ins, [vals[k] for k in ins.args], n.attrs["src"], n.dtype))
    return np.broadcast_to(vals[-1], n.shape).astype(n.dtype)


def _reduce(n: Node, x: np.ndarray) -> np.ndarray:
    axes, kind = n.attrs["axes"], n.attrs["kind"]
    if kind == "sum":
        return np.sum(x.astype(_acc(n.dtype)), axis=axes, dtype=_acc(n.dtype)).astype(n.dtype)
    return (np.max if kind == "max" else np.min)(x, axis=axes).astype(n.dtype)


def _matmul(n: Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    acc = _acc(n.dtype)
    return np.matmul(a.astype(acc), b.astype(acc)).astype(n.dtype)


def _conv2d(n: Node, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Cross-correlation on an already padded input; computed in NHWC/HWCF."""
    acc = _acc(n.dtype)
    if n.attrs["layout"] == "NCHW":
        x, w = x.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0)
    x, w = x.astype(acc), w.astype(acc)
    (sh, sw), (dh, dw) = n.attrs["stride"], n.attrs["dilation"]
    kh, kw, _, f = w.shape
    nb, (oh, ow) = x.shape[0], (n.shape[1:3] if n.attrs["layout"] == "NHWC" else n.shape[2:4])
    out = np.zeros((nb, oh, ow, f), dtype=acc)
    for i in range(kh):
        for j in range(kw):
            patch = x[:, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw, :]
            out += np.matmul(patch, w[i, j])
    if n.attrs["layout"] == "NCHW":
        out = out.transpose(0, 3, 1, 2)
    return out.astype(n.dtype)


def evaluate(nodes: Sequence[Node], inputs: Sequence[int], outputs: Sequence[int],
             arrays: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
    vals: dict[int, np.ndarray] = dict(zip(inputs, arrays))
    with np.errstate(all="ignore"):
        for nid in live_nodes(nodes, outputs):
            n = nodes[nid]
            args = [vals[k] for k in n.inputs]
            if n.kind == "input":
                continue
            if n.kind == "constant":
                vals[nid] = n.attrs["value"]
            elif n.kind == "elementwise":
                vals[nid] = _elementwise(n, args)
            elif n.kind == "reduce":
                vals[nid] = _reduce(n, args[0])
            elif n.kind in ("matmul", "batch_matmul"):
                vals[nid] = _matmul(n, *args)
            elif n.kind == "conv2d":
                vals[nid] = _conv2d(n, *args)
            elif n.kind == "pad":
                vals[nid] = np.pad(args[0], list(zip(n.attrs["low"], n.attrs["high"])),
                                   constant_values=np.asarray(n.attrs["value"], n.dtype))
            elif n.kind == "reshape":
                vals[nid] = args[0].reshape(n.shape)
            elif n.kind == "transpose":
                vals[nid] = args[0].transpose(n.attrs["perm"])
            else:
                raise AssertionError(f"no reference for node kind {n.kind!r}")
    return tuple(np.array(vals[k], dtype=nodes[k].dtype, copy=True) for k in outputs)

