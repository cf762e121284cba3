"""conv2d for the Graph builder: argument checks, padding rules, and the nodes it becomes
(tensor.pad, then linalg.conv_2d_nhwc_hwcf or linalg.conv_2d_nchw_fchw, then a bias generic)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import ShapeMismatch, UnsupportedOp
from .graph_ir import Instr

if TYPE_CHECKING:
    from .graph import Graph, Tensor


def _pair(op: str, name: str, v) -> tuple[int, int]:
    p = (v, v) if isinstance(v, (int, np.integer)) else tuple(v)
    if len(p) != 2 or any(not isinstance(k, (int, np.integer)) or k < 1 for k in p):
        raise ShapeMismatch(f"{op}: {name}={v!r} must be an int >= 1 or a pair of them")
    return int(p[0]), int(p[1])


def _padding(op: str, padding, size: tuple[int, int], k: tuple[int, int], stride, dilation):
    """((top, bottom), (left, right)). "same" gives ceil(size/stride) outputs, extra padding at the end
    (ONNX SAME_UPPER, TensorFlow SAME)."""
    if padding == "valid":
        return ((0, 0), (0, 0))
    if padding == "same":
        out = []
        for n, kk, s, d in zip(size, k, stride, dilation):
            total = max((-(-n // s) - 1) * s + (kk - 1) * d + 1 - n, 0)
            out.append((total // 2, total - total // 2))
        return tuple(out)
    def is_int(v) -> bool:
        return isinstance(v, (int, np.integer))

    p = (padding, padding) if is_int(padding) else tuple(padding)
    if len(p) == 2 and all(is_int(v) for v in p):
        p = ((p[0], p[0]), (p[1], p[1]))
    if len(p) != 2 or any(not isinstance(q, (tuple, list)) or len(q) != 2 or any(not is_int(v) or v < 0 for v in q)
                          for q in p):
        raise ShapeMismatch(f"{op}: padding={padding!r} must be an int, (ph, pw), ((top, bottom), (left, right)) "
                            f"of ints >= 0, 'same' or 'valid'")
    return tuple((int(a), int(b)) for a, b in p)


def conv2d(g: Graph, x: Tensor, w: Tensor, bias: Tensor | None, stride, padding, dilation, layout: str) -> Tensor:
    op = "conv2d"
    g._check(op, x, w, *([bias] if bias is not None else []))
    if layout not in ("NHWC", "NCHW"):
        raise UnsupportedOp(f"{op}: layout={layout!r}; use 'NHWC' (weights HWCF) or 'NCHW' (weights FCHW)")
    what = f"{op}: x is {x.shape} {x.dtype}, w is {w.shape} {w.dtype} ({layout}, weights " \
           f"{'HWCF' if layout == 'NHWC' else 'FCHW'})"
    if x.ndim != 4 or w.ndim != 4:
        raise ShapeMismatch(f"{what}; both must be 4-D")
    if x.dtype != w.dtype or (bias is not None and bias.dtype != x.dtype):
        raise ShapeMismatch(f"{what}; dtypes differ, insert g.cast so input, weights and bias agree")
    if layout == "NHWC":
        (n, h, wd, c), (kh, kw, wc, f) = x.shape, w.shape
    else:
        (n, c, h, wd), (f, wc, kh, kw) = x.shape, w.shape
    if c != wc:
        raise ShapeMismatch(f"{what}; input has {c} channels but the weights expect {wc}; groups are not "
                            f"supported, so they must be equal")
    if bias is not None and bias.shape != (f,):
        raise ShapeMismatch(f"{what}; bias is {bias.shape} but must be ({f},), one per output channel")
    stride, dilation = _pair(op, "stride", stride), _pair(op, "dilation", dilation)
    (pt, pb), (pl, pr) = _padding(op, padding, (h, wd), (kh, kw), stride, dilation)
    oh = (h + pt + pb - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + pl + pr - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    if oh < 1 or ow < 1:
        raise ShapeMismatch(f"{what}; the (dilated) kernel {kh}x{kw} is larger than the padded input "
                            f"{h + pt + pb}x{wd + pl + pr}; pad more or use a smaller kernel")
    if layout == "NHWC":
        x = g.pad(x, [(0, 0), (pt, pb), (pl, pr), (0, 0)])
        shape, cdim = (n, oh, ow, f), 3
    else:
        x = g.pad(x, [(0, 0), (0, 0), (pt, pb), (pl, pr)])
        shape, cdim = (n, f, oh, ow), 1
    y = g._add("conv2d", [x, w], shape, x.dtype, layout=layout, stride=stride, dilation=dilation)
    if bias is None:
        return y
    prog = (Instr("arg", (), 0), Instr("arg", (), 1), Instr("add", (0, 1)))
    return g._add("elementwise", [y, bias], shape, x.dtype, prog=prog, dims=(tuple(range(4)), (cdim,)),
                  src=x.dtype)
