"""Torch-side builders of the zoo: each returns an eval-mode nn.Module with random weights under a fixed seed,
taking the entry's inputs positionally and returning a tuple of tensors; `export` writes its ONNX file.

Imported only in a zoo worker process (it imports torch, torchvision, transformers).
"""

from __future__ import annotations

import sys
import types
import warnings
from pathlib import Path

import torch
from torch import nn

from .registry import Entry

SEED = 0


def _torchvision():
    # torchvision registers fake kernels for torchvision::nms at import; with a CPU-only torch whose op schema
    # differs that registration fails. The zoo never calls nms, so the registrations are skipped.
    name = "torchvision._meta_registrations"
    if name not in sys.modules:
        sys.modules[name] = types.ModuleType(name)
    import torchvision

    return torchvision


def calibrate_batchnorm(model: nn.Module, shape: tuple[int, ...], batches: int = 3, batch: int = 4,
                        seed: int = SEED + 1) -> nn.Module:
    """Non-trivial BatchNorm: gamma ~ U(0.75, 1.25), beta ~ N(0, 0.1^2), running statistics measured on a few
    random batches in training mode (fresh ones are an identity that tests nothing, and deep random stacks blow
    up or vanish without them), as training would leave them; then eval mode."""
    g = torch.Generator().manual_seed(seed)
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return model.eval()
    with torch.no_grad():
        for m in bns:
            if m.affine:
                m.weight.copy_(0.75 + 0.5 * torch.rand(m.num_features, generator=g))
                m.bias.copy_(0.1 * torch.randn(m.num_features, generator=g))
            m.reset_running_stats()
            m.momentum = None  # cumulative average over the calibration batches
        model.train()
        for _ in range(batches):
            model(torch.randn((batch, *shape[1:]), generator=g))
        for m in bns:
            m.momentum = 0.1
    return model.eval()


class _Outputs(nn.Module):
    """A one-input model whose forward returns a dict or a ModelOutput, as a tuple of the named fields (named
    parameters, not *args: the dynamo exporter maps dynamic axes onto the signature)."""

    def __init__(self, model: nn.Module, keys: tuple[str, ...]):
        super().__init__()
        self.model, self.keys = model, keys

    def forward(self, x):
        out = self.model(x)
        return tuple(out[k] for k in self.keys)


class _TextOutputs(_Outputs):
    """An encoder taking token ids, an attention mask and (BERT) token type ids."""

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        kw = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, **kw)
        return tuple(out[k] for k in self.keys)


class _SSDHeads(nn.Module):
    """An SSD's backbone and heads: the raw box regression and class logits, before anchors and NMS."""

    def __init__(self, ssd: nn.Module):
        super().__init__()
        self.backbone, self.head = ssd.backbone, ssd.head

    def forward(self, x):
        out = self.head(list(self.backbone(x).values()))
        return out["bbox_regression"], out["cls_logits"]


def _transformers():
    _torchvision()  # transformers imports torchvision where it is installed
    import transformers

    return transformers


def _tv_classifier(fn: str):
    def build(entry: Entry) -> nn.Module:
        tv = _torchvision()
        return getattr(tv.models, fn)(weights=None)
    return build


def _tv_segmenter(fn: str, **kw):
    def build(entry: Entry) -> nn.Module:
        tv = _torchvision()
        m = getattr(tv.models.segmentation, fn)(weights=None, weights_backbone=None, num_classes=21, **kw)
        return _Outputs(m, ("out",))
    return build


def ssdlite320_heads(entry: Entry) -> nn.Module:
    tv = _torchvision()
    return _SSDHeads(tv.models.detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None))


def yolov8n(entry: Entry) -> nn.Module:
    from .yolo import YOLOv8

    return YOLOv8(width=0.25, depth=0.33)


def _bert(layers: int, hidden: int, heads: int):
    def build(entry: Entry) -> nn.Module:
        tf = _transformers()
        cfg = tf.BertConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                            intermediate_size=4 * hidden)
        return _TextOutputs(tf.BertModel(cfg), ("last_hidden_state", "pooler_output"))
    return build


def distilbert_small(entry: Entry) -> nn.Module:
    tf = _transformers()
    cfg = tf.DistilBertConfig(dim=256, hidden_dim=1024, n_layers=4, n_heads=4)
    return _TextOutputs(tf.DistilBertModel(cfg), ("last_hidden_state",))


def vit_tiny(entry: Entry) -> nn.Module:
    tf = _transformers()
    cfg = tf.ViTConfig(image_size=224, patch_size=16, hidden_size=192, num_hidden_layers=12, num_attention_heads=3,
                    intermediate_size=768)
    return _Outputs(tf.ViTModel(cfg), ("last_hidden_state", "pooler_output"))


BUILDERS = {
    **{n: _tv_classifier(n) for n in ("resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small",
                                       "mobilenet_v3_large", "efficientnet_b0", "regnet_y_400mf",
                                       "shufflenet_v2_x1_0", "squeezenet1_1", "convnext_tiny", "vit_b_16",
                                       "densenet121")},
    "lraspp_mobilenet_v3_large": _tv_segmenter("lraspp_mobilenet_v3_large"),
    "deeplabv3_mobilenet_v3_large": _tv_segmenter("deeplabv3_mobilenet_v3_large", aux_loss=False),
    "fcn_resnet50": _tv_segmenter("fcn_resnet50", aux_loss=False),
    "ssdlite320_heads": ssdlite320_heads,
    "yolov8n": yolov8n,
    "bert_tiny": _bert(2, 128, 2),
    "bert_mini": _bert(4, 256, 4),
    "distilbert_small": distilbert_small,
    "vit_tiny": vit_tiny,
}


def _no_zero_layers(model: nn.Module) -> nn.Module:
    """Layers a library initialises to zero (torchvision's ViT head: a fine-tuning convention) get N(0, 0.02):
    a zero classifier answers zeros for every input, and a comparison of zeros tests nothing."""
    with torch.no_grad():
        for m in model.modules():
            w = getattr(m, "weight", None)
            if isinstance(m, (nn.Linear, nn.Conv2d)) and w is not None and not torch.any(w):
                nn.init.normal_(w, 0.0, 0.02)
    return model


def build(entry: Entry) -> nn.Module:
    """The entry's network in eval mode, weights drawn under SEED, BatchNorm calibrated on image inputs."""
    torch.manual_seed(SEED)
    model = _no_zero_layers(BUILDERS[entry.build](entry))
    first = entry.inputs[0]
    if first.dtype == "float32" and len(first.shape) == 4:
        return calibrate_batchnorm(model, first.shape)
    return model.eval()


def export(entry: Entry, model: nn.Module, args: tuple, path: Path) -> Path:
    """Export as users usually do: named inputs/outputs, dynamic batch (and sequence) axes, weights inside."""
    names = [i.name for i in entry.inputs]
    dynamic = {i.name: dict(i.dynamic) for i in entry.inputs if i.dynamic}
    for o in entry.outputs:
        dynamic[o] = {0: "batch"}
    path.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if entry.exporter == "legacy":
            torch.onnx.export(model, args, str(path), input_names=names, output_names=list(entry.outputs),
                              opset_version=entry.opset, dynamic_axes=dynamic, do_constant_folding=True,
                              dynamo=False)
        elif entry.exporter == "dynamo":
            torch.onnx.export(model, args, str(path), input_names=names, output_names=list(entry.outputs),
                              opset_version=entry.opset, dynamic_axes=dynamic, dynamo=True, external_data=False)
        else:
            raise ValueError(f"{entry.name}: exporter {entry.exporter!r} builds nothing")
    return path
