"""Pad in modes 'reflect', 'edge' and 'wrap' as Gathers with constant indices, one per padded axis.

torch-mlir lowers a reflection pad to slices plus a `linalg.generic` that reads its input through a reversed
index map (`d -> 63 - d`); upstream tiling sizes the input slice of such a map as if it grew with the tile
(`map(size - 1) + 1`), so a tiled reversed read asks for more elements than the slice has and the
compiler refuses it. Shapes are static here, so the source index of every padded position is known at compile
time (numpy's pad of an iota gives exactly ONNX's definition) and the pad is a plain gather that tiles like any
other. Negative pads (crops) fall out of the same tables. Mode 'constant' stays with torch-mlir's lowering.
"""

from __future__ import annotations

import numpy as np

from .onnx_decompose import Builder, rewrite

_NUMPY_MODE = {"reflect": "reflect", "edge": "edge", "wrap": "wrap"}


def _pads_and_axes(node, b: Builder, rank: int) -> tuple[list[int], list[int]] | None:
    """(pads as [begin..., end...], the axes they apply to), or None when they are computed at run time."""
    if len(node.input) > 1 and node.input[1]:
        pads = b.const(node.input[1])
        if pads is None:
            return None
        pads = [int(p) for p in np.asarray(pads).reshape(-1)]
    else:  # Pad-1 ('paddings') and Pad-2 ('pads'): attributes
        pads = [int(p) for p in (b.attr("pads") or b.attr("paddings") or [])]
    axes = list(range(rank))
    if len(node.input) > 3 and node.input[3]:
        given = b.const(node.input[3])
        if given is None:
            return None
        axes = [int(a) + rank if int(a) < 0 else int(a) for a in np.asarray(given).reshape(-1)]
    if len(pads) != 2 * len(axes) or not all(0 <= a < rank for a in axes):
        return None  # malformed: shape inference reports it
    return pads, axes


def source_indices(size: int, begin: int, end: int, mode: str) -> np.ndarray:
    """Index into an axis of `size` elements of every element of the padded axis (ONNX Pad's definition)."""
    grow = np.pad(np.arange(size, dtype=np.int64), (max(begin, 0), max(end, 0)), mode=_NUMPY_MODE[mode])
    return grow[max(-begin, 0):len(grow) - max(-end, 0)]


@rewrite("Pad")
def _pad_by_gather(node, b: Builder) -> bool:
    mode = b.attr("mode", "constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode not in _NUMPY_MODE:
        return False
    x = node.input[0]
    shape = b.shape(x)
    if shape is None:
        return False
    found = _pads_and_axes(node, b, len(shape))
    if found is None:
        return False
    pads, axes = found
    half = len(axes)
    padded = [(a, pads[i], pads[half + i]) for i, a in enumerate(axes) if pads[i] or pads[half + i]]
    if any(shape[a] == 0 for a, _, _ in padded):
        return False  # nothing to reflect or repeat: onnxruntime refuses it, torch-mlir reports it
    if any(shape[a] + lo + hi < 0 for a, lo, hi in padded):
        return False  # cropped past nothing: shape inference reports it
    b.note = f"mode '{mode}' as constant-index Gathers (a reversed-index read does not tile)"
    if not padded:
        b.op("Identity", [x], [node.output[0]])
        return True
    for k, (axis, lo, hi) in enumerate(padded):
        idx = b.constant(source_indices(int(shape[axis]), lo, hi, mode), f"{mode}_indices")
        last = k == len(padded) - 1
        x = b.op("Gather", [x, idx], [node.output[0]] if last else 1, axis=axis)
    return True


__all__ = ["source_indices"]
