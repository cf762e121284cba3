"""int64 on Vulkan devices without 64-bit integers (compiler/graph/narrow_i64.py): computed as int32, converted at the
boundary, checked to fit. Compiled here without the Int64 capability (as for the Mali and Adreno profiles), run on
this device through a saved and reloaded executable."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import compile_and_load

import portable
from portable.errors import CompileError, ShapeMismatch

AFFINE = "affine_map<(d0) -> (d0)>"


def _scaled(constant: int) -> str:
    """y = x * constant + index (int64 in and out)."""
    return f"""
func.func @main(%x: tensor<6xi64>) -> tensor<6xi64> {{
  %c = arith.constant {constant} : i64
  %e = tensor.empty() : tensor<6xi64>
  %r = linalg.generic {{indexing_maps = [{AFFINE}, {AFFINE}], iterator_types = ["parallel"]}}
      ins(%x : tensor<6xi64>) outs(%e : tensor<6xi64>) {{
  ^bb0(%a: i64, %o: i64):
    %i = linalg.index 0 : index
    %ii = arith.index_cast %i : index to i64
    %m = arith.muli %a, %c : i64
    %s = arith.addi %m, %ii : i64
    linalg.yield %s : i64
  }} -> tensor<6xi64>
  return %r : tensor<6xi64>
}}
"""


def _no_int64(device):
    from portable import profiles
    from portable.devices import open_device

    live = open_device(device)
    if live.info.api != "vulkan":
        pytest.skip("int64 is narrowed for Vulkan targets only: OpenCL C has 64-bit long")
    caps = profiles.codegen_options(profiles.match(live.info), live.info)["spirv_caps"]
    return {"spirv_caps": [c for c in caps if c != "Int64"]}


def test_int64_runs_as_int32_where_the_device_has_no_64_bit_integers(device, tmp_path):
    exe, loaded = compile_and_load(_scaled(-3), device, tmp_path, **_no_int64(device))
    assert exe.format_version == 3
    assert [(s.dtype, s.device, s.nbytes) for s in loaded.executable.inputs] == [("int64", "int32", 24)]
    assert [(sig.dtype, sig.device) for _, sig in loaded.executable.outputs] == [("int64", "int32")]
    x = np.array([0, 1, -7, 100000, -715827880, 715827882], np.int64)  # products near both ends of int32
    y, = loaded(x)
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, x * -3 + np.arange(6))
    with pytest.raises(ShapeMismatch, match="do not fit int32"):
        loaded(np.array([0, 0, 0, 2**40, 0, 0], np.int64))
    np.testing.assert_array_equal(loaded(x)[0], y)  # still usable
    loaded.close()


def test_int64_constant_outside_int32_is_a_clear_error(device, tmp_path):
    with pytest.raises(CompileError, match="does not fit in 32 bits"):
        compile_and_load(_scaled(5_000_000_000), device, tmp_path, **_no_int64(device))
    exe = portable.compile(_scaled(5_000_000_000), device=device)  # with 64-bit integers it stays int64
    x = np.arange(6, dtype=np.int64)
    np.testing.assert_array_equal(exe(x)[0], x * 5_000_000_000 + np.arange(6))
    exe.close()
