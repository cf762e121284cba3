"""bf16 graphs on every device: buffers of 2-byte bfloat16, arithmetic in f32.

Neither SPIR-V nor OpenCL C has a bf16 type. Both code generators keep bf16 buffers as their 16-bit encoding
and compute in f32; a chain of bf16 ops is computed in f32 and rounded to nearest even where its value is
stored, selected, carried or converted (what the SPIR-V path's emulation passes give, and what the OpenCL
generator mirrors so both targets compute the same numbers). References are numpy in f32 with the bf16
rounding done on the bits here, and ml_dtypes for the bfloat16 arrays.
"""

from __future__ import annotations

import numpy as np
import pytest

import portable
from portable.devices import open_device

ml_dtypes = pytest.importorskip("ml_dtypes", reason="numpy has no bfloat16 without ml_dtypes")
BF16 = ml_dtypes.bfloat16
RNG = np.random.default_rng(11)


def bf16_bits(x) -> np.ndarray:
    """f32 -> bf16 bits, rounded to nearest even; NaN becomes the quiet NaN 0x7FC0."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(np.asarray(x, np.float32)), np.uint16(0x7FC0), r)


def f64_to_bf16(d) -> np.ndarray:
    """f64 -> bf16 rounded once to nearest even, for values in bf16's normal range, zeros, infinities and NaN
    (which conversions through f32 miss in some cases): round the f64 significand to bf16's 8 bits, then the
    value is exact in f32 (or past its range: infinity)."""
    u = np.asarray(d, np.float64).view(np.uint64)
    r = ((u + np.uint64(2**44 - 1) + ((u >> np.uint64(45)) & np.uint64(1))) >> np.uint64(45)) << np.uint64(45)
    with np.errstate(over="ignore"):
        f = np.where(np.isnan(d), np.float32(np.nan), r.view(np.float64).astype(np.float32))
    return bf16_bits(f).view(BF16)


def to_bf16(x) -> np.ndarray:
    """f32 values rounded to bf16, as a bfloat16 array."""
    return bf16_bits(x).view(BF16)


def random_bf16(n: int, lo: float = -4, hi: float = 4) -> np.ndarray:
    return RNG.uniform(lo, hi, n).astype(np.float32).astype(BF16)


def assert_same_bits(out: np.ndarray, ref: np.ndarray, what: str = "") -> None:
    """Equal bf16 values bit for bit; any NaN for a NaN."""
    assert out.dtype == BF16, out.dtype
    o, r = out.view(np.uint16), ref.view(np.uint16)
    nan_o, nan_r = np.isnan(out.astype(np.float32)), np.isnan(ref.astype(np.float32))
    np.testing.assert_array_equal(nan_o, nan_r, err_msg=f"{what}: NaN lanes")
    bad = np.nonzero((o != r) & ~nan_r)[0]
    assert bad.size == 0, (f"{what}: {bad.size} lanes differ, first at {bad[:4]}: got "
                           f"{[hex(v) for v in o[bad[:4]]]}, want {[hex(v) for v in r[bad[:4]]]}")


def elementwise(name: str, ins: list[str], out: str, n: int, body: str) -> str:
    """A func of one rank-1 linalg.generic over `ins` element types; `body` defines %r from %x0, %x1, ..."""
    args = ", ".join(f"%a{i}: tensor<{n}x{t}>" for i, t in enumerate(ins))
    maps = ", ".join(["#map"] * (len(ins) + 1))
    bb = ", ".join([f"%x{i}: {t}" for i, t in enumerate(ins)] + [f"%o: {out}"])
    return f"""#map = affine_map<(d0) -> (d0)>
func.func @{name}({args}) -> tensor<{n}x{out}> {{
  %empty = tensor.empty() : tensor<{n}x{out}>
  %0 = linalg.generic {{indexing_maps = [{maps}], iterator_types = ["parallel"]}}
      ins({", ".join(f"%a{i}" for i in range(len(ins)))} : {", ".join(f"tensor<{n}x{t}>" for t in ins)})
      outs(%empty : tensor<{n}x{out}>) {{
  ^bb0({bb}):
{body}
    linalg.yield %r : {out}
  }} -> tensor<{n}x{out}>
  return %0 : tensor<{n}x{out}>
}}"""


def run(src: str, device: str, *inputs) -> list[np.ndarray]:
    exe = portable.compile(src, device=device)
    try:
        return [np.asarray(o) for o in exe(*inputs)]
    finally:
        exe.close()


# -- elementwise -----------------------------------------------------------------------------------------
def test_chain_rounds_once(device):
    """a*b + c, a compare and a select: the product and sum are computed in f32 and rounded once (the
    product of two bf16 values is exact in f32), the compare sees the unrounded sum, the select its rounding."""
    n = 256  # a multiple of the vector widths: vectorized loads, stores and arithmetic
    src = elementwise("fma_select", ["bf16", "bf16", "bf16"], "bf16", str(n), """
    %p = arith.mulf %x0, %x1 : bf16
    %s = arith.addf %p, %x2 : bf16
    %c = arith.cmpf olt, %s, %x2 : bf16
    %m = arith.negf %s : bf16
    %h = arith.constant 0.5 : bf16
    %q = arith.mulf %m, %h : bf16
    %r = arith.select %c, %q, %s : bf16""")
    a, b, c = random_bf16(n), random_bf16(n), random_bf16(n, -64, 64)
    (out,) = run(src, device, a, b, c)
    f = [x.astype(np.float32) for x in (a, b, c)]
    s = f[0] * f[1] + f[2]
    assert_same_bits(out, to_bf16(np.where(s < f[2], -s * np.float32(0.5), s)))
    once = to_bf16(f[0] * f[1] + f[2]).astype(np.float32)
    twice = to_bf16(to_bf16(f[0] * f[1]).astype(np.float32) + f[2]).astype(np.float32)
    assert (once != twice).any(), "the data no longer tell one rounding from two"


def test_math_within_one_ulp(device):
    """exp, division and sqrt on bf16 (computed in f32): within one bf16 ulp of numpy's f32 result, whose
    last f32 bit may differ on a device and flip a rounding."""
    n = 64
    src = elementwise("bf16math", ["bf16", "bf16"], "bf16", str(n), """
    %e = math.exp %x0 : bf16
    %d = arith.divf %e, %x1 : bf16
    %a = math.absf %x1 : bf16
    %q = math.sqrt %a : bf16
    %r = arith.addf %d, %q : bf16""")
    a, b = random_bf16(n), random_bf16(n, 0.25, 4)
    (out,) = run(src, device, a, b)
    fa, fb = a.astype(np.float32), b.astype(np.float32)
    ref = np.exp(fa) / fb + np.sqrt(np.abs(fb))
    np.testing.assert_allclose(out.astype(np.float32), ref, rtol=2.0**-8, atol=0)


# -- conversions -----------------------------------------------------------------------------------------
_F32_EDGES = np.array([
    0x3F808000,  # 1 + 2^-8: a tie, to the even 1.0
    0x3F818000,  # a tie, to the even 0x3F82
    0x3F808001,  # just above a tie: up
    0x3F807FFF,  # just below a tie: down
    0xBF818000,  # a negative tie
    0x7F7FFFFF,  # the largest f32: rounds to infinity
    0x7F7F7FFF,  # just below the tie with infinity: the largest bf16
    0x7F800000, 0xFF800000,  # infinities stay
    0x80000000, 0x00000000,  # signed zeros
    0x00008000, 0x00018000, 0x00007FFF,  # subnormal ties and the smallest subnormals
    0x007FFFFF,  # the largest subnormal: rounds to the smallest normal
    0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FFFFFFF,  # NaNs (a signalling one, payloads lost by rounding)
], dtype=np.uint32)


def test_f32_to_bf16(device):
    x = np.concatenate([_F32_EDGES, RNG.integers(0, 2**32, 492, dtype=np.uint32)]).view(np.float32)
    src = elementwise("truncf", ["f32"], "bf16", str(x.size), "    %r = arith.truncf %x0 : f32 to bf16")
    (out,) = run(src, device, x)
    assert_same_bits(out, bf16_bits(x).view(BF16), "truncf")
    finite = ~np.isnan(x)
    np.testing.assert_array_equal(out[finite].view(np.uint16), x[finite].astype(BF16).view(np.uint16))


def test_bf16_to_f32_every_value(device):
    """arith.extf of all 65536 bf16 encodings: exact, NaNs stay NaN."""
    x = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(BF16)
    src = elementwise("extf", ["bf16"], "f32", str(x.size), "    %r = arith.extf %x0 : bf16 to f32")
    (out,) = run(src, device, x)
    want = (np.arange(2**16, dtype=np.uint32) << 16).view(np.float32)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(out), nan)
    np.testing.assert_array_equal(out[~nan].view(np.uint32), want[~nan].view(np.uint32))


def test_bitcast_i16(device):
    """bitcast i16 -> bf16, an add in f32, bitcast bf16 -> i16: the bits of the rounded sum."""
    n = 64
    x = RNG.integers(-2**15, 2**15, n, dtype=np.int16)
    x[:4] = [0x7F80, -0x8000, 0x0001, 0x7F81]  # inf, -0.0, the smallest subnormal, a signalling NaN
    c = random_bf16(n)
    src = elementwise("bitcasts", ["i16", "bf16"], "i16", str(n), """
    %b = arith.bitcast %x0 : i16 to bf16
    %s = arith.addf %b, %x1 : bf16
    %r = arith.bitcast %s : bf16 to i16""")
    (out,) = run(src, device, x, c)
    with np.errstate(invalid="ignore"):
        want = bf16_bits(x.view(BF16).astype(np.float32) + c.astype(np.float32))
    np.testing.assert_array_equal(out.view(np.uint16), want)


_ROUNDS_TWICE = np.array([2**24 + 2**16 + 1, -(2**24 + 3 * 2**16 - 1)])  # f32 rounds to a bf16 tie, then to even


def convert_graph(name: str, ins: list[str], n: int, body: str) -> str:
    """A rank-1 linalg.generic with one bf16 result per line of `body` (`%rK = ...` from %x0, %x1, ...)."""
    outs = body.count("%r")
    ttypes = [f"tensor<{n}x{t}>" for t in ins]
    res = ", ".join([f"tensor<{n}xbf16>"] * outs)
    return f"""#map = affine_map<(d0) -> (d0)>
func.func @{name}({", ".join(f"%a{i}: {t}" for i, t in enumerate(ttypes))}) -> ({res}) {{
  %e = tensor.empty() : tensor<{n}xbf16>
  %0:{outs} = linalg.generic {{indexing_maps = [{", ".join(["#map"] * (len(ins) + outs))}],
                             iterator_types = ["parallel"]}}
      ins({", ".join(f"%a{i}" for i in range(len(ins)))} : {", ".join(ttypes)})
      outs({", ".join(["%e"] * outs)} : {res}) {{
  ^bb0({", ".join([f"%x{i}: {t}" for i, t in enumerate(ins)] + [f"%o{k}: bf16" for k in range(outs)])}):
{body}
    linalg.yield {", ".join(f"%r{k}" for k in range(outs))} : {", ".join(["bf16"] * outs)}
  }} -> ({res})
  return {", ".join(f"%0#{k}" for k in range(outs))} : {res}
}}"""


def test_int_to_bf16_through_f32(device):
    """sitofp/uitofp to bf16 round to f32, then to bf16, as ml_dtypes and ONNX's Cast do (and as every device
    must, to agree): 2^24 + 2^16 + 1 goes to the f32 2^24 + 2^16, a bf16 tie, then to even 2^24."""
    i = np.concatenate([_ROUNDS_TWICE, [2**31 - 1, -2**31, 0, 257, 0x7FFF, -3]]).astype(np.int32)
    big = i.astype(np.int64) * 2**20 + 1  # past f32's significand in i64 as well
    src = convert_graph("int_to_bf16", ["i32", "i64"], i.size, """
    %r0 = arith.sitofp %x0 : i32 to bf16
    %r1 = arith.uitofp %x0 : i32 to bf16
    %r2 = arith.sitofp %x1 : i64 to bf16""")
    out = run(src, device, i, big)
    assert_same_bits(out[0], i.astype(np.float32).astype(BF16), "sitofp i32")
    assert_same_bits(out[1], i.view(np.uint32).astype(np.float32).astype(BF16), "uitofp i32")
    assert_same_bits(out[2], big.astype(np.float32).astype(BF16), "sitofp i64")
    assert (out[0][:2] != f64_to_bf16(i[:2].astype(np.float64))).all(), "the data no longer round twice"


def test_f64_to_bf16_through_f32(device):
    info = open_device(device).info
    if info.api == "vulkan":
        pytest.skip("the SPIR-V path has no truncf f64->bf16 (its bf16 expansion starts at f32)")
    if "cl_khr_fp64" not in info.limits.get("extensions", ()):
        pytest.skip(f"{device} has no cl_khr_fp64")
    d = np.array([1 + 2.0**-8 + 2.0**-40, 1 + 2.0**-8, -(1 + 3 * 2.0**-8 - 2.0**-40), 1e300, -1e-300, np.nan,
                  3.0e38, 65536.5])
    src = convert_graph("f64_to_bf16", ["f64"], d.size, "    %r0 = arith.truncf %x0 : f64 to bf16")
    (out,) = run(src, device, d)
    with np.errstate(over="ignore"):
        assert_same_bits(out, d.astype(np.float32).astype(BF16), "truncf f64")
    assert (out[[0, 2]] != f64_to_bf16(d[[0, 2]])).all(), "the data no longer round twice"


# -- contractions and reductions ---------------------------------------------------------------------------
def test_matmul(device):
    """bf16 x bf16 matmul, accumulated in f32 and rounded to bf16 once (integer data: every f32 sum is exact,
    whatever the order; the results need rounding to bf16's 8-bit significand), and accumulated in bf16 itself
    (data small enough that every partial sum is exact in bf16)."""
    m, k, n = 16, 64, 32
    src = f"""func.func @mm(%a: tensor<{m}x{k}xbf16>, %b: tensor<{k}x{n}xbf16>, %s: tensor<{m}x{k}xbf16>,
    %t: tensor<{k}x{n}xbf16>) -> (tensor<{m}x{n}xbf16>, tensor<{m}x{n}xbf16>) {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{m}x{n}xf32>
  %acc = linalg.fill ins(%z : f32) outs(%e : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %p = linalg.matmul ins(%a, %b : tensor<{m}x{k}xbf16>, tensor<{k}x{n}xbf16>)
                     outs(%acc : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %eb = tensor.empty() : tensor<{m}x{n}xbf16>
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                        iterator_types = ["parallel", "parallel"]}} ins(%p : tensor<{m}x{n}xf32>)
      outs(%eb : tensor<{m}x{n}xbf16>) {{
  ^bb0(%x: f32, %o: bf16):
    %y = arith.truncf %x : f32 to bf16
    linalg.yield %y : bf16
  }} -> tensor<{m}x{n}xbf16>
  %zb = arith.constant 0.0 : bf16
  %accb = linalg.fill ins(%zb : bf16) outs(%eb : tensor<{m}x{n}xbf16>) -> tensor<{m}x{n}xbf16>
  %q = linalg.matmul ins(%s, %t : tensor<{m}x{k}xbf16>, tensor<{k}x{n}xbf16>)
                     outs(%accb : tensor<{m}x{n}xbf16>) -> tensor<{m}x{n}xbf16>
  return %r, %q : tensor<{m}x{n}xbf16>, tensor<{m}x{n}xbf16>
}}"""
    a = RNG.integers(-9, 10, (m, k)).astype(BF16)
    b = RNG.integers(-9, 10, (k, n)).astype(BF16)
    s = (RNG.integers(-2, 3, (m, k)) * 0.5).astype(BF16)
    t = RNG.integers(-2, 3, (k, n)).astype(BF16)  # |partial sums| <= 128 in steps of 0.5: exact in bf16
    r, q = run(src, device, a, b, s, t)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    assert (np.abs(exact) > 256).any(), "the data no longer need rounding"
    assert_same_bits(r.reshape(-1), exact.astype(np.float32).astype(BF16).reshape(-1), "f32 accumulation")
    assert_same_bits(q.reshape(-1), (s.astype(np.float64) @ t.astype(np.float64)).astype(BF16).reshape(-1),
                     "bf16 accumulation")


def test_reductions(device):
    """Row sums (exact partial sums) and row maxima of bf16, reduced in bf16."""
    rows, cols = 8, 128
    src = f"""func.func @red(%x: tensor<{rows}x{cols}xbf16>, %y: tensor<{rows}x{cols}xbf16>)
    -> (tensor<{rows}xbf16>, tensor<{rows}xbf16>) {{
  %z = arith.constant 0.0 : bf16
  %lo = arith.constant 0xFF80 : bf16
  %e = tensor.empty() : tensor<{rows}xbf16>
  %s0 = linalg.fill ins(%z : bf16) outs(%e : tensor<{rows}xbf16>) -> tensor<{rows}xbf16>
  %m0 = linalg.fill ins(%lo : bf16) outs(%e : tensor<{rows}xbf16>) -> tensor<{rows}xbf16>
  %s = linalg.reduce ins(%x : tensor<{rows}x{cols}xbf16>) outs(%s0 : tensor<{rows}xbf16>) dimensions = [1]
    (%a: bf16, %acc: bf16) {{
      %v = arith.addf %a, %acc : bf16
      linalg.yield %v : bf16
    }}
  %m = linalg.reduce ins(%y : tensor<{rows}x{cols}xbf16>) outs(%m0 : tensor<{rows}xbf16>) dimensions = [1]
    (%a: bf16, %acc: bf16) {{
      %v = arith.maximumf %a, %acc : bf16
      linalg.yield %v : bf16
    }}
  return %s, %m : tensor<{rows}xbf16>, tensor<{rows}xbf16>
}}"""
    x = (RNG.integers(-1, 2, (rows, cols)) * 0.75).astype(BF16)  # |partial sums| <= 96 in steps of 0.25
    y = random_bf16(rows * cols, -1e4, 1e4).reshape(rows, cols)
    s, m = run(src, device, x, y)
    assert_same_bits(s, x.astype(np.float64).sum(axis=1).astype(BF16), "sum")
    assert_same_bits(m, y.max(axis=1), "max")
