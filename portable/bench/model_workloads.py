"""Model workloads (`portable bench --models`): whole networks from the repository's `models/cv.py`, exported to
ONNX at bench time with PyTorch, so every peer runs the same weights.

- portable compiles the ONNX file (its ONNX frontend, then the usual pipeline) per device;
- onnxruntime (CPUExecutionProvider) runs the same file and is the reference every output is checked against
  (numpy has no form of a whole network);
- PyTorch runs the module the file was exported from (same state dict), eager, on CUDA where the host has it.

Needs torch (and onnx) when the run starts; without them the model workloads are skipped with the reason.
`models/` is a folder of the checkout, not part of the installed package: it is found beside `portable/`.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np

ONNX_FILE, WEIGHTS_FILE = "model.onnx", "model.pt"


class ModelUnavailable(Exception):
    """The model workloads cannot be built here (no torch, no models/ folder)."""


def load_cv():
    """The `models.cv` module of this checkout; ModelUnavailable says what is missing."""
    try:
        import torch  # noqa: F401
    except ImportError as e:
        raise ModelUnavailable(f"the model workloads are built with PyTorch, which is not installed ({e}); "
                               f"pip install torch (CPU wheels are enough)") from e
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError as e:
        raise ModelUnavailable(f"the model workloads need onnx (export) and onnxruntime (the reference) ({e}); "
                               f"pip install -e '.[bench]'") from e
    root = Path(__file__).resolve().parents[2]
    if not (root / "models" / "cv.py").exists():
        raise ModelUnavailable(f"{root / 'models' / 'cv.py'} not found: the model workloads need the repository "
                               f"checkout (models/ is not installed with the package)")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return importlib.import_module("models.cv")


def build_module(params: dict, seed: int = 0):
    """The torch module of a model workload in eval mode: He init under `seed`, calibrated BatchNorm."""
    cv = load_cv()
    import torch

    torch.manual_seed(seed)
    if params["arch"] != "resnet":
        raise KeyError(params["arch"])
    block = {"bottleneck": cv.Bottleneck, "basic": cv.BasicBlock}[params["block"]]
    model = cv.init_weights(cv.ResNet(block, tuple(params["depths"]), params["width"], params["classes"]))
    return cv.calibrate_batchnorm(model, (1, 3, params["hw"], params["hw"]), seed + 1, batches=2, batch=4)


def export(params: dict, out_dir: Path) -> tuple[Path, Path]:
    """Build the model, export it to out_dir/model.onnx (BatchNorm folded, as deployed) and save its state dict
    to out_dir/model.pt for the PyTorch peer. Returns both paths."""
    import torch

    cv = load_cv()
    model = build_module(params)
    shape = (params["n"], 3, params["hw"], params["hw"])
    onnx_path = cv.export_onnx(model, shape, Path(out_dir) / ONNX_FILE, keep_batchnorm=False)
    torch.save(model.state_dict(), Path(out_dir) / WEIGHTS_FILE)
    return onnx_path, Path(out_dir) / WEIGHTS_FILE


def load_module(params: dict, weights: Path):
    """The torch module with the exported weights (no calibration run: the saved state dict is loaded)."""
    cv = load_cv()
    import torch

    block = {"bottleneck": cv.Bottleneck, "basic": cv.BasicBlock}[params["block"]]
    model = cv.ResNet(block, tuple(params["depths"]), params["width"], params["classes"])
    model.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
    return model.eval()


def onnx_cost(path: Path) -> tuple[float, float]:
    """(flops, weight bytes) of an exported model: 2 x multiply-adds of its Conv and Gemm nodes (shapes from
    onnx shape inference), and the bytes of its initializers."""
    import onnx
    from onnx import numpy_helper, shape_inference

    m = shape_inference.infer_shapes(onnx.load(str(path)))
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(m.graph.value_info) + list(m.graph.output) + list(m.graph.input)}
    inits = {t.name: t for t in m.graph.initializer}
    for t in inits.values():
        shapes[t.name] = list(t.dims)
    flops = 0.0
    for n in m.graph.node:
        if n.op_type == "Conv":
            w, y = shapes[n.input[1]], shapes[n.output[0]]
            flops += 2.0 * float(np.prod(y)) * float(np.prod(w[1:]))
        elif n.op_type == "Gemm":
            a, y = shapes[n.input[0]], shapes[n.output[0]]
            flops += 2.0 * float(np.prod(y)) * a[-1]
    weights = float(sum(numpy_helper.to_array(t).nbytes for t in inits.values()))
    return flops, weights


def ort_reference(path: Path, x: np.ndarray) -> np.ndarray:
    """onnxruntime's output of the model on `x`: the reference of a model workload."""
    import onnxruntime as ort

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]
