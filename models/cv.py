"""Convolutional image classifiers written from their published descriptions, for end-to-end model tests.

- MobileNetV2 (Sandler et al. 2018, "Inverted Residuals and Linear Bottlenecks"): a 3x3 stride-2 stem, then
  inverted residual blocks (1x1 expand by t, 3x3 depthwise with stride 1 or 2, 1x1 linear projection; ReLU6
  after the first two; a residual add when the block keeps its shape), a 1x1 conv to the last width, global
  average pooling and a linear classifier. Widths scale by a multiplier and round to a multiple of 8.
- ResNet (He et al. 2015, "Deep Residual Learning"): a 7x7 stride-2 stem + 3x3 stride-2 max pool, four stages
  of basic (3x3, 3x3) or bottleneck (1x1 reduce, 3x3, 1x1 expand by 4) blocks, the first block of a stage
  striding by 2 (except stage 1) with a 1x1 strided projection on the shortcut when the shape changes,
  global average pooling and a fully connected layer. Stride sits on the 3x3 conv of a bottleneck.

    python -m models.cv                 # export the small models to models/onnx/<name>.onnx
    python -m models.cv --list          # what would be exported, with parameter counts

Needs PyTorch (and onnx + onnxscript for the exporter); the tests only read the exported .onnx files.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from portable.zoo.builders import calibrate_batchnorm as _calibrate

ONNX_DIR = Path(__file__).resolve().parent / "onnx"
OPSET = 18


def _round8(v: float, divisor: int = 8) -> int:
    """A channel count scaled by a width multiplier, rounded to a multiple of `divisor` and never more than
    10% below the unrounded value (the MobileNet rule)."""
    r = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return r + divisor if r < 0.9 * v else r


def _conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1, act: type[nn.Module] | None = None):
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
                               nn.BatchNorm2d(cout)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


# ---------------------------------------------------------------------------------------------- MobileNetV2
class InvertedResidual(nn.Module):
    """Expand (1x1, skipped when t == 1) -> depthwise 3x3 -> linear project (1x1); add the input when the
    stride is 1 and the width is unchanged."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        layers: list[nn.Module] = []
        if expand != 1:
            layers.append(_conv_bn(cin, hidden, 1, act=nn.ReLU6))
        layers.append(_conv_bn(hidden, hidden, 3, stride, groups=hidden, act=nn.ReLU6))
        layers.append(_conv_bn(hidden, cout, 1))
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        return x + y if self.residual else y


# (expansion t, output channels c, repeats n, first stride s) of the paper's Table 2.
MOBILENET_V2_STAGES = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                       (6, 320, 1, 1))


class MobileNetV2(nn.Module):
    def __init__(self, width: float = 1.0, num_classes: int = 1000, stages=MOBILENET_V2_STAGES,
                 last_channel: int = 1280, max_repeats: int | None = None):
        """`max_repeats` caps n per stage (a shallower network with every stage still there)."""
        super().__init__()
        cin = _round8(32 * width)
        layers: list[nn.Module] = [_conv_bn(3, cin, 3, 2, act=nn.ReLU6)]
        for t, c, n, s in stages:
            cout = _round8(c * width)
            for i in range(n if max_repeats is None else min(n, max_repeats)):
                layers.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        self.last = _round8(last_channel * width) if width > 1.0 else last_channel  # never thinner
        layers.append(_conv_bn(cin, self.last, 1, act=nn.ReLU6))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(self.last, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = torch.flatten(x.mean(dim=(2, 3), keepdim=True), 1)
        return self.classifier(x)


# ---------------------------------------------------------------------------------------------- ResNet
class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin: int, planes: int, stride: int):
        super().__init__()
        self.conv1 = _conv_bn(cin, planes, 3, stride, act=nn.ReLU)
        self.conv2 = _conv_bn(planes, planes, 3)
        out = planes * self.expansion
        self.shortcut = _conv_bn(cin, out, 1, stride) if stride != 1 or cin != out else nn.Identity()
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.conv2(self.conv1(x)) + self.shortcut(x))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int):
        super().__init__()
        out = planes * self.expansion
        self.conv1 = _conv_bn(cin, planes, 1, act=nn.ReLU)
        self.conv2 = _conv_bn(planes, planes, 3, stride, act=nn.ReLU)
        self.conv3 = _conv_bn(planes, out, 1)
        self.shortcut = _conv_bn(cin, out, 1, stride) if stride != 1 or cin != out else nn.Identity()
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.conv3(self.conv2(self.conv1(x))) + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, block: type[BasicBlock | Bottleneck], depths=(2, 2, 2, 2), base_width: int = 64,
                 num_classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(_conv_bn(3, base_width, 7, 2, act=nn.ReLU), nn.MaxPool2d(3, 2, 1))
        stages: list[nn.Module] = []
        cin = base_width
        for i, n in enumerate(depths):
            planes = base_width * 2 ** i
            blocks = []
            for j in range(n):
                blocks.append(block(cin, planes, 2 if (j == 0 and i > 0) else 1))
                cin = planes * block.expansion
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def resnet50(num_classes: int = 1000) -> ResNet:
    """The full ResNet-50: bottleneck blocks 3-4-6-3, base width 64 (25.6 M parameters)."""
    return ResNet(Bottleneck, (3, 4, 6, 3), 64, num_classes)


# ---------------------------------------------------------------------------------------------- weights, export
def init_weights(model: nn.Module) -> nn.Module:
    """The initialisation both papers' networks train from: He normal (fan out) for convolutions, N(0, 0.01)
    for the classifier with zero bias. torch's default conv init shrinks activations layer by layer, so a
    randomly initialised deep network would answer nearly the same logits for every input (and a test of it
    would check the classifier's bias, not the network)."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, 0.01)
            nn.init.zeros_(m.bias)
    return model


def calibrate_batchnorm(model: nn.Module, input_shape: tuple[int, ...], seed: int, batches: int = 4,
                        batch: int = 8) -> nn.Module:
    """Every BatchNorm given real running statistics and non-trivial affine parameters, then eval mode
    (the zoo's calibration: portable/zoo/builders.py)."""
    return _calibrate(model, input_shape, batches=batches, batch=batch, seed=seed)


@dataclass(frozen=True)
class Spec:
    """One exported model: how to build it and the input it is exported (and tested) at."""

    name: str
    build: object  # () -> nn.Module
    input_shape: tuple[int, int, int, int]
    about: str
    keep_batchnorm: bool  # BatchNormalization nodes in the ONNX file (else folded into the Conv weights)


SMALL_MODELS = (
    Spec("mobilenetv2_w035_96", lambda: MobileNetV2(0.35, num_classes=100, last_channel=320, max_repeats=2),
         (1, 3, 96, 96), "MobileNetV2 x0.35, every stage with at most 2 blocks, last width 320, 100 classes",
         keep_batchnorm=True),
    Spec("resnet_basic_w16_64", lambda: ResNet(BasicBlock, (1, 1, 1, 1), 16, num_classes=100),
         (1, 3, 64, 64), "ResNet with basic blocks 1-1-1-1, base width 16 (ResNet-18 x0.25, half depth)",
         keep_batchnorm=True),
    Spec("resnet_bottleneck_w8_64", lambda: ResNet(Bottleneck, (1, 2, 2, 1), 8, num_classes=100),
         (1, 3, 64, 64), "ResNet with bottleneck blocks 1-2-2-1, base width 8 (ResNet-50 x0.125, shallower)",
         keep_batchnorm=False),
)


def build(spec: Spec, seed: int = 0) -> nn.Module:
    """The model of `spec` in eval mode: He-initialised weights under a fixed seed, calibrated BatchNorm."""
    torch.manual_seed(seed)
    model = init_weights(spec.build())
    return calibrate_batchnorm(model, spec.input_shape, seed + 1)


def export_onnx(model: nn.Module, input_shape: tuple[int, ...], path: Path, keep_batchnorm: bool = False) -> Path:
    """Export an eval-mode model with the TorchScript-based exporter: plain standard ONNX (Conv, Relu, Clip,
    Add, MaxPool, GlobalAveragePool/ReduceMean, Gemm; BatchNormalization with `keep_batchnorm`) with static
    shapes, constant folding on and every weight inside the file (no external data).

    Exporting in eval mode folds each BatchNorm into the Conv before it (what a deployed model looks like);
    `keep_batchnorm` exports in TrainingMode.PRESERVE instead, which for a model in eval mode keeps
    inference-mode BatchNormalization nodes (training_mode=0) with the running statistics as inputs."""
    import warnings

    import onnx

    if model.training:
        raise ValueError("export_onnx takes a model in eval mode (model.eval()): BatchNorm uses running stats")
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = torch.onnx.TrainingMode.PRESERVE if keep_batchnorm else torch.onnx.TrainingMode.EVAL
    with torch.no_grad(), warnings.catch_warnings():
        # The legacy exporter is deprecated and warns about constant folding under PRESERVE (harmless here: the
        # model is in eval mode, so nothing learnable is folded away).
        warnings.simplefilter("ignore", (DeprecationWarning, UserWarning))
        torch.onnx.export(model, (torch.zeros(input_shape),), str(path), input_names=["input"],
                          output_names=["logits"], opset_version=OPSET, do_constant_folding=True, dynamo=False,
                          training=mode)
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    return path


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m models.cv", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ONNX_DIR, help=f"output folder (default {ONNX_DIR})")
    ap.add_argument("--list", action="store_true", help="list the models and their sizes, export nothing")
    a = ap.parse_args(argv)
    for spec in SMALL_MODELS:
        model = build(spec)
        line = f"{spec.name:26s} {n_params(model) / 1e3:8.1f} k params  input {spec.input_shape}  {spec.about}"
        if a.list:
            print(line)
            continue
        p = export_onnx(model, spec.input_shape, a.out / f"{spec.name}.onnx", spec.keep_batchnorm)
        print(f"{line}\n  -> {p} ({p.stat().st_size / 2**20:.2f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
