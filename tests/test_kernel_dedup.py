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


# IR level: drop_repeats and its structural key on hand-written outlined modules (no frontend, no codegen).
KERNEL = """
  gpu.module @{name} {{
    gpu.func @{fn}(%out: memref<64xf32>, %in: memref<64xf32>) kernel
        attributes {{known_block_size = array<i32: 64, 1, 1>}} {{
      %tx = gpu.thread_id x loc("{loc}")
      %c = arith.constant {value} : f32
      %v = memref.load %in[%tx] : memref<64xf32>
      %w = arith.mulf %v, %c {fastmath} : f32
      %y = arith.subf {sub} : f32
      memref.store %y, %out[%tx] : memref<64xf32>
      gpu.return
    }}
  }}"""
SAME = dict(fn="main_kernel", loc="a", value="2.0", fastmath="", sub="%w, %v")
VARIANTS = {
    "k0": {},
    "k1": dict(loc="b"),  # a repeat: locations are not compared (nor printed)
    "k2": dict(value="3.0"),  # another constant
    "k3": dict(fastmath="fastmath<fast>"),  # another attribute
    "k4": dict(sub="%v, %w"),  # the operands the other way round
    "k5": dict(fn="other_kernel"),  # the gpu.func's own name is part of the body, as it is of its printed form
    "k6": {},  # a repeat
}


def _outlined(variants: dict[str, dict[str, str]]) -> str:
    mods = "".join(KERNEL.format(name=name, **{**SAME, **v}) for name, v in variants.items())
    launches = "".join(
        f"    gpu.launch_func @{name}::@{v.get('fn', SAME['fn'])} blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1)"
        " args(%a : memref<64xf32>, %b : memref<64xf32>)\n" for name, v in variants.items())
    return ("module attributes {gpu.container_module} {\n  func.func @main(%a: memref<64xf32>, %b: memref<64xf32>) {\n"
            "    %c1 = arith.constant 1 : index\n    %c64 = arith.constant 64 : index\n" + launches
            + "    return\n  }" + mods + "\n}\n")


def test_drop_repeats_merges_only_identical_bodies():
    """A module that differs from an earlier one only in its name and locations goes; one constant, one attribute,
    the order of an op's operands or the kernel's own name keeps a module apart. Launches of a dropped module go to
    the kept one."""
    from portable.compiler.lowering.kernel_dedup import drop_repeats

    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(_outlined(VARIANTS))
        assert drop_repeats(module) is True
        module.operation.verify()
        kept = [ir.StringAttr(gm.attributes["sym_name"]).value for gm in find_ops(module.operation, ("gpu.module",))]
        assert kept == ["k0", "k2", "k3", "k4", "k5"]
        launched = [ir.SymbolRefAttr(op.attributes["kernel"]).value
                    for op in find_ops(module.operation, ("gpu.launch_func",))]
        assert launched == [["k0", "main_kernel"], ["k0", "main_kernel"], ["k2", "main_kernel"],
                            ["k3", "main_kernel"], ["k4", "main_kernel"], ["k5", "other_kernel"],
                            ["k0", "main_kernel"]]
        assert drop_repeats(module) is False  # nothing left to merge


def test_structure_equal_exactly_where_the_bodies_print_the_same():
    """The structural key of a module body against its printed form (what the stage compared before), over every
    pair of the modules above: equal keys exactly for equal text; the key holds IR objects, no printed IR."""
    from portable.compiler.lowering.kernel_dedup import structure

    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(_outlined(VARIANTS))
        mods = find_ops(module.operation, ("gpu.module",))
        keys = [structure(gm) for gm in mods]
        texts = ["\n".join(op.operation.get_asm() for op in gm.regions[0].blocks[0].operations) for gm in mods]
        for i in range(len(mods)):
            for j in range(len(mods)):
                assert (keys[i] == keys[j]) == (texts[i] == texts[j]), (i, j)
                assert keys[i] != keys[j] or hash(keys[i]) == hash(keys[j])
        assert sum(keys[0] == k for k in keys) == 3  # k0, k1, k6

        def leaves(x):
            return [y for z in x for y in leaves(z)] if isinstance(x, tuple) else [x]

        # Op and attribute names, numbers, and attributes and types as the objects the context uniques.
        assert all(isinstance(x, (int, ir.Attribute, ir.Type)) or isinstance(x, str) and " " not in x
                   for x in leaves(keys[0]))
        assert any(isinstance(x, ir.FloatAttr) for x in leaves(keys[0]))


def test_structure_numbers_values_by_position():
    """Operands are compared by which value they are (which op's result, which block argument): a kernel that
    loads from %in twice differs from one that loads from %in, then %out."""
    from portable.compiler.lowering.kernel_dedup import structure

    def kernel(second: str) -> str:
        return (KERNEL.format(name="m", **SAME).replace(
            "%y = arith.subf %w, %v : f32",
            f"%u = memref.load {second}[%tx] : memref<64xf32>\n      %y = arith.subf %w, %u : f32"))

    with ir.Context(), ir.Location.unknown():
        a, b, c = (ir.Module.parse("module attributes {gpu.container_module} {" + kernel(s) + "}")
                   for s in ("%in", "%out", "%in"))
        ka, kb, kc = (structure(m.body.operations[0].operation) for m in (a, b, c))
        assert ka == kc and ka != kb
