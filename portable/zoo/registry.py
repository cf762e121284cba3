"""The zoo's models: what each is, how it is built or found, how it is exported and the inputs it runs at.

Nothing here imports torch: an entry names its builder (a function of `portable.zoo.builders`) or the
PyPI package and path of a shipped ONNX file, and the worker process does the rest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

FAMILIES = ("classification", "detection", "segmentation", "ocr", "audio", "transformer")


@dataclass(frozen=True)
class Input:
    """One graph input: `kind` says how its values are drawn (see worker.make_inputs)."""

    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"
    kind: str = "normal"  # normal | image01 | ids:<vocab> | ones | zeros | value:<v>
    dynamic: dict[int, str] = field(default_factory=dict)  # axis -> name, as exported


@dataclass(frozen=True)
class Entry:
    """One zoo model: a network, one exporter and opset, one input shape set."""

    name: str
    family: str
    source: str  # torchvision | transformers | zoo (written here from the paper) | pypi:<distribution>
    build: str  # a builders.py function name, or the file path inside the distribution for pypi
    inputs: tuple[Input, ...]
    outputs: tuple[str, ...] = ("output",)
    exporter: str = "legacy"  # legacy (torch.onnx dynamo=False) | dynamo | file (shipped as is)
    opset: int | None = None  # None: the file's own
    tags: tuple[str, ...] = ()
    note: str = ""  # e.g. why the input is smaller than the network's usual one
    licence: str = ""  # of a shipped file

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {i.name: i.shape for i in self.inputs}


def _image(n: int, h: int, w: int | None = None, name: str = "input", c: int = 3) -> tuple[Input, ...]:
    return (Input(name, (n, c, h, w or h), dynamic={0: "batch"}),)


def _tokens(seq: int, vocab: int, names=("input_ids", "attention_mask"), batch: int = 1) -> tuple[Input, ...]:
    kinds = {"input_ids": f"ids:{vocab}", "attention_mask": "ones", "token_type_ids": "zeros"}
    return tuple(Input(n, (batch, seq), "int64", kinds[n], {0: "batch", 1: "sequence"}) for n in names)


def _tv(name: str, build: str, family: str, h: int, exporter: str, opset: int, tags=(), note: str = "",
        outputs=("logits",), w: int | None = None) -> Entry:
    return Entry(name, family, "torchvision", build, _image(1, h, w), outputs, exporter, opset, tuple(tags), note)


_REDUCED = "reduced from {} for the CPU drivers"
_RAPIDOCR = "pypi:rapidocr-onnxruntime"
_SILERO = "pypi:silero-vad"

ENTRIES: tuple[Entry, ...] = (
    # ---- classification (torchvision architectures, random weights, calibrated BatchNorm)
    _tv("resnet18-legacy17", "resnet18", "classification", 224, "legacy", 17),
    _tv("resnet18-dynamo18", "resnet18", "classification", 224, "dynamo", 18),
    _tv("resnet50-dynamo18", "resnet50", "classification", 224, "dynamo", 18),
    _tv("mobilenet_v2-legacy13", "mobilenet_v2", "classification", 224, "legacy", 13),
    _tv("mobilenet_v2-dynamo20", "mobilenet_v2", "classification", 224, "dynamo", 20),
    _tv("mobilenet_v3_small-legacy17-96", "mobilenet_v3_small", "classification", 96, "legacy", 17,
        note=_REDUCED.format("224")),
    _tv("mobilenet_v3_large-dynamo18", "mobilenet_v3_large", "classification", 224, "dynamo", 18),
    _tv("efficientnet_b0-legacy17", "efficientnet_b0", "classification", 224, "legacy", 17),
    _tv("regnet_y_400mf-dynamo19", "regnet_y_400mf", "classification", 224, "dynamo", 19),
    _tv("shufflenet_v2_x1_0-legacy15", "shufflenet_v2_x1_0", "classification", 224, "legacy", 15),
    _tv("squeezenet1_1-dynamo18", "squeezenet1_1", "classification", 224, "dynamo", 18),
    _tv("squeezenet1_1-legacy14-64", "squeezenet1_1", "classification", 64, "legacy", 14, ("fast",),
        _REDUCED.format("224 (the fast subset)")),
    _tv("densenet121-legacy13-64", "densenet121", "classification", 64, "legacy", 13,
        note=_REDUCED.format("224") + "; each BatchNorm follows a Concat or ReLU, no Conv to fold into: "
        "BatchNormalization-9 nodes"),
    _tv("convnext_tiny-legacy17-64", "convnext_tiny", "classification", 64, "legacy", 17,
        note=_REDUCED.format("224: a 224x224 run took 104 s on PoCL")),
    _tv("vit_b_16-dynamo18", "vit_b_16", "transformer", 224, "dynamo", 18),
    # ---- detection (raw head outputs: box regression and class scores, before NMS)
    Entry("yolov8n-legacy17", "detection", "zoo", "yolov8n", _image(1, 640, name="images"), ("output0",),
          "legacy", 17, note="YOLOv8n from its published architecture; decoded boxes + class scores, no NMS"),
    Entry("yolov8n-dynamo18", "detection", "zoo", "yolov8n", _image(1, 640, name="images"), ("output0",),
          "dynamo", 18, note="as yolov8n-legacy17, the dynamo exporter"),
    _tv("ssdlite320_mobilenet_v3_large-dynamo18", "ssdlite320_heads", "detection", 320, "dynamo", 18,
        outputs=("bbox_regression", "cls_logits"), note="backbone + SSD heads; no anchor decoding or NMS"),
    # ---- segmentation
    _tv("lraspp_mobilenet_v3_large-legacy17", "lraspp_mobilenet_v3_large", "segmentation", 224, "legacy", 17,
        outputs=("out",)),
    _tv("deeplabv3_mobilenet_v3_large-dynamo18", "deeplabv3_mobilenet_v3_large", "segmentation", 224, "dynamo",
        18, outputs=("out",)),
    _tv("fcn_resnet50-legacy16", "fcn_resnet50", "segmentation", 224, "legacy", 16, outputs=("out",)),
    # ---- OCR: PP-OCR as shipped by rapidocr-onnxruntime (Paddle2ONNX exports, opsets 11-12)
    Entry("ppocr_v4_det", "ocr", _RAPIDOCR, "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
          (Input("x", (1, 3, 320, 320)),), ("sigmoid_0.tmp_0",), "file", tags=("pypi",),
          note="DBNet text detector, a 320x320 page crop (rapidocr resizes the long side to 736)",
          licence="Apache-2.0"),
    Entry("ppocr_v4_rec", "ocr", _RAPIDOCR, "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
          (Input("x", (1, 3, 48, 320)),), ("softmax_11.tmp_0",), "file", tags=("pypi",),
          note="SVTR-LCNet recogniser, one 48x320 text line", licence="Apache-2.0"),
    Entry("ppocr_mobile_v2_cls", "ocr", _RAPIDOCR, "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
          (Input("x", (1, 3, 48, 192)),), ("save_infer_model/scale_0.tmp_1",), "file", tags=("pypi",),
          note="text-direction classifier, one 48x192 line", licence="Apache-2.0"),
    # ---- audio
    Entry("silero_vad_16k_op15", "audio", _SILERO, "silero_vad/data/silero_vad_16k_op15.onnx",
          (Input("input", (1, 512)), Input("state", (2, 1, 128)), Input("sr", (), "int64", "value:16000")),
          ("output", "stateN"), "file", tags=("pypi", "fast"), note="one 32 ms chunk at 16 kHz", licence="MIT"),
    Entry("silero_vad_lstm_16k", "audio", _SILERO, "silero_vad/data/silero_vad_openvino_16k.onnx",
          (Input("input", (1, 576)), Input("state", (2, 1, 128))), ("output", "stateN"), "file", tags=("pypi",),
          note="the LSTM variant; 512 samples + 64 of context", licence="MIT"),
    # ---- transformer encoders (transformers, random weights, the published small configs)
    Entry("bert_tiny-legacy14", "transformer", "transformers", "bert_tiny",
          _tokens(16, 30522, ("input_ids", "attention_mask", "token_type_ids")),
          ("last_hidden_state", "pooler_output"), "legacy", 14, ("fast",), "BERT-Tiny config (L=2, H=128), seq 16"),
    Entry("bert_mini-legacy17", "transformer", "transformers", "bert_mini",
          _tokens(128, 30522, ("input_ids", "attention_mask", "token_type_ids")),
          ("last_hidden_state", "pooler_output"), "legacy", 17, note="BERT-Mini config (L=4, H=256), seq 128"),
    Entry("bert_mini-dynamo18", "transformer", "transformers", "bert_mini",
          _tokens(128, 30522, ("input_ids", "attention_mask", "token_type_ids")),
          ("last_hidden_state", "pooler_output"), "dynamo", 18, note="BERT-Mini config (L=4, H=256), seq 128"),
    Entry("distilbert_small-dynamo20", "transformer", "transformers", "distilbert_small", _tokens(128, 30522),
          ("last_hidden_state",), "dynamo", 20, note="DistilBERT, 4 layers of width 256, seq 128"),
    Entry("vit_tiny-legacy17", "transformer", "transformers", "vit_tiny", _image(1, 224, name="pixel_values"),
          ("last_hidden_state", "pooler_output"), "legacy", 17, note="ViT-Tiny config (patch 16, H=192, L=12)"),
)


def entries(pattern: str | None = None, fast: bool = False) -> list[Entry]:
    """The entries whose name matches `pattern` (a regex, searched), only the `fast` ones if asked."""
    rx = re.compile(pattern) if pattern else None
    return [e for e in ENTRIES if (not fast or "fast" in e.tags) and (rx is None or rx.search(e.name))]


def get(name: str) -> Entry:
    for e in ENTRIES:
        if e.name == name:
            return e
    raise KeyError(name)
