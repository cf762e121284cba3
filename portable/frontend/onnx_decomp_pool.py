"""MaxPool and AveragePool where torch-mlir's lowering fails or disagrees with onnxruntime, rewritten into an
explicit Pad and a pool with no padding and floor rounding (which torch-mlir lowers to a pooling named op), plus a
constant divisor for an average or an index correction for MaxPool's Indices. Every other case (asymmetric pads,
auto_pad, dilations, count_include_pad, 1-D to 3-D) is left to torch-mlir, which gets it right; the choice is made
from the attributes and static shapes, before import:

- ceil_mode=1 with a last window that would start in the end padding: onnxruntime and ONNX's reference drop that
  window (as PyTorch does), ONNX shape inference keeps it. torch-mlir's MaxPool then fails to legalize and its
  AveragePool returns the extra window. Here: the size onnxruntime computes; the model's shapes are inferred again.
- AveragePool count_include_pad=1 whose ceil_mode windows reach past the padded input: torch-mlir divides by the
  whole kernel, onnxruntime by the part of the window inside the padded input.
- MaxPool's Indices output: torch-mlir numbers positions within one plane of the tensor it padded, ONNX over the
  whole unpadded input (batch and channel planes before it), column-major within the plane for storage_order=1
  (which torch-mlir refuses). Here: the pool runs on an explicitly padded input and the positions map back.
- MaxPool on uint8: torch-mlir compares (and pads) as signed int8. Here: through float32, which holds uint8 exactly.
"""

from __future__ import annotations

import numpy as np

from .onnx_decompose import Builder, rewrite

_FLOAT, _UINT8 = 1, 2  # onnx.TensorProto element types


class _Geometry:
    """Per spatial dim: kernel, stride, dilation, begin/end pads, and the output size onnxruntime computes."""

    def __init__(self, b: Builder, spatial: tuple):
        n = len(spatial)
        self.kernel = [int(k) for k in b.attr("kernel_shape", [])]
        if len(self.kernel) != n:
            b.fail(f"kernel_shape {self.kernel} does not match {n} spatial dims")
        self.strides = [int(s) for s in b.attr("strides", None) or [1] * n]
        self.dilations = [int(d) for d in b.attr("dilations", None) or [1] * n]
        auto_pad = b.attr("auto_pad", b"NOTSET")
        auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
        pads = [int(p) for p in b.attr("pads", None) or [0] * (2 * n)]
        ceil = bool(b.attr("ceil_mode", 0))
        self.spatial, self.begin, self.end, self.out = list(spatial), [], [], []
        self.drops = False  # a ceil_mode window dropped for starting in the end padding
        for i, size in enumerate(spatial):
            s, span = self.strides[i], self.span(i)
            if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
                out = -(-size // s)
                total = max((out - 1) * s + span - size, 0)
                lo = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
                hi = total - lo
            elif auto_pad == "VALID":
                lo, hi, out = 0, 0, (size - span) // s + 1
            elif auto_pad == "NOTSET":
                lo, hi = pads[i], pads[n + i]
                room = size + lo + hi - span
                out = (-(-room // s) if ceil else room // s) + 1
                if ceil and (out - 1) * s >= size + lo:
                    out -= 1
                    self.drops = True
            else:
                b.fail(f"auto_pad '{auto_pad}' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID")
            if out < 1:
                b.fail(f"the window ({span} wide with pads {lo}, {hi}) does not fit spatial dim {i} of size {size}")
            self.begin.append(lo)
            self.end.append(hi)
            self.out.append(out)

    def span(self, i: int) -> int:
        return self.dilations[i] * (self.kernel[i] - 1) + 1

    def reach(self, i: int) -> int:
        """End pad the last window needs (0 when it ends inside the padded input)."""
        return max((self.out[i] - 1) * self.strides[i] + self.span(i) - self.spatial[i] - self.begin[i], 0)

    def overhangs(self) -> bool:
        """Some window reaches past the padded input (only ceil_mode makes one)."""
        return any(self.reach(i) > self.end[i] for i in range(len(self.spatial)))

    def taps(self, i: int, lo: int, hi: int) -> np.ndarray:
        """Per output position along dim i: the window's taps that land in [lo, hi) of input coordinates."""
        start = np.arange(self.out[i])[:, None] * self.strides[i] - self.begin[i]
        at = start + np.arange(self.kernel[i])[None, :] * self.dilations[i]
        return ((at >= lo) & (at < hi)).sum(axis=1)


def _padded(b: Builder, x: str, g: _Geometry, value, np_dtype) -> str:
    """x with the begin pads and the end pads the windows reach, filled with `value`."""
    n = len(g.spatial)
    ends = [g.reach(i) for i in range(n)]
    if not any(g.begin) and not any(ends):
        return x
    pads = np.array([0, 0] + g.begin + [0, 0] + ends, np.int64)
    fill = b.constant(np.array(value, np_dtype), "pad_value")
    return b.op("Pad", [x, b.constant(pads, "pads"), fill], mode="constant")


def _window_attrs(g: _Geometry) -> dict:
    attrs = {"kernel_shape": g.kernel, "strides": g.strides}
    if any(d != 1 for d in g.dilations):
        attrs["dilations"] = g.dilations
    return attrs


@rewrite("MaxPool")
def _max_pool(node, b: Builder) -> bool:
    x, y = node.input[0], node.output[0]
    shape = b.static_shape(x)
    g = _Geometry(b, shape[2:])
    elem_type = b.elem_type(x)
    indices = len(node.output) > 1 and bool(node.output[1])
    column_major = int(b.attr("storage_order", 0)) == 1
    unsigned = elem_type == _UINT8
    if not (g.drops or indices or unsigned):
        return False
    why = []
    if g.drops:
        why.append("a ceil_mode window starts in the end padding (onnxruntime drops it; torch-mlir fails)")
    if indices:
        why.append("Indices counted over the whole tensor" + (", column-major" if column_major else ""))
    if unsigned:
        why.append("uint8 compared unsigned (through float32)")
    src = b.op("Cast", [x], to=_FLOAT) if unsigned else x
    np_dtype = np.dtype(np.float32) if unsigned else b.np_dtype(x)
    low = -np.inf if np.issubdtype(np_dtype, np.floating) else np.iinfo(np_dtype).min
    padded = _padded(b, src, g, low, np_dtype)
    out_shape = list(shape[:2]) + g.out
    pooled = b.fresh("pooled") if unsigned else y
    if indices:
        # torch-mlir numbers positions within one plane of the tensor it pools: here the padded one, whose
        # geometry is known, so they map back exactly.
        plane = b.fresh("plane_indices")
        b.op("MaxPool", [padded], [pooled, plane], **_window_attrs(g))
        _flat_indices(b, plane, node.output[1], shape, g, column_major)
        b.set_shape(node.output[1], tuple(out_shape))
    else:
        b.op("MaxPool", [padded], [pooled], **_window_attrs(g))
    if unsigned:
        b.op("Cast", [pooled], [y], to=_UINT8)
    b.note = f"Pad({low}) + MaxPool{' + index arithmetic' if indices else ''}: " + "; ".join(why)
    b.set_shape(y, tuple(out_shape))
    return True


def _flat_indices(b: Builder, plane: str, out: str, shape, g: _Geometry, column_major: bool) -> None:
    """ONNX's Indices (flat over the whole input, spatial order row- or column-major) from positions within one
    plane of the padded input (row-major)."""
    spatial = [int(s) for s in shape[2:]]
    n = len(spatial)
    padded = [spatial[i] + g.begin[i] + g.reach(i) for i in range(n)]
    in_padded = [int(np.prod(padded[i + 1:])) for i in range(n)]
    steps = [int(np.prod(spatial[:i])) for i in range(n)] if column_major else \
        [int(np.prod(spatial[i + 1:])) for i in range(n)]
    flat = plane
    if padded != spatial or steps != in_padded:
        # Coordinate i of the padded plane is (p / in_padded[i]) % padded[i]; its begin pad is subtracted below.
        terms = []
        for i in range(n):
            q = b.op("Div", [plane, b.constant(np.array(in_padded[i], np.int64), "stride")]) if in_padded[i] > 1 \
                else plane
            if i > 0:
                q = b.op("Mod", [q, b.constant(np.array(padded[i], np.int64), "extent")])
            terms.append(q if steps[i] == 1 else b.op("Mul", [q, b.constant(np.array(steps[i], np.int64), "step")]))
        flat = terms[0]
        for t in terms[1:]:
            flat = b.op("Add", [flat, t])
    nc = int(shape[0]) * int(shape[1])
    shift = int(np.prod(spatial)) * np.arange(nc, dtype=np.int64) - sum(g.begin[i] * steps[i] for i in range(n))
    b.op("Add", [flat, b.constant(shift.reshape([int(shape[0]), int(shape[1])] + [1] * n), "plane_offsets")], [out])


@rewrite("AveragePool")
def _average_pool(node, b: Builder) -> bool:
    x, y = node.input[0], node.output[0]
    shape = b.static_shape(x)
    g = _Geometry(b, shape[2:])
    include_pad = int(b.attr("count_include_pad", 0)) == 1
    overhang = include_pad and g.overhangs()
    if not (g.drops or overhang):
        return False
    np_dtype = b.np_dtype(x)
    if np_dtype is None or not np.issubdtype(np_dtype, np.floating):
        b.fail(f"input '{x}' is not a floating-point tensor")
    # The divisor of each window: its taps inside the padded input (count_include_pad=1) or inside the input.
    n = len(g.spatial)
    counts = np.ones(g.out, np.float64)
    for i in range(n):
        lo, hi = (-g.begin[i], g.spatial[i] + g.end[i]) if include_pad else (0, g.spatial[i])
        counts = counts * g.taps(i, lo, hi).reshape([-1 if j == i else 1 for j in range(n)])
    if not counts.all():
        b.fail("a pooling window lies wholly in the padding (no element to average)")
    window = float(np.prod(g.kernel))
    padded = _padded(b, x, g, 0.0, np_dtype)
    scale = (window / counts).reshape([1, 1] + g.out)
    if np.all(scale == 1.0):
        b.op("AveragePool", [padded], [y], **_window_attrs(g))
    else:
        mean = b.op("AveragePool", [padded], **_window_attrs(g))
        b.op("Mul", [mean, b.constant(scale.astype(np_dtype), "window_scale")], [y])
    why = []
    if g.drops:
        why.append("a ceil_mode window starts in the end padding (onnxruntime drops it)")
    if overhang:
        why.append("count_include_pad=1 windows reach past the padded input (divided by their taps inside it)")
    b.note = "Pad(0) + AveragePool + divisor: " + "; ".join(why)
    b.set_shape(y, tuple(list(shape[:2]) + g.out))
    return True


__all__: list[str] = []
