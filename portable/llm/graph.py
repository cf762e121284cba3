"""An exported decoder's ONNX graph made into a step with a fixed-capacity KV cache that stays on the device.

A Hugging Face export returns present = concat(past, new rows) along the sequence axis, one row longer per
token. Here each present.{i} is followed by a Gather along that axis through a new input `kv_index` of length
C (the cache capacity): slot j keeps its past row (index j) or takes a new row (index C + r). The result has the
past's shape, so it is carried back onto the past input on the device (`CompiledGraph.with_state`), and the step
compiles once per capacity C and chunk length S; the host sends only ids, positions, the mask and the index."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UnsupportedOp

KV_INDEX = "kv_index"


@dataclass(frozen=True)
class DecoderSignature:
    """Where the pieces of a decoder step are: input / output positions of the cache pairs and the others."""

    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    past: tuple[int, ...]  # input positions of past key/value tensors, in layer order
    present: tuple[int, ...]  # output positions of the carried caches, same order as past
    logits: int
    kv_heads: tuple[int, ...]  # per past input
    head_dims: tuple[int, ...]
    has_position_ids: bool

    def carry(self) -> dict[int, int]:
        return dict(zip(self.present, self.past))


def _dims(value_info: Any) -> list[Any]:
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
            for d in value_info.type.tensor_type.shape.dim]


def with_cache_write(model: Any) -> tuple[Any, DecoderSignature]:
    """`model` (onnx.ModelProto of an exported decoder) with its present outputs replaced by fixed-capacity caches
    (see the module docstring) and the signature of the result."""
    import onnx
    from onnx import helper

    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    ins = [i.name for i in g.input]
    outs = [o.name for o in g.output]
    past = [n for n in ins if n.startswith(("past_key_values", "past."))]
    present = [n for n in outs if n.startswith(("present", "past_key_values"))]
    if "input_ids" not in ins or "attention_mask" not in ins or not past or len(past) != len(present):
        raise UnsupportedOp(
            f"not a decoder export with a KV cache: inputs {ins}, outputs {outs}; export it with input_ids, "
            f"attention_mask and past_key_values.N.key/value inputs and present.N.key/value outputs")
    if outs[0] != "logits":
        raise UnsupportedOp(f"the decoder's first output should be logits, got {outs[0]!r}")
    kv_heads, head_dims = [], []
    for n in past:
        d = _dims(next(i for i in g.input if i.name == n))
        if len(d) != 4 or not isinstance(d[1], int) or not isinstance(d[3], int) or not d[1] or not d[3]:
            raise UnsupportedOp(f"past input {n} has shape {d}; expected [batch, kv heads, past length, head dim] "
                                f"with fixed heads and head dim")
        kv_heads.append(d[1])
        head_dims.append(d[3])
    g.input.append(helper.make_tensor_value_info(KV_INDEX, onnx.TensorProto.INT64, ["capacity"]))
    new_outputs = []
    for j, p_out in enumerate(present):
        name = f"cache.{j}"
        g.node.append(helper.make_node("Gather", [p_out, KV_INDEX], [name], axis=2, name=f"cache_write_{j}"))
        new_outputs.append(helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT,
                                                         [1, kv_heads[j], "capacity", head_dims[j]]))
    keep = [o for o in g.output if o.name not in present]
    del g.output[:]
    g.output.extend(keep + new_outputs)
    in_names = tuple(i.name for i in g.input)
    out_names = tuple(o.name for o in g.output)
    sig = DecoderSignature(
        input_names=in_names, output_names=out_names,
        past=tuple(in_names.index(n) for n in past),
        present=tuple(out_names.index(f"cache.{j}") for j in range(len(past))),
        logits=out_names.index("logits"), kv_heads=tuple(kv_heads), head_dims=tuple(head_dims),
        has_position_ids="position_ids" in in_names)
    return m, sig


def load(path_or_model: Any) -> Any:
    """The decoder as an onnx.ModelProto (from an ONNX export or a .gguf file), its 4-bit MatMulNBits weights as
    standard ONNX ops."""
    import onnx

    from ..frontend.onnx_decomp_quant import dequantize_matmul_nbits

    path_or_model = _onnx_of(path_or_model)
    if isinstance(path_or_model, (str, Path)):
        path_or_model = onnx.load(str(path_or_model))
    elif isinstance(path_or_model, bytes):
        path_or_model = onnx.load_from_string(path_or_model)
    return dequantize_matmul_nbits(path_or_model)


def load_apart(path_or_model: Any) -> Any:
    """The decoder as `load` gives it, its large weights held apart from the graph (frontend.onnx_weights.SplitModel;
    a file's external data mapped, not read): a session edits and compiles the graph without a whole copy of a
    model of billions of weights."""
    from ..frontend.onnx_import import load_model
    from ..frontend.onnx_weights import SplitModel

    return SplitModel(*load_model(_onnx_of(path_or_model)))


def _onnx_of(path_or_model: Any) -> Any:
    """A GGUF file as an onnx.ModelProto; anything else as it is."""
    if is_gguf(path_or_model):
        from .gguf_model import to_onnx

        return to_onnx(path_or_model)
    return path_or_model


def is_gguf(model: Any) -> bool:
    """A path to a GGUF file (by its magic bytes, or its .gguf suffix where the file is missing)."""
    if not isinstance(model, (str, Path)):
        return False
    p = Path(model)
    if p.is_file():
        with open(p, "rb") as f:
            return f.read(4) == b"GGUF"
    return p.suffix.lower() == ".gguf"
