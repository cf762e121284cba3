"""CV models exported from their architecture definitions (models/cv.py: MobileNetV2, ResNet with basic and
bottleneck blocks, BatchNorm with calibrated running statistics), end to end on every device against
onnxruntime on the same weights and input, plus a bound on the number of kernels each compiles to.

The .onnx files are committed (models/onnx/, regenerated with `python -m models.cv`), so no PyTorch is needed.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest

import portable
from portable import profiles

ONNX_DIR = Path(__file__).resolve().parents[1] / "models" / "onnx"
MODELS = ["mobilenetv2_w035_96", "resnet_basic_w16_64", "resnet_bottleneck_w8_64"]
MAX_FILE_BYTES = 1_600_000  # small enough to commit; weights inside the file

# f32 tolerance: |out - ref| <= RTOL * |ref| + ATOL * max|ref|. The two sides sum convolutions in different
# orders (and portable folds BN differently from onnxruntime), so about 1e-6 relative is expected; the
# margin covers other drivers' FMA contraction and reduction orders.
RTOL, ATOL = 1e-3, 1e-4


def _ort():
    try:
        import onnxruntime
    except ImportError as e:
        pytest.skip(f"onnxruntime is the reference here and is not installed ({e}): pip install -e '.[test]'")
    return onnxruntime


def _model_path(name: str) -> Path:
    p = ONNX_DIR / f"{name}.onnx"
    if not p.exists():
        pytest.fail(f"{p} is missing: regenerate the models with `python -m models.cv` (needs torch)")
    return p


def kernel_bound(model: onnx.ModelProto, pixel_multiple: int = 0, winograd: bool = False) -> int:
    """Dispatches the model should run at most: one per Conv, MaxPool, pooling/mean reduction and Gemm,
    plus one per Conv that reads its input through a gather (the im2col patch matrix of any Conv but a 1x1
    stride-1 unpadded one; the pad of a direct or depthwise Conv) and one per padded MaxPool. BatchNormalization,
    Relu, Clip (ReLU6), residual Add, Flatten and the conv and Gemm biases are fused into those kernels: an
    extra kernel for any of them is a fusion regression. (Before convolutions became implicit GEMMs, strided
    1x1 convolutions ran direct with no gather: 3 kernels fewer on the ResNets, each 10-100x slower.)
    `pixel_multiple` (the device profile's conv_pixel_multiple): a convolution whose output pixels are ragged for
    it multiplies in the transposed form (compiler/graph/conv_gemm.py), one kernel more to transpose the product
    back, and one more for a 1x1 convolution, whose input is then copied. `winograd` (conv_winograd): a 3x3
    stride-1 convolution that takes Winograd's form (compiler/graph/winograd.py) runs five kernels (the input as
    NHWC, its transform, the products, the output transform, the transpose back with the epilogue), three more
    than im2col + matmul."""
    ops = Counter(n.op_type for n in model.graph.node)

    def ints(n, name):
        return next((list(a.ints) for a in n.attribute if a.name == name), [])

    gathered = sum(1 for n in model.graph.node if n.op_type == "Conv" and
                   (any(ints(n, "pads")) or any(s != 1 for s in ints(n, "strides")) or
                    any(k != 1 for k in ints(n, "kernel_shape"))))
    if pixel_multiple or winograd:
        from portable.compiler.graph import winograd as wino

        shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
                  for v in onnx.shape_inference.infer_shapes(model).graph.value_info}
        weights = {t.name: list(t.dims) for t in model.graph.initializer}
        for n in model.graph.node:
            group = next((a.i for a in n.attribute if a.name == "group"), 1)
            if n.op_type != "Conv" or n.output[0] not in shapes or group != 1:
                continue
            out = shapes[n.output[0]]
            f, c = weights[n.input[1]][:2]
            if winograd and ints(n, "kernel_shape") == [3, 3] and set(ints(n, "strides") or [1]) == {1} and \
                    set(ints(n, "dilations") or [1]) == {1} and wino.worth_it(c, f, out[2], out[3]):
                gathered += 3
                continue
            plain_view = not (any(ints(n, "pads")) or any(s != 1 for s in ints(n, "strides")) or
                              any(k != 1 for k in ints(n, "kernel_shape")))
            p = int(np.prod(out[2:]))
            if pixel_multiple and p >= pixel_multiple and p % pixel_multiple and (not plain_view or p % 4):
                gathered += 2 if plain_view else 1  # a 1x1's input is copied (gathered) as well
    padded_pools = sum(1 for n in model.graph.node if n.op_type == "MaxPool" and any(ints(n, "pads")))
    return sum(ops[k] for k in ("Conv", "MaxPool", "GlobalAveragePool", "ReduceMean", "Gemm")) + gathered + padded_pools


@pytest.fixture(scope="module", params=MODELS)
def case(request):
    """(name, path, input, onnxruntime output) per model, computed once."""
    ort = _ort()
    name = request.param
    path = _model_path(name)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (inp,) = sess.get_inputs()
    x = np.random.default_rng(1234).standard_normal(inp.shape, dtype=np.float32)
    (ref,) = sess.run(None, {inp.name: x})
    return name, path, x, ref


def test_models_are_committable_and_input_dependent(case):
    """Each file is small, self-contained and standard; its output really depends on its input (a network
    whose activations die out would pass any comparison)."""
    name, path, x, ref = case
    assert path.stat().st_size < MAX_FILE_BYTES, f"{path} is {path.stat().st_size} bytes"
    m = onnx.load(str(path), load_external_data=False)
    assert not any(t.data_location == onnx.TensorProto.EXTERNAL for t in m.graph.initializer)
    assert {o.domain for o in m.opset_import} <= {"", "ai.onnx"} and m.opset_import[0].version >= 17
    dims = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    assert all(d > 0 for d in dims) and tuple(dims) == x.shape  # static shapes
    ops = {n.op_type for n in m.graph.node}
    assert "Conv" in ops and "Gemm" in ops
    if name != "resnet_bottleneck_w8_64":  # exported with BatchNormalization nodes kept (the other has them folded)
        assert "BatchNormalization" in ops
    ort = _ort()
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    other = sess.run(None, {sess.get_inputs()[0].name: np.flip(x, axis=(2, 3)).copy() * 0.5 + 0.25})[0]
    assert np.abs(other - ref).max() > 0.1 * np.abs(ref).max(), "the logits barely depend on the input"


def test_model_matches_onnxruntime(device, case, record_property):
    name, path, x, ref = case
    exe = portable.compile(str(path), device=device)
    profile = exe.device.profile["name"]
    try:
        (out,) = exe(x)
        n_kernels, n_dispatches = len(exe.executable.kernels), len(exe.executable.dispatches)
        used = {d.kernel for d in exe.executable.dispatches}
    finally:
        exe.close()
    assert out.shape == ref.shape and out.dtype == np.float32
    scale = float(np.abs(ref).max())
    np.testing.assert_allclose(out, ref, rtol=RTOL, atol=ATOL * scale, err_msg=f"{name} on {device}")
    codegen = profiles.all_profiles()[profile].codegen
    bound = kernel_bound(onnx.load(str(path)), codegen.conv_pixel_multiple or 0, bool(codegen.conv_winograd))
    record_property("kernels", n_kernels)
    record_property("dispatches", n_dispatches)
    print(f"{name} on {device}: {n_kernels} distinct kernels, {n_dispatches} dispatches (bound {bound})")
    assert n_dispatches <= bound, f"{name} runs {n_dispatches} dispatches, more than {bound}: a fusion regression?"
    assert used == set(range(n_kernels))  # repeated layers share a kernel; every kernel runs
