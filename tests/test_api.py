"""The public API: inputs it takes, errors it gives, caching, save/load, pooled memory."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import portable
from portable.ir.mlir import ir

ADD_MLIR = """
func.func @main(%a: tensor<7x13xf32>, %b: tensor<7x13xf32>) -> tensor<7x13xf32> {
  %e = tensor.empty() : tensor<7x13xf32>
  %r = linalg.add ins(%a, %b : tensor<7x13xf32>, tensor<7x13xf32>) outs(%e : tensor<7x13xf32>) -> tensor<7x13xf32>
  return %r : tensor<7x13xf32>
}
"""


def _ab():
    rng = np.random.default_rng(0)
    return rng.standard_normal((7, 13)).astype(np.float32), rng.standard_normal((7, 13)).astype(np.float32)


def test_mlir_text_and_module_object(device):
    a, b = _ab()
    (out,) = portable.run(ADD_MLIR, a, b, device=device)
    np.testing.assert_allclose(out, a + b, rtol=1e-6)
    with ir.Context():
        module = ir.Module.parse(ADD_MLIR)
        (out2,) = portable.run(module, a, b, device=device)
    np.testing.assert_allclose(out2, a + b, rtol=1e-6)


def test_compiled_graph_called_many_times_reuses_buffers(device):
    exe = portable.compile(ADD_MLIR, device=device)
    a, b = _ab()
    exe(a, b)
    pool = exe.device.pool
    before = pool.allocations
    for i in range(5):
        (out,) = exe(a * i, b)
        np.testing.assert_allclose(out, a * i + b, rtol=1e-6)
    assert pool.allocations == before  # repeated runs allocate nothing new


def test_save_and_load_round_trip(device, tmp_path):
    g = portable.Graph()
    x, w = g.input((5, 8)), g.constant(np.arange(24, dtype=np.float32).reshape(8, 3))
    g.output(g.relu(g.matmul(x, w)))
    exe = portable.compile(g, device=device, targets=("vulkan", "opencl"))
    path = tmp_path / "g.ptx"
    exe.save(path)
    loaded = portable.load(path, device=device)
    xs = np.random.default_rng(3).standard_normal((5, 8)).astype(np.float32)
    np.testing.assert_allclose(loaded(xs)[0], g.reference(xs)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bad", ["vulkan:99", "opencl:99", "cuda:0", "vulkan:x", ""])
def test_bad_device_strings(bad):
    with pytest.raises(portable.DeviceNotFound) as e:
        portable.compile(ADD_MLIR, device=bad)
    assert "portable devices" in str(e.value)


def test_wrong_inputs_then_good_run(device):
    exe = portable.compile(ADD_MLIR, device=device)
    a, b = _ab()
    with pytest.raises(portable.ShapeMismatch, match="takes 2 input"):
        exe(a)
    with pytest.raises(portable.ShapeMismatch, match="expected shape"):
        exe(a[:3], b)
    with pytest.raises(portable.ShapeMismatch, match="dtype"):
        exe(a.astype(np.float64), b)
    np.testing.assert_allclose(exe(a, b)[0], a + b, rtol=1e-6)


def test_bad_mlir_and_unsupported_op_then_good_run(device):
    with pytest.raises(portable.CompileError, match="does not parse"):
        portable.compile("func.func @main(%a: tensor<4xf32> -> {", device=device)
    unsupported = """
    func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
      %s = tensor.extract_slice %a[0] [4] [1] : tensor<4xf32> to tensor<4xf32>
      %c = arith.constant 0 : index
      %v = tensor.extract %a[%c] : tensor<4xf32>
      %r = tensor.insert %v into %s[%c] : tensor<4xf32>
      return %r : tensor<4xf32>
    }"""
    with pytest.raises(portable.UnsupportedOp, match=r"tensor\.(insert|extract).* not supported"):
        portable.compile(unsupported, device=device)
    with pytest.raises(portable.UnsupportedOp, match="statically shaped"):
        portable.compile("func.func @main(%a: tensor<?xf32>) -> tensor<?xf32> { return %a : tensor<?xf32> }",
                         device=device)
    a, b = _ab()
    np.testing.assert_allclose(portable.run(ADD_MLIR, a, b, device=device)[0], a + b, rtol=1e-6)


def test_kernel_that_fails_to_build_then_good_run(device):
    exe = portable.compile(ADD_MLIR, device=device)
    k = exe.executable.kernels[0]
    import dataclasses

    broken = dataclasses.replace(k, spirv=b"\x07\x23\x02\x03" + b"\0" * 32, opencl="__kernel void main_kernel( {")
    with pytest.raises(portable.KernelBuildError):
        exe.device.backend.load_kernel(broken)
    a, b = _ab()
    np.testing.assert_allclose(exe(a, b)[0], a + b, rtol=1e-6)


def test_second_process_does_no_mlir_work(device, tmp_path):
    """A new process running a graph compiled before loads it from the cache: no compile, no MLIR import."""
    script = textwrap.dedent(f"""
        import sys, numpy as np, portable
        mlir = {ADD_MLIR!r}
        a = np.ones((7, 13), np.float32)
        out, = portable.run(mlir, a, a, device={device!r})
        assert np.allclose(out, 2)
        pipeline = sys.modules.get("portable.compiler.pipeline")
        print("COMPILES", pipeline.COMPILE_COUNT if pipeline else 0)
        print("MLIR_LOADED", "torch_mlir" in sys.modules)
    """)
    env = dict(os.environ, PORTABLE_CACHE_DIR=str(tmp_path))
    first = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    assert "COMPILES 1" in first.stdout and "MLIR_LOADED True" in first.stdout
    second = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    assert "COMPILES 0" in second.stdout and "MLIR_LOADED False" in second.stdout


def test_dump_writes_stages_even_when_cached(device, tmp_path, monkeypatch):
    """PORTABLE_DUMP=dir writes the MLIR of every stage and the kernel (SPIR-V disassembly or OpenCL C), also for a
    graph the on-disk cache already holds: dumping compiles again rather than loading the cached executable."""
    monkeypatch.setenv("PORTABLE_CACHE_DIR", str(tmp_path / "cache"))
    a, b = _ab()
    portable.compile(ADD_MLIR, device)  # now cached
    monkeypatch.setenv("PORTABLE_DUMP", str(tmp_path / "dump"))
    out, = portable.compile(ADD_MLIR, device)(a, b)
    np.testing.assert_allclose(out, a + b, rtol=1e-6)
    files = sorted(p.name for p in (tmp_path / "dump").rglob("*") if p.is_file())
    assert any(f.endswith("-input.mlir") for f in files) and any(f.endswith("-lower-kernels.mlir") for f in files)
    assert any(f.endswith(".spvasm" if device.startswith("vulkan") else ".cl") for f in files), files


def test_unsigned_inputs_share_signless_kernels(device):
    """MLIR integers are signless: a uint8 array runs through an i8 signature bit for bit."""
    src = """func.func @main(%a: tensor<6xi8>) -> tensor<6xi8> {
      %e = tensor.empty() : tensor<6xi8>
      %r = linalg.add ins(%a, %a : tensor<6xi8>, tensor<6xi8>) outs(%e : tensor<6xi8>) -> tensor<6xi8>
      return %r : tensor<6xi8> }"""
    a = np.array([0, 1, 100, 127, 128, 255], dtype=np.uint8)
    (out,) = portable.run(src, a, device=device)
    np.testing.assert_array_equal(out.view(np.uint8), (a.astype(np.uint16) * 2 % 256).astype(np.uint8))
    with pytest.raises(portable.ShapeMismatch, match="dtype"):
        portable.run(src, a.astype(np.uint16), device=device)
