"""Streaming stores (codegen_opencl/nontemporal.py): which stores take the nontemporal hint, and kernels with the hint
written as OpenCL C on every OpenCL device whose profile asks for it, against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import portable
from portable import profiles
from portable.api import CompiledGraph
from portable.codegen_opencl import nontemporal
from portable.compiler.pipeline import compile_module
from portable.devices import open_device
from portable.ir.mlir import ir
from portable.ir.util import find_ops

KERNEL = """
gpu.module @m {
  gpu.func @k(%out: memref<4096xf32>, %small: memref<4096xvector<2xf32>>, %in: memref<4096xf32>) kernel
      attributes {known_block_size = array<i32: 64, 1, 1>} {
    %c0 = arith.constant 0 : index
    %i = gpu.thread_id x
    %v = vector.load %in[%i] : memref<4096xf32>, vector<16xf32>
    %tile = memref.alloc() : memref<64xf32, #gpu.address_space<workgroup>>
    %w = vector.extract_strided_slice %v {offsets = [0], sizes = [4], strides = [1]} : vector<16xf32> to vector<4xf32>
    vector.store %w, %tile[%c0] : memref<64xf32, #gpu.address_space<workgroup>>, vector<4xf32>
    %n = vector.extract_strided_slice %v {offsets = [0], sizes = [2], strides = [1]} : vector<16xf32> to vector<2xf32>
    memref.store %n, %small[%i] : memref<4096xvector<2xf32>>
    %view = memref.subview %out[64] [1024] [1] : memref<4096xf32> to memref<1024xf32, strided<[1], offset: 64>>
    vector.store %v, %view[%i] : memref<1024xf32, strided<[1], offset: 64>>, vector<16xf32>
    gpu.return
  }
}
"""


def _marked(min_bytes: int) -> list[str]:
    with ir.Context():
        m = ir.Module.parse(KERNEL)
        count = nontemporal.mark(m.operation, min_bytes)
        names = [str(op.operands[0].type) for op in find_ops(m.operation, ("vector.store", "memref.store"))
                 if "nontemporal" in op.attributes]
        assert count == len(names)
        return names


def test_only_wide_stores_into_the_kernels_buffers_stream():
    """The kernel's buffers total 64 KiB: at or under that the 64-byte store into its output (through a view)
    takes the hint; the 8-byte store and the store into workgroup memory never do; over it nothing does."""
    assert _marked(64 * 1024) == ["vector<16xf32>"]
    assert _marked(64 * 1024 + 1) == []
    assert _marked(0) == []  # 0: the profile does not ask for streaming stores


@pytest.mark.parametrize("shape", [(64, 1024), (1000, 37), (3, 5)])
def test_streaming_stores_run(device, shape):
    """An elementwise kernel with every wide store streaming (threshold 1 byte) gives numpy's result; where its
    float16 stores are aligned the OpenCL C has the builtin (odd shapes keep plain stores for the tails)."""
    live = open_device(device)
    prof = profiles.match(live.info)
    if live.info.api != "opencl":
        pytest.skip("streaming stores are written on the OpenCL C path only (lavapipe and the H200 gained nothing)")
    if not prof.get("codegen", {}).get("nontemporal_store_bytes"):
        pytest.skip(f"profile {prof['name']} keeps plain stores (no nontemporal_store_bytes)")
    opts = dict(profiles.codegen_options(prof, live.info), nontemporal_store_bytes=1)
    g = portable.Graph()
    a, b = g.input(shape), g.input(shape)
    g.output(g.mul(g.add(a, b), a))
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal(shape).astype(np.float32) for _ in range(2)]
    exe = compile_module(g.to_mlir(), opts, ("opencl",))
    source = "".join(k.opencl for k in exe.kernels)
    if shape == (64, 1024):
        assert "__builtin_nontemporal_store(" in source
    out = CompiledGraph(exe, live)(*xs)[0]
    np.testing.assert_allclose(out, (xs[0] + xs[1]) * xs[0], rtol=1e-6, atol=1e-6)
