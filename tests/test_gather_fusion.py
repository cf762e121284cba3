"""Slices and concats merged with their elementwise neighbours (compiler/graph/gather_fusion.py): a rotary embedding
(two slices, two halves, a concat) as one kernel, and slices that other ops read left as kernels; checked on every
device against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from portable import profiles
from portable.compiler.pipeline import compile_module
from portable.devices import open_device

onnx = pytest.importorskip("onnx", reason="the models here are built with 'onnx' (pip install 'portable[onnx]')")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from portable.frontend.onnx_import import onnx_to_mlir  # noqa: E402

H, D = 6, 64
RNG = np.random.default_rng(3)


def _ints(name: str, values: list[int]):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _rotary(extra_use: bool):
    """y = concat(x1 * cos - x2 * sin, x1 * sin + x2 * cos) over the halves x1, x2 of x's last dim (a decoder's
    rotary embedding); `extra_use`: x1 is also an output of its own."""
    f32 = TensorProto.FLOAT
    inits = [_ints("lo", [0]), _ints("mid", [D // 2]), _ints("hi", [D]), _ints("ax", [2])]
    nodes = [helper.make_node("Slice", ["x", "lo", "mid", "ax"], ["x1"]),
             helper.make_node("Slice", ["x", "mid", "hi", "ax"], ["x2"]),
             helper.make_node("Mul", ["x1", "cos"], ["a1"]), helper.make_node("Mul", ["x2", "sin"], ["a2"]),
             helper.make_node("Sub", ["a1", "a2"], ["a"]),
             helper.make_node("Mul", ["x1", "sin"], ["b1"]), helper.make_node("Mul", ["x2", "cos"], ["b2"]),
             helper.make_node("Add", ["b1", "b2"], ["b"]),
             helper.make_node("Concat", ["a", "b"], ["y"], axis=2)]
    outs = [helper.make_tensor_value_info("y", f32, [H, 1, D])]
    if extra_use:
        nodes.append(helper.make_node("MatMul", ["x1", "w"], ["z"]))
        outs.append(helper.make_tensor_value_info("z", f32, [H, 1, 5]))
    ins = [helper.make_tensor_value_info("x", f32, [H, 1, D]), helper.make_tensor_value_info("cos", f32, [1, D // 2]),
           helper.make_tensor_value_info("sin", f32, [1, D // 2])]
    if extra_use:
        ins.append(helper.make_tensor_value_info("w", f32, [D // 2, 5]))
    graph = helper.make_graph(nodes, "rotary", ins, outs, initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _compile(model, device: str):
    live = open_device(device)
    opts = profiles.codegen_options(profiles.match(live.info), live.info)
    return compile_module(onnx_to_mlir(model), opts, (live.info.api,))


@pytest.mark.parametrize("extra_use", [False, True], ids=["rotary", "slice-read-by-a-matmul"])
def test_rotary_embedding(device, tmp_path, extra_use):
    exe = _compile(_rotary(extra_use), device)
    x = RNG.standard_normal((H, 1, D)).astype(np.float32)
    cos, sin = (RNG.standard_normal((1, D // 2)).astype(np.float32) for _ in range(2))
    x1, x2 = x[..., :D // 2], x[..., D // 2:]
    ref = [np.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)]
    inputs = [x, cos, sin]
    if extra_use:
        w = RNG.standard_normal((D // 2, 5)).astype(np.float32)
        inputs.append(w)
        ref.append(x1 @ w)
    import portable

    exe.save(tmp_path / "r.ptx")
    outs = portable.load(tmp_path / "r.ptx", device=device)(*inputs)
    for out, r in zip(outs, ref):
        np.testing.assert_allclose(out, r, rtol=1e-5, atol=1e-5)
    if extra_use:
        # x1 stays a kernel (the matmul reads it too); x2 and both halves join the concat, which reads x, cos, sin
        # and x1: the slice, the concat, the matmul.
        assert sorted(k.num_buffers for k in exe.kernels) == [2, 3, 5] and len(exe.dispatches) == 3
    else:
        assert len(exe.dispatches) == 1  # the five ops (nine ONNX nodes) are one kernel reading x, cos and sin


def test_concat_of_an_op_reading_a_constant_fill(device, tmp_path):
    """Two batch norms with the same statistics (their sqrt(var + eps) folds into one fill): one joins a concat,
    the other stays outside. The concat takes the fill's value, not a read of the fill (a fill is never a kernel
    of its own: left unread by any kernel it stayed on the host, and ShuffleNet's compile failed)."""
    f32 = TensorProto.FLOAT
    inits = [numpy_helper.from_array(np.full((4,), v, np.float32), n)
             for n, v in (("scale", 1.5), ("bias", 0.25), ("mean", 0.1), ("var", 4.0))]
    bn = ["scale", "bias", "mean", "var"]
    nodes = [helper.make_node("BatchNormalization", ["x", *bn], ["a"], epsilon=1e-5),
             helper.make_node("Concat", ["a", "y"], ["c"], axis=1),
             helper.make_node("BatchNormalization", ["y", *bn], ["z"], epsilon=1e-5)]
    ins = [helper.make_tensor_value_info(n, f32, [1, 4, 3, 3]) for n in ("x", "y")]
    outs = [helper.make_tensor_value_info("c", f32, [1, 8, 3, 3]),
            helper.make_tensor_value_info("z", f32, [1, 4, 3, 3])]
    model = helper.make_model(helper.make_graph(nodes, "fill", ins, outs, initializer=inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    exe = _compile(model, device)
    import portable

    exe.save(tmp_path / "f.ptx")
    x, y = (RNG.standard_normal((1, 4, 3, 3)).astype(np.float32) for _ in range(2))
    c, z = portable.load(tmp_path / "f.ptx", device=device)(x, y)
    norm = lambda v: (v - 0.1) / np.sqrt(4.0 + 1e-5) * 1.5 + 0.25  # noqa: E731
    np.testing.assert_allclose(c, np.concatenate([norm(x), y], axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(z, norm(y), rtol=1e-5, atol=1e-6)


def _rotary_into_cache():
    """The rotary embedding of this step's k written into row `pos` of a cache (Where over every row)."""
    model = _rotary(False)
    g = model.graph
    f32 = TensorProto.FLOAT
    g.node.append(helper.make_node("Where", ["mask", "y", "cache"], ["new"]))
    g.input.extend([helper.make_tensor_value_info("mask", TensorProto.BOOL, [1, 40, 1]),
                    helper.make_tensor_value_info("cache", f32, [H, 40, D])])
    del g.output[:]
    g.output.append(helper.make_tensor_value_info("new", f32, [H, 40, D]))
    return model


@pytest.mark.parametrize("profile,kernels", [("nvidia", 1), ("lavapipe", 2), ("pocl", 2)])
def test_rotary_read_by_every_cache_row(profile, kernels):
    """GPU profiles compute the rotation where each cache row reads it (one kernel); the CPU drivers' profiles,
    where that is 40 rotations for one, keep the rotation a kernel the write reads."""
    api = "opencl" if profile == "pocl" else "vulkan"
    exe = compile_module(onnx_to_mlir(_rotary_into_cache()), profiles.codegen_options(profiles.all_profiles()[profile]),
                         (api,))
    assert len(exe.dispatches) == kernels


def test_rotary_into_cache_values(device, tmp_path):
    exe = _compile(_rotary_into_cache(), device)
    import portable

    exe.save(tmp_path / "c.ptx")
    x = RNG.standard_normal((H, 1, D)).astype(np.float32)
    cos, sin = (RNG.standard_normal((1, D // 2)).astype(np.float32) for _ in range(2))
    cache = RNG.standard_normal((H, 40, D)).astype(np.float32)
    mask = np.zeros((1, 40, 1), bool)
    mask[0, 7, 0] = True
    x1, x2 = x[..., :D // 2], x[..., D // 2:]
    y = np.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)
    (new,) = portable.load(tmp_path / "c.ptx", device=device)(x, cos, sin, mask, cache)
    np.testing.assert_allclose(new, np.where(mask, y, cache), rtol=1e-5, atol=1e-5)


def _heads_rotated_scores():
    """A decoder's scores as Hugging Face exports them: the projected q [1, 1, H * D] split into heads (Reshape,
    Transpose), rotated (q * cos + rotate_half(q) * sin, rotate_half = concat(-x2, x1)), times K^T over T keys."""
    f32 = TensorProto.FLOAT
    t = 40
    inits = [_ints("heads", [1, 1, H, D]), _ints("lo", [0]), _ints("mid", [D // 2]), _ints("hi", [D]),
             _ints("ax", [3])]
    nodes = [helper.make_node("Reshape", ["x", "heads"], ["xh"]),
             helper.make_node("Transpose", ["xh"], ["q"], perm=[0, 2, 1, 3]),
             helper.make_node("Slice", ["q", "lo", "mid", "ax"], ["q1"]),
             helper.make_node("Slice", ["q", "mid", "hi", "ax"], ["q2"]),
             helper.make_node("Neg", ["q2"], ["n2"]),
             helper.make_node("Concat", ["n2", "q1"], ["rot"], axis=3),
             helper.make_node("Mul", ["q", "cos"], ["a"]), helper.make_node("Mul", ["rot", "sin"], ["b"]),
             helper.make_node("Add", ["a", "b"], ["qr"]),
             helper.make_node("MatMul", ["qr", "kt"], ["s"])]
    ins = [helper.make_tensor_value_info("x", f32, [1, 1, H * D]),
           helper.make_tensor_value_info("cos", f32, [1, 1, 1, D]),
           helper.make_tensor_value_info("sin", f32, [1, 1, 1, D]),
           helper.make_tensor_value_info("kt", f32, [1, H, D, t])]
    outs = [helper.make_tensor_value_info("s", f32, [1, H, 1, t])]
    graph = helper.make_graph(nodes, "scores", ins, outs, initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_heads_transpose_read_by_the_rotation():
    """On a GPU profile the transpose into heads is computed where the rotation reads q (an index remap), and the
    rotated q inside the scores: one kernel, where the transpose, the rotation and the scores had been three."""
    exe = compile_module(onnx_to_mlir(_heads_rotated_scores()),
                         profiles.codegen_options(profiles.all_profiles()["nvidia"]), ("vulkan",))
    assert len(exe.dispatches) == 1


def test_heads_rotated_scores_values(device):
    exe = _compile(_heads_rotated_scores(), device)
    x = RNG.standard_normal((1, 1, H * D)).astype(np.float32)
    cos, sin = (RNG.standard_normal((1, 1, 1, D)).astype(np.float32) for _ in range(2))
    kt = RNG.standard_normal((1, H, D, 40)).astype(np.float32)
    q = x.reshape(1, 1, H, D).transpose(0, 2, 1, 3)
    rot = np.concatenate([-q[..., D // 2:], q[..., :D // 2]], axis=-1)
    from portable.api import CompiledGraph

    live = open_device(device)
    graph = CompiledGraph(exe, live, 1)
    try:
        (s,) = graph(x, cos, sin, kt)
    finally:
        graph.close()
    np.testing.assert_allclose(s, (q * cos + rot * sin) @ kt, rtol=1e-4, atol=1e-4)
