"""One `device` fixture for every test: parametrized over each available Vulkan and OpenCL device.

PORTABLE_TEST_DEVICES=vulkan:0,opencl:0 filters. Vulkan devices run with the Khronos validation layer on,
and a test fails if the layer printed anything.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest

# Before anything opens a device: validation on, and a private cache so tests compile for real.
os.environ.setdefault("PORTABLE_VK_VALIDATION", "1")
os.environ["PORTABLE_CACHE_DIR"] = tempfile.mkdtemp(prefix="portable-test-cache-")
atexit.register(shutil.rmtree, os.environ["PORTABLE_CACHE_DIR"], ignore_errors=True)  # ~100 MB of kernels

from portable import config  # noqa: E402
from portable.devices import devices, open_device  # noqa: E402

_found, _failures = devices()
AVAILABLE = [d.uri for d in _found]
if config.test_devices() is not None:
    AVAILABLE = [u for u in AVAILABLE if u in config.test_devices()]


def pytest_generate_tests(metafunc):
    if "device" in metafunc.fixturenames:
        if AVAILABLE:
            metafunc.parametrize("device", AVAILABLE)
        else:
            why = "; ".join(_failures) or "no Vulkan or OpenCL device found"
            metafunc.parametrize("device", [pytest.param(None, marks=pytest.mark.skip(reason=why))])


@pytest.fixture(autouse=True)
def _no_validation_messages(request):
    """Fail a Vulkan test on any validation-layer message it caused."""
    yield
    uri = request.node.funcargs.get("device") if hasattr(request.node, "funcargs") else None
    if not uri or not str(uri).startswith("vulkan"):
        return
    backend = open_device(uri).backend
    msgs = list(getattr(backend, "validation_messages", []))
    if hasattr(backend, "validation_messages"):
        backend.validation_messages.clear()
    assert not msgs, "Vulkan validation layer reported:\n" + "\n".join(msgs)


def foreign_profile(name: str, live) -> dict:
    """Codegen options of profile `name` for kernels run on `live` (a CPU driver here): its subgroup size the
    live one (a shuffle over 32 lanes on an 8-lane subgroup reads the wrong values), and on OpenCL no inline
    PTX (NVIDIA's OpenCL takes it, PoCL does not), row-chain reductions then through workgroup memory."""
    from portable import profiles

    opts = dict(profiles.codegen_options(profiles.all_profiles()[name], live.info))
    if live.info.api == "opencl" and opts.get("opencl_asm"):
        opts = dict(opts, opencl_asm="", subgroup_reduce=False)
    return opts


def compile_and_load(source, device, tmp_path, **overrides):
    """Compile a Graph or MLIR text for `device`'s own profile with `overrides` (SPIR-V validated), save it and
    load it back: (Executable, loaded graph)."""
    import portable
    from portable import profiles
    from portable.codegen_spirv import validate
    from portable.compiler.pipeline import compile_module

    live = open_device(device)
    opts = dict(profiles.codegen_options(profiles.match(live.info), live.info), **overrides)
    text = source if isinstance(source, str) else source.to_mlir()
    exe = compile_module(text, opts, (live.info.api,))
    if live.info.api == "vulkan":
        for k in exe.kernels:
            validate(k.spirv)
    exe.save(tmp_path / "g.ptx")
    return exe, portable.load(tmp_path / "g.ptx", device=device)


def matmul_mlir(m: int, k: int, n: int, operand: str = "f32", result: str = "f32") -> str:
    """A plain (m,k)x(k,n) linalg.matmul as MLIR text: `operand` inputs, zero-filled `result` accumulator."""
    a, b, c = f"tensor<{m}x{k}x{operand}>", f"tensor<{k}x{n}x{operand}>", f"tensor<{m}x{n}x{result}>"
    return f"""
func.func @main(%a: {a}, %b: {b}) -> {c} {{
  %z = arith.constant 0.0 : {result}
  %e = tensor.empty() : {c}
  %f = linalg.fill ins(%z : {result}) outs(%e : {c}) -> {c}
  %r = linalg.matmul ins(%a, %b : {a}, {b}) outs(%f : {c}) -> {c}
  return %r : {c}
}}
"""


def depthwise_mlir(n: int, h: int, w: int, c: int, stride: int = 1, relu: bool = False, bias: bool = True) -> str:
    """3x3 depthwise NHWC, padding 1, optional bias + ReLU epilogue (the linalg a frontend produces); `bias`:
    the bias is an argument (read only by the epilogue)."""
    oh, ow = (h - 1) // stride + 1, (w - 1) // stride + 1
    x, xp = f"tensor<{n}x{h}x{w}x{c}xf32>", f"tensor<{n}x{h + 2}x{w + 2}x{c}xf32>"
    out = f"tensor<{n}x{oh}x{ow}x{c}xf32>"
    bias_arg = f", %b: tensor<{c}xf32>" if bias else ""
    epilogue = f"""
    %e = tensor.empty() : {out}
    %y = linalg.generic {{indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (d)>,
        affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}}
        ins(%r, %b : {out}, tensor<{c}xf32>) outs(%e : {out}) {{
    ^bb0(%v: f32, %bv: f32, %o: f32):
      %s = arith.addf %v, %bv : f32
      %m = arith.maximumf %s, %zero : f32
      linalg.yield %m : f32
    }} -> {out}""" if relu else ""
    return f"""module {{
  func.func @main(%x: {x}, %w: tensor<3x3x{c}xf32>{bias_arg}) -> {out} {{
    %zero = arith.constant 0.0 : f32
    %xp = tensor.pad %x low[0, 1, 1, 0] high[0, 1, 1, 0] {{
    ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):
      tensor.yield %zero : f32
    }} : {x} to {xp}
    %empty = tensor.empty() : {out}
    %acc = linalg.fill ins(%zero : f32) outs(%empty : {out}) -> {out}
    %r = linalg.depthwise_conv_2d_nhwc_hwc
      {{dilations = dense<1> : tensor<2xi64>, strides = dense<{stride}> : tensor<2xi64>}}
      ins(%xp, %w : {xp}, tensor<3x3x{c}xf32>) outs(%acc : {out}) -> {out}{epilogue}
    return {"%y" if relu else "%r"} : {out}
  }}
}}
"""


def longest_chain(exe) -> int:
    """Kernels one after another on the plan's longest dependency path (what a decode step waits for on a GPU)."""
    from portable.memory.hazards import dependencies, uses

    deps = dependencies([uses([(s, 0, 1) for s in d.slots], exe.kernels[d.kernel].access) for d in exe.dispatches])
    depth: list[int] = []
    for d in deps:
        depth.append(1 + max((depth[j] for j in d), default=0))
    return max(depth)
