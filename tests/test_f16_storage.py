"""Float types a Vulkan device lacks.

- f16 with 16-bit storage but no f16 arithmetic (codegen_spirv/f16_storage.py; the arm-mali-valhall profile):
  kernels load, store and convert f16 and compute in f32, rounding to f16 after each op. Compiled here for this
  device's own profile without the Float16 capability, spirv-val'd (which rejects any other use of f16 without
  it), and run against numpy.
- f16 without 16-bit storage (compiler/graph/widen_f16.py; generic, Bifrost, Adreno 6xx): held as f32, converted at
  the boundary, explicit roundings kept.
- f64 without shaderFloat64: a clear error."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import compile_and_load, matmul_mlir

from portable import profiles
from portable.devices import open_device

ROWS = """
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
#col = affine_map<(i, j) -> (j)>
func.func @main(%x: tensor<37x130xf16>, %b: tensor<130xf16>) -> tensor<37x130xf16> {
  %ninf = arith.constant 0xFC00 : f16
  %zero = arith.constant 0.0 : f16
  %e = tensor.empty() : tensor<37x130xf16>
  %er = tensor.empty() : tensor<37xf16>
  %m0 = linalg.fill ins(%ninf : f16) outs(%er : tensor<37xf16>) -> tensor<37xf16>
  %m = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<37x130xf16>) outs(%m0 : tensor<37xf16>) {
  ^bb0(%a: f16, %acc: f16):
    %y = arith.maximumf %a, %acc : f16
    linalg.yield %y : f16
  } -> tensor<37xf16>
  %y = linalg.generic {indexing_maps = [#id, #row, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %m, %b : tensor<37x130xf16>, tensor<37xf16>, tensor<130xf16>) outs(%e : tensor<37x130xf16>) {
  ^bb0(%a: f16, %mv: f16, %bv: f16, %o: f16):
    %d = arith.subf %a, %mv : f16
    %p = math.exp %d : f16
    %s = arith.mulf %p, %bv : f16
    %r = arith.maximumf %s, %zero : f16
    linalg.yield %r : f16
  } -> tensor<37x130xf16>
  return %y : tensor<37x130xf16>
}
"""


def _storage_only(device) -> dict:
    live = open_device(device)
    if live.info.api != "vulkan":
        pytest.skip("f16 storage without f16 arithmetic is a SPIR-V matter: OpenCL C reads half with vload_half")
    caps = profiles.codegen_options(profiles.match(live.info), live.info)["spirv_caps"]
    if "StorageBuffer16BitAccess" not in caps:
        pytest.skip(f"{device} has no 16-bit storage")
    return {"spirv_caps": [c for c in caps if c != "Float16"], "fp16": False}


def _caps(exe) -> set[int]:
    from portable.conformance.execute import spirv_capabilities

    return set().union(*(spirv_capabilities(k.spirv) for k in exe.kernels))


def test_rows_compute_in_f32_and_store_f16(device, tmp_path):
    exe, loaded = compile_and_load(ROWS, device, tmp_path, **_storage_only(device))
    assert 9 not in _caps(exe) and 4433 in _caps(exe)  # no Float16; StorageBuffer16BitAccess
    rng = np.random.default_rng(3)
    x = rng.standard_normal((37, 130)).astype(np.float16)
    b = rng.standard_normal(130).astype(np.float16)
    y, = loaded(x, b)
    assert y.dtype == np.float16
    d = (x - x.max(axis=1, keepdims=True)).astype(np.float16)  # each op rounded to f16, as the kernel does
    want = np.maximum((np.exp(d.astype(np.float32)).astype(np.float16) * b).astype(np.float16), np.float16(0))
    np.testing.assert_allclose(y.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=1e-3)
    loaded.close()


@pytest.mark.parametrize("m,k,n", [(1, 256, 100), (33, 100, 70), (64, 128, 64)])
def test_f16_matmul_accumulates_in_f32(device, tmp_path, m, k, n):
    exe, loaded = compile_and_load(matmul_mlir(m, k, n, "f16", "f32"), device, tmp_path, **_storage_only(device))
    assert 9 not in _caps(exe)
    rng = np.random.default_rng(m + k + n)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    y, = loaded(a, b)
    np.testing.assert_allclose(y, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-4, atol=1e-4 * np.sqrt(k))
    loaded.close()


# ---------------------------------------------------------------- no 16-bit storage: f16 held as f32 (widen_f16)
ROUNDED = """
#id = affine_map<(i) -> (i)>
func.func @main(%x: tensor<16xf32>, %h: tensor<16xf16>) -> (tensor<16xf32>, tensor<16xf16>) {
  %e32 = tensor.empty() : tensor<16xf32>
  %e16 = tensor.empty() : tensor<16xf16>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<16xf32>) outs(%e32 : tensor<16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = arith.truncf %a : f32 to f16
    %w = arith.extf %t : f16 to f32
    linalg.yield %w : f32
  } -> tensor<16xf32>
  %s = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%h : tensor<16xf16>) outs(%e16 : tensor<16xf16>) {
  ^bb0(%a: f16, %o: f16):
    %m = arith.mulf %a, %a : f16
    linalg.yield %m : f16
  } -> tensor<16xf16>
  return %r, %s : tensor<16xf32>, tensor<16xf16>
}
"""


def _no_16bit_storage(device) -> dict:
    live = open_device(device)
    if live.info.api != "vulkan":
        pytest.skip("f16 is widened for Vulkan targets only: OpenCL C reads half with vload_half")
    caps = profiles.codegen_options(profiles.match(live.info), live.info)["spirv_caps"]
    return {"spirv_caps": [c for c in caps if c not in ("Float16", "StorageBuffer16BitAccess")], "fp16": False}


def test_f16_is_held_as_f32_without_16_bit_storage(device, tmp_path):
    """The caller passes and gets float16; the device holds float32 (format 4). Before, the kernel read the f16
    buffer as an f32 array: every element of an f16 matmul came out wrong, without an error."""
    exe, loaded = compile_and_load(matmul_mlir(33, 100, 70, "f16", "f16"), device, tmp_path,
                                   **_no_16bit_storage(device))
    assert exe.format_version == 4
    assert [(s.dtype, s.device) for s in loaded.executable.inputs] == [("float16", "float32")] * 2
    assert not _caps(exe) & {9, 4433}
    rng = np.random.default_rng(4)
    a = rng.standard_normal((33, 100)).astype(np.float16)
    b = rng.standard_normal((100, 70)).astype(np.float16)
    y, = loaded(a, b)
    assert y.dtype == np.float16
    np.testing.assert_allclose(y.astype(np.float32), a.astype(np.float32) @ b.astype(np.float32), rtol=1e-2,
                               atol=0.1)
    loaded.close()


def test_roundings_to_f16_stay_exact(device, tmp_path):
    """A truncf to f16 inside the graph rounds in f32 arithmetic as the conversion would (nearest, ties to even;
    f16 subnormals; infinity from 65520 on); an op computed in f16 is rounded after it."""
    _, loaded = compile_and_load(ROUNDED, device, tmp_path, **_no_16bit_storage(device))
    x = np.array([1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, 65504.0, 65519.0, 65520.0, -70000.0, 2.0 ** -24,
                  2.0 ** -25, 3 * 2.0 ** -25, 1e-10, -0.0, np.inf, np.nan, 0.1, 2049.0, 3.0e-5], np.float32)
    x[12] = np.array(0x7FFFFFFF, np.uint32).view(np.float32)  # a NaN whose payload would carry into the sign
    h = np.array([1.5, 3.1, 200.0, 300.0, -0.01, 2.0 ** -8, 255.9, 0.333, 7.0, 11.0, 13.0, 17.0, 19.0, 23.0,
                  29.0, 31.0], np.float16)
    r, s = loaded(x, h)
    with np.errstate(over="ignore"):  # 65520 and -70000 overflow to infinity, as they should
        np.testing.assert_array_equal(r, x.astype(np.float16).astype(np.float32))
        np.testing.assert_array_equal(s, h * h)  # numpy's f16 multiply rounds the exact product once, as here
    loaded.close()


F64 = """
#id = affine_map<(i) -> (i)>
func.func @main(%x: tensor<8xf64>) -> tensor<8xf64> {
  %e = tensor.empty() : tensor<8xf64>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf64>) outs(%e : tensor<8xf64>) {
  ^bb0(%a: f64, %o: f64):
    %m = arith.mulf %a, %a : f64
    linalg.yield %m : f64
  } -> tensor<8xf64>
  return %r : tensor<8xf64>
}
"""


def test_float64_without_shader_float64_is_a_clear_error():
    """Before, the SPIR-V conversion failed with a dump of the kernel ('failed to legalize operation
    gpu.func')."""
    from portable.compiler.pipeline import compile_module
    from portable.errors import UnsupportedOp

    with pytest.raises(UnsupportedOp, match="without 64-bit floats.*shaderFloat64"):
        compile_module(F64, profiles.codegen_options(profiles.all_profiles()["generic"]), ("vulkan",))
    exe = compile_module(F64, profiles.codegen_options(profiles.all_profiles()["lavapipe"]), ("vulkan",))
    assert exe.kernels


def _f16_matmul(m: int, k: int, n: int) -> str:
    """An ONNX f16 MatMul as the frontend writes it: f16 operands, an f32 accumulator, the result rounded to f16."""
    head = matmul_mlir(m, k, n, "f16", "f32")
    body = head[:head.rindex("  return")].replace(f"-> tensor<{m}x{n}xf32> {{", f"-> tensor<{m}x{n}xf16> {{", 1)
    return body + f"""  %e16 = tensor.empty() : tensor<{m}x{n}xf16>
  %h = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
      iterator_types = ["parallel", "parallel"]}} ins(%r : tensor<{m}x{n}xf32>) outs(%e16 : tensor<{m}x{n}xf16>) {{
  ^bb0(%v: f32, %o: f16):
    %t = arith.truncf %v : f32 to f16
    linalg.yield %t : f16
  }} -> tensor<{m}x{n}xf16>
  return %h : tensor<{m}x{n}xf16>
}}
"""


@pytest.mark.parametrize("m,k,n", [(64, 256, 256), (33, 100, 70)])
def test_valhall_profile_compiles_f16_matmuls(m, k, n):
    """The arm-mali-valhall profile itself (16-bit storage, no Float16): the kernel that writes the f16 result
    names f16 only inside its types (memref<64x256xf16>), which a word-boundary test for 'f16' once missed."""
    from portable.codegen_spirv import validate
    from portable.compiler.pipeline import compile_module

    exe = compile_module(_f16_matmul(m, k, n),
                         profiles.codegen_options(profiles.all_profiles()["arm-mali-valhall"]), ("vulkan",))
    assert 9 not in _caps(exe)
    for kernel in exe.kernels:
        validate(kernel.spirv)


BF16 = """
#id = affine_map<(i) -> (i)>
func.func @main(%x: tensor<40xbf16>, %y: tensor<40xf32>) -> (tensor<40xbf16>, tensor<40xf32>) {
  %e16 = tensor.empty() : tensor<40xbf16>
  %e32 = tensor.empty() : tensor<40xf32>
  %s = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%x, %y : tensor<40xbf16>, tensor<40xf32>) outs(%e16 : tensor<40xbf16>) {
  ^bb0(%a: bf16, %b: f32, %o: bf16):
    %w = arith.extf %a : bf16 to f32
    %m = arith.mulf %w, %b : f32
    %t = arith.truncf %m : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<40xbf16>
  %u = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<40xbf16>) outs(%e32 : tensor<40xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %w = arith.extf %a : bf16 to f32
    linalg.yield %w : f32
  } -> tensor<40xf32>
  return %s, %u : tensor<40xbf16>, tensor<40xf32>
}
"""


def test_bf16_without_int16_keeps_its_bits_in_storage(device, tmp_path):
    """bf16 kernels hold the 16 bits as i16 (bf16_values.py); without Int16 (arm-mali-valhall) those bits stay
    in storage and registers hold them zero-extended in an i32 (f16_storage.i16_registers_as_i32). Before, no
    bf16 kernel compiled for that profile."""
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="numpy's bfloat16 comes from ml_dtypes")
    opts = _storage_only(device)
    opts["spirv_caps"] = [c for c in opts["spirv_caps"] if c != "Int16"]
    exe, loaded = compile_and_load(BF16, device, tmp_path, **opts)
    assert not _caps(exe) & {9, 22}  # no Float16, no Int16
    rng = np.random.default_rng(6)
    x = rng.standard_normal(40).astype(ml_dtypes.bfloat16)
    y = rng.standard_normal(40).astype(np.float32)
    s, u = loaded(x, y)
    np.testing.assert_array_equal(u, x.astype(np.float32))
    np.testing.assert_array_equal(s, (x.astype(np.float32) * y).astype(ml_dtypes.bfloat16))
    loaded.close()


I16 = """
#id = affine_map<(i) -> (i)>
func.func @main(%x: tensor<8xi16>) -> tensor<8xi16> {
  %e = tensor.empty() : tensor<8xi16>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<8xi16>) outs(%e : tensor<8xi16>) {
  ^bb0(%a: i16, %o: i16):
    %m = arith.addi %a, %a : i16
    linalg.yield %m : i16
  } -> tensor<8xi16>
  return %r : tensor<8xi16>
}
"""


def test_int16_arithmetic_without_shader_int16_is_a_clear_error():
    """arm-mali-valhall has 16-bit storage but no Int16: int16 arithmetic there was a SPIR-V legalization dump."""
    from portable.compiler.pipeline import compile_module
    from portable.errors import UnsupportedOp

    with pytest.raises(UnsupportedOp, match="no 16-bit integers.*shaderInt16"):
        compile_module(I16, profiles.codegen_options(profiles.all_profiles()["arm-mali-valhall"]), ("vulkan",))
    assert compile_module(I16, profiles.codegen_options(profiles.all_profiles()["arm-mali-valhall"]), ("opencl",))
