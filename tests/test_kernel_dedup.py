"""Repeated layers (the same ops on the same shapes, other weights) share one kernel: each distinct kernel body is
generated and built once, and every dispatch still reads its own weights. The dedup-kernels stage (pipeline.py)
drops the repeats right after outlining, so the kernel stages after it see each distinct kernel once."""

from __future__ import annotations

import numpy as np
import pytest

import portable
from portable import profiles
from portable.compiler.pipeline import STAGES, Compilation, Dumper, run_stages
from portable.ir.mlir import ir
from portable.ir.util import find_ops


def _layers(rng, widths=(64, 64, 64, 64, 32)) -> tuple[bytes, np.ndarray, np.ndarray]:
    """relu(x @ W_i + b_i) repeated; equal widths make identical layers, the last one differs."""
    pytest.importorskip("onnx", reason="the ONNX frontend needs the onnx package (test extra)")
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    x = rng.standard_normal((16, widths[0])).astype(np.float32)
    nodes, inits, want, prev = [], [], x, "x"
    for i, (k, n) in enumerate(zip(widths, widths[1:])):
        w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        inits += [nh.from_array(w, f"W{i}"), nh.from_array(b, f"B{i}")]
        out = "y" if i == len(widths) - 2 else f"h{i}"
        nodes += [h.make_node("MatMul", [prev, f"W{i}"], [f"m{i}"]), h.make_node("Add", [f"m{i}", f"B{i}"], [f"a{i}"]),
                  h.make_node("Relu", [f"a{i}"], [out])]
        want, prev = np.maximum(want @ w + b, 0), out
    g = h.make_graph(nodes, "layers", [h.make_tensor_value_info("x", T.FLOAT, x.shape)],
                     [h.make_tensor_value_info("y", T.FLOAT, want.shape)], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString(), x, want


def test_identical_layers_share_a_kernel(device, tmp_path):
    model, x, want = _layers(np.random.default_rng(0))
    path = tmp_path / "layers.onnx"
    path.write_bytes(model)
    exe = portable.compile(str(path), device=device)
    try:
        (y,) = exe(x)
        kernels, dispatches = exe.executable.kernels, exe.executable.dispatches
    finally:
        exe.close()
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    used = [d.kernel for d in dispatches]
    assert sorted(set(used)) == list(range(len(kernels)))  # every kernel is dispatched
    assert len(dispatches) == 4 and len(kernels) == 2, f"{len(kernels)} kernels for {used}"
    assert used[0] == used[1] == used[2] != used[3]


N = 48


def _layer(i: int, x: str, n: int) -> str:
    """x @ w{i} then relu, on (N, n) x (n, n)."""
    t = f"tensor<{N}x{n}xf32>"
    return f"""
  %f{i} = linalg.fill ins(%z : f32) outs(%e{n} : {t}) -> {t}
  %m{i} = linalg.matmul ins({x}, %w{i} : {t}, tensor<{n}x{n}xf32>) outs(%f{i} : {t}) -> {t}
  %r{i} = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                         iterator_types = ["parallel", "parallel"]}} ins(%m{i} : {t}) outs(%e{n} : {t}) {{
    ^bb0(%a: f32, %o: f32):
      %y = arith.maximumf %a, %z : f32
      linalg.yield %y : f32
  }} -> {t}"""


def _repeated(sizes: list[int]) -> str:
    """Layers of the given widths, chained; a width change goes through a slice of the first columns."""
    args = [f"%x: tensor<{N}x{sizes[0]}xf32>"] + [f"%w{i}: tensor<{n}x{n}xf32>" for i, n in enumerate(sizes)]
    body = ["  %z = arith.constant 0.0 : f32"]
    body += [f"  %e{n} = tensor.empty() : tensor<{N}x{n}xf32>" for n in sorted(set(sizes))]
    x = "%x"
    for i, n in enumerate(sizes):
        if i and n != sizes[i - 1]:
            body.append(f"  %s{i} = tensor.extract_slice {x}[0, 0] [{N}, {n}] [1, 1] : "
                        f"tensor<{N}x{sizes[i - 1]}xf32> to tensor<{N}x{n}xf32>")
            x = f"%s{i}"
        body.append(_layer(i, x, n))
        x = f"%r{i}"
    out = f"tensor<{N}x{sizes[-1]}xf32>"
    return (f"func.func @main({', '.join(args)}) -> {out} {{\n" + "\n".join(body)
            + f"\n  return {x} : {out}\n}}\n")


SIZES = [64, 64, 64, 32, 32]


@pytest.mark.parametrize("profile, targets", [("lavapipe", ("vulkan",)), ("pocl", ("opencl",)),
                                             ("nvidia", ("vulkan", "opencl"))])
def test_repeats_leave_one_gpu_module_each(profile, targets):
    with ir.Context(), ir.Location.unknown():
        options = profiles.codegen_options(profiles.all_profiles()[profile])
        c = Compilation(ir.Module.parse(_repeated(SIZES)), options, targets, Dumper("0" * 16))
        i = [s.name for s in STAGES].index("dedup-kernels")
        run_stages(c, STAGES[:i])
        before = find_ops(c.module.operation, ("gpu.module",))
        launches = len(find_ops(c.module.operation, ("gpu.launch_func",)))
        assert STAGES[i].run(c) is True
        c.module.operation.verify()
        kept = {ir.StringAttr(gm.attributes["sym_name"]).value for gm in find_ops(c.module.operation, ("gpu.module",))}
        targets = [ir.SymbolRefAttr(op.attributes["kernel"]).value[0]
                   for op in find_ops(c.module.operation, ("gpu.launch_func",))]
        # Two widths: at most one kernel per width and kind of step; every launch still there, on a kept module.
        assert len(kept) < len(before) and len(targets) == launches and set(targets) == kept
        run_stages(c, STAGES[i + 1:])
        assert len(c.kernels) == len(kept)
        assert sorted(set(c.index.values())) == list(range(len(c.kernels)))


def test_distinct_kernels_stay_apart():
    """Layers of different widths share no kernel: the stage keeps every module (and says it changed nothing)."""
    with ir.Context(), ir.Location.unknown():
        options = profiles.codegen_options(profiles.all_profiles()["pocl"])
        c = Compilation(ir.Module.parse(_repeated([64, 32])), options, ("opencl",), Dumper("0" * 16))
        i = [s.name for s in STAGES].index("dedup-kernels")
        run_stages(c, STAGES[:i])
        before = len(find_ops(c.module.operation, ("gpu.module",)))
        assert STAGES[i].run(c) is False
        assert len(find_ops(c.module.operation, ("gpu.module",))) == before
