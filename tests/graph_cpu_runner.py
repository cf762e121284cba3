"""The graph builder's test runner: a Graph's MLIR parsed and verified with the upstream bindings, then run on
the CPU through MLIR's LLVM JIT (a test-only lowering), as the independent check that the IR means what
`Graph.reference` says (tests/test_graph_builder.py)."""

from __future__ import annotations

import ctypes
import functools

import numpy as np
import pytest

from portable.frontend.graph import Graph


# -- MLIR bindings: imported here only ------------------------------------------------------------------
@functools.cache
def _mlir():
    """(ir, passmanager, execution_engine, runtime) from the torch-mlir wheel, or skip saying why."""
    pytest.importorskip("torch_mlir", reason="the MLIR Python bindings (torch-mlir wheel) are not installed")
    from torch_mlir import execution_engine, ir, passmanager, runtime

    return ir, passmanager, execution_engine, runtime


def parse_and_verify(text: str):
    ir = _mlir()[0]
    ctx = ir.Context()
    module = ir.Module.parse(text, ctx)
    assert module.operation.verify()
    return ctx, module


# Test-only CPU lowering: bufferize, results copied into out-params, linalg -> loops -> LLVM. (Its
# hoist-static-allocs option crashes this wheel when a value is returned twice, so it is left off.)
# math.erf/tanh become libm calls; f16 math is computed in f32.
_CPU_PIPELINE = (
    "builtin.module(one-shot-bufferize{bufferize-function-boundaries=1 "
    "function-boundary-type-conversion=identity-layout-map},"
    "buffer-results-to-out-params{modify-public-functions=1},"
    "func.func(convert-linalg-to-loops),math-extend-to-supported-types{target-type=f32},"
    "expand-strided-metadata,lower-affine,convert-scf-to-cf,convert-math-to-llvm,convert-math-to-libm,"
    "convert-arith-to-llvm,finalize-memref-to-llvm,convert-func-to-llvm,convert-cf-to-llvm,"
    "reconcile-unrealized-casts)"
)


class _Unranked(ctypes.Structure):
    _fields_ = [("rank", ctypes.c_int64), ("desc", ctypes.c_void_p)]


def _strided(u: _Unranked, itemsize: int) -> np.ndarray:
    r = u.rank
    f = (ctypes.c_int64 * (3 + 2 * r)).from_address(u.desc)  # allocated, aligned, offset, sizes, strides
    base = np.frombuffer((ctypes.c_char * itemsize).from_address(f[1] + f[2] * itemsize), f"u{itemsize}")
    return np.lib.stride_tricks.as_strided(base, list(f[3:3 + r]), [s * itemsize for s in f[3 + r:3 + 2 * r]])


@ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.POINTER(_Unranked), ctypes.POINTER(_Unranked))
def _memref_copy(itemsize, src, dst):  # the C runner-utils symbol that lowered memref.copy calls
    _strided(dst.contents, itemsize)[...] = _strided(src.contents, itemsize)


def run_cpu(g: Graph, *arrays: np.ndarray) -> list[np.ndarray]:
    """Execute g.to_mlir() on the CPU; the independent check that the IR means what reference() says."""
    ir, passmanager, execution_engine, runtime = _mlir()
    ctx, module = parse_and_verify(g.to_mlir())
    with ctx:
        module.body.operations[0].attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
        passmanager.PassManager.parse(_CPU_PIPELINE).run(module.operation)
        engine = execution_engine.ExecutionEngine(module, opt_level=1)
        engine.raw_register_runtime("memrefCopy", ctypes.cast(_memref_copy, ctypes.c_void_p))
        ins = [np.array(a, order="C") for a in arrays]  # keeps rank 0, unlike ascontiguousarray
        outs = [np.zeros(t.shape, t.dtype) for t in g.outputs]
        engine.invoke("main", *[ctypes.pointer(ctypes.pointer(runtime.get_ranked_memref_descriptor(a)))
                                for a in ins + outs])
    return outs


# -- helpers --------------------------------------------------------------------------------------------
def rand(shape, dtype="float32", seed=0, lo=-2.0, hi=2.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype.startswith("float"):
        return rng.uniform(lo, hi, shape).astype(dtype)
    return rng.integers(-50, 50, shape).astype(dtype)


TOL = {"float32": {"rtol": 2e-5, "atol": 2e-6}, "float16": {"rtol": 2e-3, "atol": 2e-3},
       "int32": {"rtol": 0, "atol": 0}, "int64": {"rtol": 0, "atol": 0}}


def check(g: Graph, *arrays: np.ndarray, tol: dict | None = None) -> tuple[np.ndarray, ...]:
    """Verify g's IR, run it on the CPU and compare with g.reference; returns the reference."""
    arrays = arrays or tuple(rand(t.shape, t.dtype, seed=k) for k, t in enumerate(g.inputs))
    ref = g.reference(*arrays)
    got = run_cpu(g, *arrays)
    for k, (r, c) in enumerate(zip(ref, got)):
        assert c.shape == r.shape and c.dtype == r.dtype, k
        np.testing.assert_allclose(c.astype(np.float64), r.astype(np.float64), err_msg=f"output {k}",
                                   **(tol or TOL[r.dtype.name]))
    return ref
