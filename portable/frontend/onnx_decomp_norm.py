"""BatchNormalization (inference) of opsets 9-14 as a per-channel Mul and Add.

torch-mlir lowers BatchNormalization only from opset 15 on; older versions of the op (what torch's legacy exporter
writes at opsets 9-14 wherever a BatchNorm does not follow a Conv it can fold into, and what Paddle2ONNX writes at
opset 13) end in "failed to legalize". In inference mode the op is y = (x - mean) / sqrt(var + eps) * scale + B per
channel (axis 1). With constant statistics (the usual case) that is x * s + t with s and t computed here; otherwise
the same formula as ONNX ops on the reshaped per-channel inputs. Opset 15 and later stay with torch-mlir's lowering,
and so does training mode (more than one output, or training_mode=1).
"""

from __future__ import annotations

import numpy as np

from .onnx_decompose import Builder, rewrite

LOWERED_FROM = 15  # the first opset of BatchNormalization that torch-mlir lowers


def _opset(b: Builder) -> int:
    return next((o.version for o in b.m.opset_import if o.domain in ("", "ai.onnx")), LOWERED_FROM)


@rewrite("BatchNormalization")
def batch_norm(n, b: Builder) -> bool:
    if _opset(b) >= LOWERED_FROM or len(n.input) < 5 or sum(1 for o in n.output if o) != 1 \
            or b.attr("training_mode", 0) or b.attr("is_test", 1) == 0:
        return False
    x, scale, bias, mean, var = n.input[:5]
    shape = b.static_shape(x)
    if len(shape) < 2:
        b.fail(f"input '{x}' has rank {len(shape)}; BatchNormalization needs (N, C, ...)")
    dtype = b.np_dtype(x) or np.dtype(np.float32)
    eps = float(b.attr("epsilon", 1e-5))
    per_channel = (shape[1],) + (1,) * (len(shape) - 2)
    values = [b.const(v) for v in (scale, bias, mean, var)]
    if all(v is not None for v in values):
        s, t, mu, v = (np.asarray(a, np.float64).reshape(-1) for a in values)
        mul = s / np.sqrt(v + eps)
        add = t - mu * mul
        y = b.op("Mul", [x, b.constant(mul.reshape(per_channel).astype(dtype), "scale")])
        b.op("Add", [y, b.constant(add.reshape(per_channel).astype(dtype), "shift")], outputs=[n.output[0]])
        b.note = f"opset {_opset(b)} BatchNormalization (torch-mlir lowers it from opset {LOWERED_FROM}): " \
                 "x * scale + shift with the statistics folded"
        return True
    to_channels = b.constant(np.array(per_channel, np.int64), "per_channel")

    def channel(name: str) -> str:
        return b.op("Reshape", [name, to_channels])

    denom = b.op("Sqrt", [b.op("Add", [channel(var), b.constant(np.array(eps, dtype), "epsilon")])])
    centred = b.op("Sub", [x, channel(mean)])
    y = b.op("Mul", [b.op("Div", [centred, denom]), channel(scale)])
    b.op("Add", [y, channel(bias)], outputs=[n.output[0]])
    b.note = f"opset {_opset(b)} BatchNormalization (torch-mlir lowers it from opset {LOWERED_FROM}): " \
             "(x - mean) / sqrt(var + eps) * scale + B"
    return True
