"""Tests of the OpenCL C code generator (portable.codegen_opencl).

Golden tests: every tests/data/opencl/NAME.mlir (a lowered gpu.module) is emitted and compared exactly with
NAME.cl next to it. After an intended change to the emitted code, regenerate the goldens with

    /tmp/venv/bin/python tests/test_codegen_opencl.py

and read the diff of tests/data/opencl/*.cl before committing it.

Execution tests build the emitted source with pyopencl on each OpenCL device (PORTABLE_TEST_DEVICES=opencl:0
filters; devices are numbered over platforms in pyopencl's order), run it on random data and compare with
numpy. They are skipped, with the reason, when pyopencl or an OpenCL device is missing.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from portable import config
from portable.codegen_opencl import OpenCLKernel, emit_opencl
from portable.errors import UnsupportedOp
from portable.ir.mlir import ir

DATA = Path(__file__).parent / "data" / "opencl"
GOLDEN = sorted(p.stem for p in DATA.glob("*.mlir"))
OPTIONS = {"f16_no_fp16": {"fp16": False}}  # emit_opencl options of a golden, by file name


def emit_text(text: str, **options) -> OpenCLKernel:
    with ir.Context():
        return emit_opencl(ir.Module.parse(text), **options)


def emit_file(name: str) -> OpenCLKernel:
    return emit_text((DATA / f"{name}.mlir").read_text(), **OPTIONS.get(name, {}))


# -- golden tests -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", GOLDEN)
def test_golden(name: str) -> None:
    expected = DATA / f"{name}.cl"
    assert expected.exists(), f"{expected} missing: run `python {__file__}` to write it"
    assert emit_file(name).source == expected.read_text(), (
        f"emitted OpenCL C differs from {expected}; if intended, regenerate with `python {__file__}`")


def test_kernel_metadata() -> None:
    k = emit_file("workgroup_reduce")
    assert (k.name, k.workgroup_size, k.num_buffers, k.push_constants, k.access) == (
        "workgroup_sum", (64, 1, 1), 2, ("p0",), ("r", "w"))
    assert "__global const float* restrict a0, __global float* restrict a1, int p0)" in k.source
    assert "cl_khr_fp64" not in k.source and "cl_khr_fp16" not in k.source
    misc = emit_file("misc_types")
    assert misc.workgroup_size == (16, 1, 1)  # from spirv.entry_point_abi
    assert "#pragma OPENCL EXTENSION cl_khr_fp16 : enable" in misc.source
    mm = emit_file("matmul_bias_relu")
    assert mm.access == ("r", "r", "r", "rw") and "float pm0[16];" in mm.source  # bounded dynamic alloc


def test_emit_outside_the_parsing_context() -> None:
    with ir.Context():
        module = ir.Module.parse((DATA / "vector4.mlir").read_text())
    assert emit_opencl(module).source == (DATA / "vector4.cl").read_text()


# -- unsupported input -------------------------------------------------------------------------------------
_KERNEL = """gpu.module @m {{
  gpu.func @k({args}) kernel attributes {{known_block_size = array<i32: 4, 1, 1>}} {{
    %i = gpu.thread_id x
    {body}
    gpu.return
  }}
}}"""


@pytest.mark.parametrize("args, body, needle", [
    ("%a: memref<4xi32>", ("%v = memref.load %a[%i] : memref<4xi32>\n"
                           "%l, %h = arith.mulsi_extended %v, %v : i32\nmemref.store %l, %a[%i] : memref<4xi32>"),
     "arith.mulsi_extended"),
    ("%a: memref<8xf32>", ("%s = memref.subview %a[0] [4] [2] : memref<8xf32> to memref<4xf32, strided<[2]>>\n"
                           "%v = memref.load %s[%i] : memref<4xf32, strided<[2]>>"), "memref.subview"),
    ("%a: memref<?xf32>", "%v = memref.load %a[%i] : memref<?xf32>", "memref<?xf32>"),
    ("%a: memref<4xf32>, %n: index", ("%m = memref.alloc(%n) : memref<?xf32>\n"
                                      "%v = memref.load %m[%i] : memref<?xf32>"), "no known upper bound"),
    ("%a: memref<10xf32>", "%v = vector.load %a[%i] : memref<10xf32>, vector<5xf32>", "vector<5xf32>"),
    ("%a: memref<4xf32>", "%v = memref.load %a[%i] : memref<4xf32>\n%w = math.ipowi %i, %i : index", "math.ipowi"),
    ("%a: memref<4xbf16>", "%v = memref.load %a[%i] : memref<4xbf16>\n%w = arith.bitcast %v : bf16 to f16",
     "only bf16 <-> i16"),
    ("%a: memref<4xf32>", "%v = memref.load %a[%i] : memref<4xf32>\n%w = arith.truncf %v downward : f32 to bf16",
     "rounding mode"),
])
def test_unsupported(args: str, body: str, needle: str) -> None:
    with pytest.raises(UnsupportedOp, match=re.escape(needle)):
        emit_text(_KERNEL.format(args=args, body=body))


def test_unsupported_op_message_shows_the_op() -> None:
    body = "%v = arith.index_cast %i : index to i32\n%w, %o = arith.addui_extended %v, %v : i32, i1"
    with pytest.raises(UnsupportedOp) as e:
        emit_text(_KERNEL.format(args="%a: memref<4xi32>", body=body))
    message = str(e.value)
    assert "`arith.addui_extended`" in message and re.search(r"at: %\S+, %\S+ = arith.addui_extended %", message)


# -- execution on OpenCL ---------------------------------------------------------------------------------------
def _cl_devices() -> tuple[list, str]:
    try:
        import pyopencl as cl
    except ImportError as e:
        return [], f"pyopencl is not installed ({e})"
    try:
        found = [d for p in cl.get_platforms() for d in p.get_devices()]
    except cl.Error as e:
        return [], f"no OpenCL platform ({e})"
    wanted = config.test_devices()
    picked = [(f"opencl:{i}", d) for i, d in enumerate(found) if wanted is None or f"opencl:{i}" in wanted]
    return picked, ("no OpenCL device found" if not found else f"PORTABLE_TEST_DEVICES={wanted} selects none")


_DEVICES, _NO_DEVICE = _cl_devices()


@pytest.fixture(scope="module", params=[d for _, d in _DEVICES] or [None], ids=[u for u, _ in _DEVICES] or ["none"])
def queue(request):
    if request.param is None:
        pytest.skip(_NO_DEVICE)
    import pyopencl as cl
    ctx = cl.Context([request.param])
    return cl.CommandQueue(ctx)


def run(queue, kernel: OpenCLKernel, arrays: list[np.ndarray], grid: tuple[int, int, int],
        scalars: tuple[int, ...] = ()) -> list[np.ndarray]:
    """Build `kernel`, run it over `grid` workgroups with `arrays` as buffers, return the buffers' contents."""
    import pyopencl as cl
    try:
        program = cl.Program(queue.context, kernel.source).build()
    except cl.Error as e:
        pytest.fail(f"build failed: {e}\n--- source ---\n{kernel.source}")
    flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
    bufs = [cl.Buffer(queue.context, flags, hostbuf=np.ascontiguousarray(a)) for a in arrays]
    k = cl.Kernel(program, kernel.name)
    k.set_args(*bufs, *(np.int32(s) for s in scalars))
    global_size = tuple(g * w for g, w in zip(grid, kernel.workgroup_size, strict=True))
    cl.enqueue_nd_range_kernel(queue, k, global_size, kernel.workgroup_size)
    out = [np.empty_like(a) for a in arrays]
    for host, buf in zip(out, bufs, strict=True):
        cl.enqueue_copy(queue, host, buf)
    queue.finish()
    return out


def close(actual, expected, rtol=4e-6, atol=1e-6, what=""):
    np.testing.assert_allclose(actual, np.asarray(expected, dtype=actual.dtype), rtol=rtol, atol=atol,
                               equal_nan=True, err_msg=what)


def test_matmul_bias_relu(queue) -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((129, 31), dtype=np.float32)
    b = rng.standard_normal((31, 257), dtype=np.float32)
    bias = rng.standard_normal(257, dtype=np.float32)
    out = np.full((129, 257), np.nan, np.float32)
    *_, got = run(queue, emit_file("matmul_bias_relu"), [a, b, bias, out], (9, 5, 1))
    close(got, np.maximum(a.astype(np.float64) @ b + bias, 0), rtol=1e-5, atol=1e-5)


def test_reduce_max(queue) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((100, 37), dtype=np.float32)
    x[7, 3] = np.nan  # arith.maximumf propagates NaN
    _, got = run(queue, emit_file("reduce_max"), [x, np.zeros(100, np.float32)], (4, 1, 1))
    close(got, x.max(axis=1), rtol=0, atol=0)


def _round_half_away(a):
    return np.sign(a) * np.floor(np.abs(a) + 0.5)


ROWS = {  # name -> numpy reference of elementwise_f32.mlir's row (a = x, b = y)
    "addf": lambda a, b: a + b, "subf": lambda a, b: a - b, "mulf": lambda a, b: a * b,
    "divf": lambda a, b: a / b, "remf": np.fmod, "negf": lambda a, b: -a,
    "maximumf": np.maximum, "minimumf": np.minimum, "maxnumf": np.fmax, "minnumf": np.fmin,
    "exp": lambda a, b: np.exp(a), "exp2": lambda a, b: np.exp2(a), "expm1": lambda a, b: np.expm1(a),
    "log": lambda a, b: np.log(b), "log2": lambda a, b: np.log2(b), "log1p": lambda a, b: np.log1p(b),
    "sqrt": lambda a, b: np.sqrt(b), "rsqrt": lambda a, b: 1 / np.sqrt(b), "tanh": lambda a, b: np.tanh(a),
    "sin": lambda a, b: np.sin(a), "cos": lambda a, b: np.cos(a), "tan": lambda a, b: np.tan(a),
    "atan": lambda a, b: np.arctan(a), "atan2": np.arctan2,
    "asin_tanh": None, "acos_tanh": None,  # of the device's f32 tanh (PoCL's tanh(inf) is 1 - 2**-24)
    "powf": lambda a, b: np.power(b, a), "fpowi3": lambda a, b: a ** 3, "absf": lambda a, b: np.abs(a),
    "floor": lambda a, b: np.floor(a), "ceil": lambda a, b: np.ceil(a),
    "round": lambda a, b: _round_half_away(a), "roundeven": lambda a, b: np.rint(a),
    "trunc": lambda a, b: np.trunc(a), "erf": lambda a, b: np.vectorize(math.erf)(a),
    "fma": lambda a, b: a * b + a, "copysign": lambda a, b: np.copysign(b, a),
    "select_olt": lambda a, b: np.where(a < b, a, b), "ugt_as_f32": lambda a, b: ~(a <= b),
    "isnan_as_f32": lambda a, b: np.isnan(a), "isinf_as_f32": lambda a, b: np.isinf(a),
    "max_neginf": lambda a, b: a, "mul_negzero": lambda a, b: b * -0.0, "sqrt_f64": lambda a, b: np.sqrt(b),
    "relu_ge": lambda a, b: np.where(a >= 0, a, 0),
}


def _row_names(name: str) -> list[str]:
    return re.findall(r"^\s*%r\d+ = .*// (\w+)$", (DATA / f"{name}.mlir").read_text(), re.MULTILINE)


def test_elementwise_f32(queue) -> None:
    assert _row_names("elementwise_f32") == list(ROWS)
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(256) * 2).astype(np.float32)
    y = rng.uniform(0.1, 3, 256).astype(np.float32)
    x[:9] = [np.nan, np.inf, -np.inf, -0.0, 0.0, 2.5, -2.5, 0.5, 1.25]
    y[3], y[4], y[8] = 0.0, 0.0, 1.25
    *_, got = run(queue, emit_file("elementwise_f32"), [x, y, np.zeros((len(ROWS), 256), np.float32)], (4, 1, 1))
    a, b = x.astype(np.float64), y.astype(np.float64)
    k = list(ROWS).index
    th = got[k("tanh")].astype(np.float64)
    refs = {**ROWS, "asin_tanh": lambda a, b: np.arcsin(th), "acos_tanh": lambda a, b: np.arccos(th)}
    with np.errstate(all="ignore"):
        for row, (name, ref) in enumerate(refs.items()):
            close(got[row], ref(a, b), what=name)
    assert not np.signbit(got[k("maximumf"), 3]) and np.signbit(got[k("minimumf"), 3])  # max(-0, +0) = +0


def _wrap32(v) -> np.ndarray:
    return (np.asarray(v, dtype=np.int64) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def _sext8(v):
    return ((v & 0xFF) ^ 0x80) - 0x80


def _int_rows(a: np.ndarray, b: np.ndarray) -> dict:
    A, B = a.astype(np.int64), b.astype(np.int64)
    ua, ub = a.view(np.uint32).astype(np.int64), b.view(np.uint32).astype(np.int64)
    s = B & 31
    q = np.abs(A) // np.abs(B) * np.sign(A) * np.sign(B)
    rows = {
        "addi": A + B, "subi": A - B, "muli": A * B, "divsi": q, "remsi": A - B * q,
        "floordivsi": A // B, "ceildivsi": -(-A // B), "divui": ua // ub, "remui": ua % ub,
        "ceildivui": -(-ua // ub), "shli": A << s, "shrsi": A >> s, "shrui": ua >> s,
        "minsi": np.minimum(A, B), "maxsi": np.maximum(A, B), "minui": np.minimum(ua, ub),
        "maxui": np.maximum(ua, ub), "andi": A & B, "ori": A | B, "xori": A ^ B, "absi": np.abs(A),
        "select_slt": np.where(A < B, A, B),
        "cmpi_eq": A == B, "cmpi_ne": A != B, "cmpi_slt": A < B, "cmpi_sle": A <= B, "cmpi_sgt": A > B,
        "cmpi_sge": A >= B, "cmpi_ult": ua < ub, "cmpi_ule": ua <= ub, "cmpi_ugt": ua > ub, "cmpi_uge": ua >= ub,
        "extsi_i1": -(A < B).astype(np.int64), "trunc_i8_extsi": _sext8(A), "trunc_i8_extui": A & 0xFF,
        "i8_add_extsi": _sext8(A + B), "mulhi_i64": (A * B) >> 32, "index_roundtrip": A * 7,
        "sitofp_half_fptosi": np.trunc(a.astype(np.float32) * np.float32(0.5)),
        "uitofp_bits": a.view(np.uint32).astype(np.float32).view(np.int32),
        "fptoui_abs": np.abs(a.astype(np.float32)).astype(np.uint32), "i1_xor_extui": A >= B,
        "ctpop": np.bitwise_count(a.view(np.uint32)),
    }
    return {k: _wrap32(np.asarray(v).astype(np.int64)) for k, v in rows.items()}


def test_int_ops(queue) -> None:
    rng = np.random.default_rng(3)
    a = rng.integers(-1000, 1000, 256).astype(np.int32)
    b = rng.integers(1, 50, 256).astype(np.int32) * rng.choice([-1, 1], 256).astype(np.int32)
    a[:8] = [2**31 - 1, -(2**31), -7, 7, -7, 7, 0, -1]
    b[:8] = [3, 3, 2, -2, -2, 2, -5, 35]
    rows = _int_rows(a, b)
    assert _row_names("int_ops") == list(rows)
    *_, got = run(queue, emit_file("int_ops"), [a, b, np.zeros((len(rows), 256), np.int32)], (4, 1, 1))
    for k, (name, ref) in enumerate(rows.items()):
        np.testing.assert_array_equal(got[k], ref, err_msg=name)


def test_loops(queue) -> None:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((64, 16), dtype=np.float32)
    x[5, 9] = np.nan
    n = rng.integers(-100000, 100000, 64).astype(np.int32)
    n[:3] = [0, -(2**31), 1]
    out, cnt = np.zeros((4, 64), np.float32), np.full((3, 64), -1, np.int32)
    *_, out, cnt = run(queue, emit_file("loops"), [x, n, out, cnt], (2, 1, 1))
    close(out[0], x.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5, what="sum")
    close(out[1], x.max(axis=1), rtol=0, atol=0, what="maximumf")
    assert (out[2] == 0).all() and (out[3] == 1).all(), "swapped iter_args"
    np.testing.assert_array_equal(cnt[0], (x > 0).sum(axis=1))
    np.testing.assert_array_equal(cnt[1], [int(v).bit_length() for v in np.abs(n.astype(np.int64))])
    np.testing.assert_array_equal(cnt[2], np.where(n % 2 != 0, n, -1))


def test_workgroup_memory_and_barrier(queue) -> None:
    x = np.random.default_rng(5).standard_normal(1024, dtype=np.float32)
    _, got = run(queue, emit_file("workgroup_reduce"), [x, np.zeros(16, np.float32)], (16, 1, 1), scalars=(3,))
    close(got, 3 * x.astype(np.float64).reshape(16, 64).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_vector4(queue) -> None:
    rng = np.random.default_rng(6)
    x = rng.standard_normal((64, 8), dtype=np.float32)
    y = rng.standard_normal((64, 8), dtype=np.float32)
    x[3, 1] = np.nan
    arrays = [x, y, np.zeros((64, 8), np.float32), np.zeros(64, np.float32), np.zeros((64, 4), np.int32)]
    *_, out, outs, outi = run(queue, emit_file("vector4"), arrays, (4, 1, 1))
    a, b, sc = x[:, :4].astype(np.float64), y[:, 4:].astype(np.float64), x[:, 7:8].astype(np.float64)
    first = np.maximum(a * b + sc, 2.0)
    first[:, 0] = a[:, 2]
    close(out[:, :4], first, what="fma/maximumf/insert")
    close(out[:, 4:], np.stack([a[:, 0], b[:, 1], a[:, 2], b[:, 3]], 1) + [1, 2, 3, 4], what="shuffle")
    with np.errstate(invalid="ignore"):
        sel = np.where(a < b, a, b)
        close(outs, np.exp(sel).sum(axis=1) + a.max(axis=1), rtol=1e-5, what="reductions")
        ai = np.trunc(x[:, :4] * np.float32(10)).astype(np.int64)
    lim = np.array([-5, 0, 5, 100])
    res = np.minimum(ai // 3, lim) + (ai < lim)
    res[:, 3] = ai.max(axis=1)
    ok = ~np.isnan(x[:, :4]).any(axis=1)  # fptosi of NaN is undefined
    np.testing.assert_array_equal(outi[ok], res[ok])


def test_nd_vectors(queue) -> None:
    x = np.random.default_rng(8).standard_normal((16, 8), dtype=np.float32)
    out, outs = np.full((16, 8), -1, np.float32), np.zeros((16, 2), np.float32)
    _, out, outs = run(queue, emit_file("nd_vectors"), [x, out, outs], (1, 1, 1))
    want, wants = np.full((16, 8), -1.0), np.zeros((16, 2))
    xd = x.astype(np.float64)
    for t in range(8):
        r = 2 * t
        m = 2 * (xd[r:r + 2, :4] + xd[r:r + 2, 4:])
        ins = np.stack([m[1], m[1]])
        ins[1, 0] = m[0, 3]
        sel = np.where(m > ins, m, ins)
        want[r:r + 2, :4] = sel
        wants[r] = sel.sum(), xd[:4, t].sum()
        wants[r + 1, 0] = sel[0, 0] * sel[1, 3]
        if t < 4:
            want[:4, 4 + t] = 3 * xd[:4, t]
    close(out, want, what="out")
    close(outs, wants, rtol=1e-5, what="outs")


def test_pipeline_matmul_with_2d_vectors(queue) -> None:
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((8, 16), dtype=np.float32), rng.standard_normal((16, 32), dtype=np.float32)
    _, c, _ = run(queue, emit_file("matmul_vec2d"), [b, np.full((8, 32), np.nan, np.float32), a], (1, 1, 1))
    close(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_f16_without_fp16_extension(queue) -> None:
    rng = np.random.default_rng(7)
    x = rng.uniform(-4, 4, 64).astype(np.float16)
    y = rng.uniform(-4, 4, 64).astype(np.float16)
    x[:4], y[:4] = [0.01, 300, np.nan, -0.0], [0.001, 300, 1, 0.0]  # f16 subnormal, overflow, NaN, -0
    v = rng.uniform(-2, 2, (16, 4)).astype(np.float16)
    kernel = emit_file("f16_no_fp16")
    assert "cl_khr_fp16" not in kernel.source and "vload_half4" in kernel.source
    _, _, out, vout = run(queue, kernel, [x, y, np.zeros((6, 64), np.float16), v], (4, 1, 1))
    with np.errstate(all="ignore"):
        prod = x * y  # numpy rounds each f16 op to f16, as MLIR's f16 ops do
        exact = {0: prod, 1: prod + x, 3: (x.astype(np.float32) + y).astype(np.float16),
                 4: (np.arange(64) * 1001).astype(np.float16), 5: np.minimum(prod + x, np.float16(0.1))}
        for row, ref in exact.items():
            np.testing.assert_array_equal(out[row], ref, err_msg=f"row {row}")
        close(out[2], np.exp(x), rtol=1e-3, atol=0, what="exp")
        np.testing.assert_array_equal(vout, np.maximum(v * np.float16(1.5), v))


_BF16_ND = """gpu.module @b {
  gpu.func @bf16_nd(%x: memref<16x8xbf16>, %y: memref<16x8xbf16>, %out: memref<16x8xbf16>, %outs: memref<8x2xi16>)
      kernel attributes {known_block_size = array<i32: 8, 1, 1>, known_grid_size = array<i32: 1, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %pad = ub.poison : bf16
    %t = gpu.thread_id x
    %r = arith.muli %t, %c2 : index
    %a = vector.transfer_read %x[%r, %c0], %pad {in_bounds = [true, true]} : memref<16x8xbf16>, vector<2x8xbf16>
    %b = vector.transfer_read %y[%r, %c0], %pad {in_bounds = [true, true]} : memref<16x8xbf16>, vector<2x8xbf16>
    %k = arith.constant dense<[[1.0, -2.0, 0.5, 0x3FC0, 0.375, -0.25, 8.0, 1.0],
                               [3.0, 0x4049, -1.0, 2.0, 0.125, 5.0, -3.5, 0.75]]> : vector<2x8xbf16>
    %p = arith.mulf %a, %k : vector<2x8xbf16>
    %s = arith.addf %p, %b : vector<2x8xbf16>
    %gt = arith.cmpf ogt, %s, %b : vector<2x8xbf16>
    %sel = arith.select %gt, %s, %b : vector<2x8xi1>, vector<2x8xbf16>
    vector.transfer_write %sel, %out[%r, %c0] {in_bounds = [true, true]} : vector<2x8xbf16>, memref<16x8xbf16>
    %col = vector.transfer_read %x[%c0, %t], %pad {in_bounds = [true, true]} : memref<16x8xbf16>, vector<4x1xbf16>
    %colf = vector.shape_cast %col : vector<4x1xbf16> to vector<4xbf16>
    %sum = vector.reduction <add>, %colf : vector<4xbf16> into bf16
    %bits = arith.bitcast %sum : bf16 to i16
    memref.store %bits, %outs[%t, %c0] : memref<8x2xi16>
    %e = vector.extract %s[1, 2] : bf16 from vector<2x8xbf16>
    %ebits = arith.bitcast %e : bf16 to i16
    memref.store %ebits, %outs[%t, %c1] : memref<8x2xi16>
    gpu.return
  }
}"""


def _bf16_rne(x: np.ndarray) -> np.ndarray:
    """f32 -> bf16 bits (uint16), rounded to nearest even (finite values)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def _bf16_values(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def test_bf16_nd_vectors(queue) -> None:
    """bf16 as ushort buffers and float values: 2-D transfers (vload8 rows, a strided column), a dense
    constant with hex elements, mulf+addf rounded once, a compare on the unrounded sum, bitcasts to i16."""
    rng = np.random.default_rng(12)
    x = _bf16_rne(rng.uniform(-4, 4, (16, 8)).astype(np.float32))
    y = _bf16_rne(rng.uniform(-4, 4, (16, 8)).astype(np.float32))
    kernel = emit_text(_BF16_ND)
    assert "__global const ushort* restrict a0" in kernel.source and "vload8" in kernel.source
    _, _, out, outs = run(queue, kernel, [x, y, np.zeros((16, 8), np.uint16), np.zeros((8, 2), np.int16)],
                          (1, 1, 1))
    k = np.array([[1.0, -2.0, 0.5, 1.5, 0.375, -0.25, 8.0, 1.0], [3.0, 3.140625, -1.0, 2.0, 0.125, 5.0, -3.5, 0.75]],
                 np.float32)
    fx, fy = _bf16_values(x), _bf16_values(y)
    s = fx * np.tile(k, (8, 1)) + fy  # exact products, one f32 rounding in the sum
    np.testing.assert_array_equal(out, np.where(s > fy, _bf16_rne(s), y))
    np.testing.assert_array_equal(outs[:, 0].view(np.uint16), _bf16_rne(fx[:4].sum(axis=0)))
    np.testing.assert_array_equal(outs[:, 1].view(np.uint16), _bf16_rne(s[1::2, 2]))


@pytest.mark.parametrize("name", GOLDEN)
def test_golden_sources_build(queue, name: str) -> None:
    import pyopencl as cl
    source = (DATA / f"{name}.cl").read_text()
    if "cl_khr_fp16" in source and "cl_khr_fp16" not in queue.device.extensions:
        pytest.skip(f"{queue.device.name} lacks cl_khr_fp16")
    try:
        cl.Program(queue.context, source).build()
    except cl.Error as e:
        pytest.fail(f"{name}.cl does not build: {e}")


_CLANG = next((c for c in ("clang", *(f"clang-{v}" for v in range(20, 13, -1))) if shutil.which(c)), None)


@pytest.mark.skipif(_CLANG is None, reason="no clang to check OpenCL C syntax with")
@pytest.mark.parametrize("name", GOLDEN)
def test_golden_sources_pass_clang(name: str) -> None:
    """Syntax and types of every golden, fp16 included (PoCL cannot build those), by clang's OpenCL 1.2 front end."""
    cmd = [_CLANG, "-x", "cl", "-cl-std=CL1.2", "-Xclang", "-finclude-default-header", "-fsyntax-only",
           "-Werror", str(DATA / f"{name}.cl")]
    done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def regenerate() -> None:
    """Rewrite every golden .cl from its .mlir (run this file as a script)."""
    for name in GOLDEN:
        path = DATA / f"{name}.cl"
        source = emit_file(name).source
        changed = not path.exists() or path.read_text() != source
        path.write_text(source)
        print(f"{'updated' if changed else 'same   '} {path}")


if __name__ == "__main__":
    regenerate()


SHUFFLE = """
gpu.module @x {
  gpu.func @shuffle(%a: memref<32xf32>) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %t = gpu.thread_id x
    %v = memref.load %a[%t] : memref<32xf32>
    %m = arith.constant 16 : i32
    %w = arith.constant 32 : i32
    %s, %ok = gpu.shuffle xor %v, %m, %w : f32
    memref.store %s, %a[%t] : memref<32xf32>
    gpu.return
  }
}
"""


def test_subgroup_shuffle_needs_the_devices_spelling():
    """gpu.shuffle (row-chain reductions) has no OpenCL C 1.2 form: NVIDIA's profile spells it as inline PTX
    (opencl_asm = "ptx"); without a spelling the op is refused by name."""
    from portable.errors import UnsupportedOp

    with ir.Context():
        module = ir.Module.parse(SHUFFLE)
        src = emit_opencl(module, asm="ptx").source
        assert "shfl.sync.bfly.b32" in src and re.search(r"float v\d+ = pt_shuffle_xor_float\(v\d+, 16\);", src)
        with pytest.raises(UnsupportedOp, match="gpu.shuffle"):
            emit_opencl(module)
