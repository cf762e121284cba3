"""One `device` fixture for every test: parametrized over each available Vulkan and OpenCL device.

PORTABLE_TEST_DEVICES=vulkan:0,opencl:0 filters. Vulkan devices run with the Khronos validation layer on,
and a test fails if the layer printed anything.
"""

from __future__ import annotations

import os
import tempfile

import pytest

# Before anything opens a device: validation on, and a private cache so tests compile for real.
os.environ.setdefault("PORTABLE_VK_VALIDATION", "1")
os.environ["PORTABLE_CACHE_DIR"] = tempfile.mkdtemp(prefix="portable-test-cache-")

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
