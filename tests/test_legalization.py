"""Element types and ops that need legalization in a code generator (SPIR-V capabilities, ops GLSL.std.450
lacks, OpenCL C forms), as small linalg-on-tensors graphs on every device against numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest

import portable
from portable.codegen_spirv import validate
from portable.devices import open_device

RNG = np.random.default_rng(7)


def run(src: str, device: str, *inputs):
    exe = portable.compile(src, device=device)
    if device.startswith("vulkan"):
        for k in exe.executable.kernels:  # every emitted SPIR-V module must pass spirv-val
            validate(k.spirv)
    return exe(*inputs)


def elementwise(name: str, ins: list[str], out: str, shape: str, body: str) -> str:
    """A func of one rank-1 linalg.generic: `ins` element types, `out` result type, `body` lines over
    %x0, %x1 ... that end by defining %r."""
    args = ", ".join(f"%a{i}: tensor<{shape}x{t}>" for i, t in enumerate(ins))
    maps = ", ".join(["#map"] * (len(ins) + 1))
    bb = ", ".join([f"%x{i}: {t}" for i, t in enumerate(ins)] + [f"%o: {out}"])
    return f"""#map = affine_map<(d0) -> (d0)>
func.func @{name}({args}) -> tensor<{shape}x{out}> {{
  %empty = tensor.empty() : tensor<{shape}x{out}>
  %0 = linalg.generic {{indexing_maps = [{maps}], iterator_types = ["parallel"]}}
      ins({", ".join(f"%a{i}" for i in range(len(ins)))} : {", ".join(f"tensor<{shape}x{t}>" for t in ins)})
      outs(%empty : tensor<{shape}x{out}>) {{
  ^bb0({bb}):
{body}
    linalg.yield %r : {out}
  }} -> tensor<{shape}x{out}>
  return %0 : tensor<{shape}x{out}>
}}"""


def needs(device: str, limit: str) -> None:
    """Skip on a Vulkan device without the feature (SPIR-V kernels would need its capability)."""
    info = open_device(device).info
    if info.api == "vulkan" and not info.limits.get(limit):
        pytest.skip(f"{device} has no {limit} (Vulkan feature missing)")


def test_f64_buffers_and_math(device):
    """f64 needs the Float64 capability on Vulkan; exp/log/pow have no f64 form in GLSL.std.450 and run in
    f32 there, sqrt stays f64."""
    needs(device, "fp64")
    src = elementwise("f64math", ["f64", "f64"], "f64", "37", """
    %s = math.sqrt %x0 : f64
    %p = math.powf %x0, %x1 : f64
    %l = math.log %x0 : f64
    %x = math.exp %x1 : f64
    %t0 = arith.addf %s, %p : f64
    %t1 = arith.addf %l, %x : f64
    %r = arith.addf %t0, %t1 : f64""")
    a = RNG.uniform(0.5, 3.0, 37)
    b = RNG.uniform(-2.0, 2.0, 37)
    (out,) = run(src, device, a, b)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, np.sqrt(a) + a ** b + np.log(a) + np.exp(b), rtol=1e-5)


def test_i16_max(device):
    needs(device, "int16")
    src = elementwise("i16max", ["i16", "i16"], "i16", "19", "    %r = arith.maxsi %x0, %x1 : i16")
    a = RNG.integers(-30000, 30000, 19, dtype=np.int16)
    b = RNG.integers(-30000, 30000, 19, dtype=np.int16)
    (out,) = run(src, device, a, b)
    np.testing.assert_array_equal(out, np.maximum(a, b))


def test_erf(device):
    """GLSL.std.450 has no Erf: a polynomial on Vulkan (vectorized and scalar tails: 4x9 + 3)."""
    src = elementwise("erf", ["f32"], "f32", "39", "    %r = math.erf %x0 : f32")
    x = np.concatenate([np.linspace(-4, 4, 33), [0.0, 1e-4, -1e-3, 0.4999, 0.5, np.inf]]).astype(np.float32)
    (out,) = run(src, device, x)
    ref = np.array([math.erf(float(v)) for v in x], dtype=np.float32)
    np.testing.assert_allclose(out, ref, rtol=2e-6, atol=3e-7)


def test_f16_exp_vectors(device):
    """f16 math functions on 4-wide vectors (computed in f32 on Vulkan)."""
    src = elementwise("f16exp", ["f16"], "f16", "16", """
    %n = arith.negf %x0 : f16
    %r = math.exp %n : f16""")
    x = RNG.uniform(-3, 3, 16).astype(np.float16)
    (out,) = run(src, device, x)
    np.testing.assert_allclose(out.astype(np.float32), np.exp(-x.astype(np.float32)), rtol=2e-3)


def test_ceildiv_floordiv_i64(device):
    needs(device, "int64")
    src = elementwise("divs", ["i64", "i64"], "i64", "12", """
    %c = arith.ceildivsi %x0, %x1 : i64
    %f = arith.floordivsi %x0, %x1 : i64
    %k = arith.constant 1000 : i64
    %m = arith.muli %c, %k : i64
    %r = arith.addi %m, %f : i64""")
    a = np.array([7, -7, 7, -7, 0, 1, -1, 9, -9, 100, -100, 5], np.int64)
    b = np.array([2, 2, -2, -2, 3, 3, 3, 3, 3, 7, 7, -5], np.int64)
    (out,) = run(src, device, a, b)
    np.testing.assert_array_equal(out, -(-a // b) * 1000 + a // b)


@pytest.mark.parametrize("dtype", ["i8", "i32", "i64"])
@pytest.mark.parametrize("op", ["shli", "shrsi", "shrui"])
def test_shift_out_of_range(device, op, dtype):
    """Amounts >= the width (negative ones too) shift everything out, as ONNX BitShift expects."""
    if dtype == "i64":
        needs(device, "int64")
    np_t = {"i8": np.int8, "i32": np.int32, "i64": np.int64}[dtype]
    w = np.iinfo(np_t).bits
    src = elementwise("shift", [dtype, dtype], dtype, "11", f"    %r = arith.{op} %x0, %x1 : {dtype}")
    a = np.array([-8, 4, -1, 64, 5, -128, 3, 7, -3, 1, 2], np_t)
    b = np.array([1, w, -1, w - 1, w + 3, 0, -w, 2, 1, w - 1, 127], np_t)
    (out,) = run(src, device, a, b)
    ub = b.astype(np.uint64)
    u = a.view(f"u{w // 8}").astype(np.uint64)
    keep = (1 << w) - 1
    if op == "shli":
        ref = np.where(ub >= w, 0, (u << np.minimum(ub, w - 1)) & keep)
    elif op == "shrui":
        ref = np.where(ub >= w, 0, u >> np.minimum(ub, w - 1))
    else:
        ref = (a.astype(np.int64) >> np.minimum(ub, w - 1).astype(np.int64)).astype(np_t).view(f"u{w // 8}")
    np.testing.assert_array_equal(out, ref.astype(f"u{w // 8}").view(np_t))


def test_bf16(device):
    """bf16 buffers (2 bytes each) with the arithmetic in f32: SPIR-V has no bf16 type."""
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="numpy has no bfloat16 without ml_dtypes")
    src = elementwise("bf16", ["bf16", "f32"], "bf16", "13", """
    %t = arith.truncf %x1 : f32 to bf16
    %s = arith.addf %x0, %t : bf16
    %h = arith.constant 0.5 : bf16
    %m = arith.mulf %s, %h : bf16
    %r = math.exp %m : bf16""")
    a = RNG.uniform(-2, 2, 13).astype(ml_dtypes.bfloat16)
    b = RNG.uniform(-2, 2, 13).astype(np.float32)
    (out,) = run(src, device, a, b)
    assert out.dtype == ml_dtypes.bfloat16
    ref = np.exp((a.astype(np.float32) + b.astype(ml_dtypes.bfloat16).astype(np.float32)) * 0.5)
    np.testing.assert_allclose(out.astype(np.float32), ref, rtol=2e-2)


def test_iota_compare(device):
    """An index iota compared with itself (EyeLike): vector.step in the OpenCL generator."""
    src = """#map = affine_map<(d0) -> (d0)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @eye(%x: tensor<8x8xi32>) -> tensor<8x8xi32> {
  %e = tensor.empty() : tensor<8xi64>
  %iota = linalg.generic {indexing_maps = [#map], iterator_types = ["parallel"]} outs(%e : tensor<8xi64>) {
  ^bb0(%o: i64):
    %i = linalg.index 0 : index
    %c = arith.index_cast %i : index to i64
    linalg.yield %c : i64
  } -> tensor<8xi64>
  %e2 = tensor.empty() : tensor<8x8xi32>
  %r = linalg.generic {indexing_maps = [#row, #col, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%iota, %iota, %x : tensor<8xi64>, tensor<8xi64>, tensor<8x8xi32>) outs(%e2 : tensor<8x8xi32>) {
  ^bb0(%a: i64, %b: i64, %v: i32, %o: i32):
    %eq = arith.cmpi eq, %a, %b : i64
    %z = arith.constant 0 : i32
    %s = arith.select %eq, %v, %z : i32
    linalg.yield %s : i32
  } -> tensor<8x8xi32>
  return %r : tensor<8x8xi32>
}"""
    x = RNG.integers(1, 100, (8, 8), dtype=np.int32)
    (out,) = run(src, device, x)
    np.testing.assert_array_equal(out, np.where(np.eye(8, dtype=bool), x, 0))


def test_log1p_expm1_near_zero(device):
    """log1p/expm1 keep their precision near 0 (MathToSPIRV's log(1 + x) and exp(x) - 1 do not)."""
    src = elementwise("l1p", ["f32"], "f32", "12", """
    %l = math.log1p %x0 : f32
    %e = math.expm1 %x0 : f32
    %k = arith.constant 1.0e+3 : f32
    %s = arith.mulf %e, %k : f32
    %r = arith.addf %l, %s : f32""")
    x = np.array([1e-7, -1e-6, 4.5e-5, -3e-4, 0.0, 0.3, -0.7, 2.0, -1.0, 10.0, 1e-20, -20.0], np.float32)
    (out,) = run(src, device, x)
    xd = x.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):  # log1p(-1) = -inf, log1p(-20) = nan
        ref = np.log1p(xd) + 1e3 * np.expm1(xd)
    np.testing.assert_allclose(out, ref, rtol=2e-6)


def test_remf_edge_cases(device):
    """x rem ±inf is x; NaN where x is infinite or y is 0 (C fmod)."""
    src = elementwise("remf", ["f32", "f32"], "f32", "14", "    %r = arith.remf %x0, %x1 : f32")
    inf, nan = np.inf, np.nan
    a = np.array([0.0, -0.0, 5.5, -5.5, -3.0, 3.0, -1.0, 1.0, inf, -inf, 1.0, 1.0, nan, 1.0], np.float32)
    b = np.array([-2.0, 2.0, 2.0, 2.0, inf, inf, -inf, -inf, 2.0, 2.0, 0.0, -0.0, 2.0, nan], np.float32)
    (out,) = run(src, device, a, b)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(out, np.fmod(a, b))


def test_sign_extended_i64_compare(device):
    """Signed comparisons of sign-extended i64 values (ONNX Trilu on int64: an index cast to i64 against k)."""
    needs(device, "int64")
    src = elementwise("sext", ["i64"], "i64", "9", """
    %t = arith.trunci %x0 : i64 to i32
    %e = arith.extsi %t : i32 to i64
    %c = arith.constant 3 : i64
    %le = arith.cmpi sle, %e, %c : i64
    %z = arith.constant 0 : i64
    %i = linalg.index 0 : index
    %ii = arith.index_cast %i : index to i64
    %gt = arith.cmpi sgt, %ii, %c : i64
    %b = arith.andi %le, %gt : i1
    %r = arith.select %b, %x0, %z : i64""")
    x = np.array([5, 0, 3, -3, 7, -9, 2, 3, 4], np.int64)
    (out,) = run(src, device, x)
    np.testing.assert_array_equal(out, np.where((x <= 3) & (np.arange(9) > 3), x, 0))


def test_tanh_near_zero(device):
    """tanh keeps its relative precision near 0 (Mish of large negative inputs)."""
    src = elementwise("tanh", ["f32"], "f32", "10", "    %r = math.tanh %x0 : f32")
    x = np.array([4.5e-5, -1e-6, 1e-3, -0.05, 0.1249, 0.13, -0.7, 3.0, -12.0, 0.0], np.float32)
    (out,) = run(src, device, x)
    np.testing.assert_allclose(out, np.tanh(x.astype(np.float64)), rtol=2e-6)


def test_float_to_8bit_int_keeps_unsigned_values(device):
    """ONNX uint8 results arrive as signless `fptosi f32 to i8`: values 128..255 must keep their bits. SPIR-V
    kernels convert through i32 (an 8-bit OpConvertFToS saturates at 127 on NVIDIA's driver)."""
    src = elementwise("f2i8", ["f32"], "i8", "9", """
    %r = arith.fptosi %x0 : f32 to i8""")
    x = np.array([0, 1, 127, 128, 200, 255, -1, -128, 64], np.float32)
    out, = run(src, device, x)
    np.testing.assert_array_equal(out.view(np.uint8), x.astype(np.int32).astype(np.uint8))
    if device.startswith("vulkan"):
        from portable.codegen_spirv import disassemble

        asm = disassemble(portable.compile(src, device=device).executable.kernels[0].spirv)
        assert "OpConvertFToS %uchar" not in asm and "OpConvertFToS %uint" in asm
