"""3x3 stride-1 convolutions as Winograd F(2x2, 3x3) (compiler/graph/winograd.py, the profile's conv_winograd):
the transforms' algebra in numpy, which convolutions take the form (IR after convs_to_matmul), and the values on
every device against a float64 reference, with bias, ReLU and a residual add in the last kernel."""

from __future__ import annotations

import numpy as np
import pytest

from portable.compiler.graph import winograd

pytest.importorskip("onnx", reason="the models here are built with 'onnx' (pip install 'portable[onnx]')")
from test_conv_gemm import _check, _run, conv_model  # noqa: E402

BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], dtype=np.float64)
AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], dtype=np.float64)


def test_transforms_reproduce_the_direct_convolution():
    """U from filter_transform, V = B^T d B, out = A^T (sum_c U V) A on one 4x4 tile equals the 2x2 direct
    correlation: the filter transform's layout (16, C, F) and its G are right."""
    rng = np.random.default_rng(0)
    c, f = 3, 5
    g = rng.standard_normal((f, c, 3, 3))
    d = rng.standard_normal((c, 4, 4))
    u = winograd.filter_transform(g).reshape(4, 4, c, f)
    v = np.einsum("ai,cij,bj->abc", BT, d, BT)
    m = np.einsum("abc,abcf->fab", v, u)
    out = np.einsum("ra,fab,sb->frs", AT, m, AT)
    want = np.array([[[sum(g[q, ch, i, j] * d[ch, r + i, s + j] for ch in range(c) for i in range(3) for j in range(3))
                       for s in range(2)] for r in range(2)] for q in range(f)])
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)


def _forms(model) -> list[str]:
    """After convs_to_matmul with Winograd on: 'winograd' per convolution that took it (a (16, C, F) filter
    constant read by a batched matmul), 'gemm' per im2col/1x1 matmul, 'direct' per convolution left as is."""
    from portable.compiler.graph import conv_gemm
    from portable.compiler.pipeline import PREPROCESS, public_func
    from portable.frontend.onnx_import import onnx_to_mlir
    from portable.ir import weights
    from portable.ir.linalg_info import classify
    from portable.ir.mlir import ir, passmanager

    with ir.Context(), ir.Location.unknown():
        module = weights.parse(onnx_to_mlir(model))
        passmanager.PassManager.parse(PREPROCESS).run(module.operation)
        fn = public_func(module)
        conv_gemm.convs_to_matmul(fn, 1 << 30, 0, 0, winograd=True)
        out = []
        for op in fn.regions[0].blocks[0].operations:
            if op.name == "linalg.matmul":
                out.append("gemm")
            elif op.name == "linalg.generic" and classify(op).kind == "matmul":
                shapes = [list(ir.RankedTensorType(v.type).shape) for v in op.operands[:2]]
                out.append("winograd" if shapes[1][0] == 16 and len(shapes[1]) == 3 else "gemm")
            elif op.name == "linalg.generic" and "conv" in str(op.attributes).lower():
                out.append("direct")
        return out


@pytest.mark.parametrize("n,c,hw,f,k,stride,dil,group,form", [
    (1, 16, 8, 16, 3, 1, 1, 1, "winograd"),
    (1, 32, 7, 64, 3, 1, 1, 1, "winograd"),  # ResNet's last stage: 16 tiles for 49 pixels
    (1, 16, 8, 16, 3, 2, 1, 1, "gemm"),      # stride 2
    (1, 16, 12, 16, 3, 1, 2, 1, "gemm"),     # dilated
    (2, 16, 8, 16, 3, 1, 1, 1, "winograd"),  # two images: their tiles are the matmuls' rows together
    (1, 8, 8, 16, 3, 1, 1, 1, "gemm"),       # too few channels to pay
    (1, 16, 3, 16, 3, 1, 1, 1, "gemm"),      # 3x3 output: tiles half empty
    (1, 16, 8, 16, 5, 1, 1, 1, "gemm"),      # 5x5
    (1, 32, 8, 32, 3, 1, 1, 2, "gemm"),      # grouped
])
def test_which_convolutions_take_winograd(n, c, hw, f, k, stride, dil, group, form):
    model, _, _ = conv_model(n, c, hw, hw, f, k, stride=stride, pad=dil * (k // 2), dil=dil, group=group)
    assert _forms(model) == [form]


# (n, c, h, w, f, pad, bias, residual): 'same' padding, odd outputs (a half-used last tile row and column), no
# padding (a valid convolution reads only inside the image), asymmetric sizes, a batch of three.
VALUES = {
    "same_8x8": (1, 16, 8, 8, 16, 1, True, False),
    "odd_9x13": (1, 24, 9, 13, 32, 1, True, True),
    "valid_10x11": (1, 16, 10, 11, 24, 0, False, False),
    "resnet_7x7": (1, 32, 7, 7, 48, 1, True, True),
    "batch3_odd": (3, 16, 7, 9, 16, 1, True, True),
}


@pytest.mark.parametrize("case", list(VALUES))
def test_winograd_values(device, case):
    n, c, h, w, f, pad, bias, residual = VALUES[case]
    model, feeds, ref = conv_model(n, c, h, w, f, 3, pad=pad, bias=bias, relu=True, residual=residual, seed=3)
    (out,), count = _run(model, feeds, device, conv_winograd=True, conv_pixel_multiple=0)
    _check(out, ref)
    # The input as HWC, its transform, the 16 products, the output transform, and the transpose back to NCHW with
    # the bias, ReLU and residual add in it.
    assert count == 5, f"{count} kernels"
