"""Row chains (compiler/dispatch/row_chains.py): softmax and layernorm as one kernel on profiles that allow it, and the
multi-kernel form where the rows do not fit or the profile shares reductions over a workgroup."""

from __future__ import annotations

import re

import numpy as np
import pytest

import portable
from portable import profiles
from portable.codegen_spirv import validate
from portable.compiler.pipeline import compile_module
from portable.devices import open_device
from portable.errors import CompileError

SHAPES = [(1, 1), (3, 7), (70, 1000), (5, 4097)]


def _softmax(rows, cols, dtype="float32"):
    g = portable.Graph()
    g.output(g.softmax(g.mul(g.input((rows, cols), dtype), 0.125), axis=-1))
    return g, [(rows, cols)]


def _layernorm(rows, cols, dtype="float32"):
    """Composed as the bench builds it: mean, centre, variance, normalize, scale and shift."""
    g = portable.Graph()
    x, gamma, beta = g.input((rows, cols), dtype), g.input((cols,), dtype), g.input((cols,), dtype)
    xc = g.sub(x, g.mean(x, axis=-1, keepdims=True))
    var = g.mean(g.mul(xc, xc), axis=-1, keepdims=True)
    g.output(g.add(g.mul(g.mul(xc, g.rsqrt(g.add(var, 1e-5))), gamma), beta))
    return g, [(rows, cols), (cols,), (cols,)]


BUILD = {"softmax": _softmax, "layernorm": _layernorm}


def _options(device, **overrides):
    live = open_device(device)
    return live, dict(profiles.codegen_options(profiles.match(live.info), live.info), **overrides)


def _run(g, shapes, device, tmp_path, dtype="float32", **overrides):
    """Compile with the device's profile (plus overrides), run from a saved file, check against numpy."""
    live, opts = _options(device, **overrides)
    exe = compile_module(g.to_mlir(), opts, (live.info.api,))
    if live.info.api == "vulkan":
        for k in exe.kernels:
            validate(k.spirv)
    path = tmp_path / "g.ptx"
    exe.save(path)
    rng = np.random.default_rng(11)
    xs = [rng.standard_normal(s).astype(dtype) for s in shapes]
    tol = 2e-2 if dtype == "float16" else 2e-5
    out, = portable.load(path, device=device)(*xs)
    ref, = g.reference(*xs)
    np.testing.assert_allclose(out.astype(np.float32), ref.astype(np.float32), rtol=tol, atol=tol)
    return exe


def _shared(device) -> int:
    """Workgroup memory rows may take on this device (a GPU's 48 KiB where the device has that much)."""
    live, _ = _options(device)
    return min(49152, int(live.info.limits.get("shared_memory_bytes") or 16384))


def _fuses(device) -> bool:
    _, opts = _options(device)
    return bool(opts.get("row_fusion_private_bytes")) and not opts.get("reduction_threads")


@pytest.mark.parametrize("family", ["softmax", "layernorm"])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{r}x{c}" for r, c in SHAPES])
def test_one_kernel(device, tmp_path, family, shape):
    g, shapes = BUILD[family](*shape)
    exe = _run(g, shapes, device, tmp_path)
    if not _fuses(device):
        pytest.skip(f"the profile of {device} keeps one kernel per op (no row_fusion_private_bytes)")
    assert len(exe.kernels) == 1 and len(exe.dispatches) == 1


@pytest.mark.parametrize("family", ["softmax", "layernorm"])
def test_one_kernel_f16(device, tmp_path, family):
    live, opts = _options(device, row_fusion_private_bytes=0)
    g, shapes = BUILD[family](6, 1000, "float16")
    try:
        compile_module(g.to_mlir(), opts, (live.info.api,))
    except CompileError as e:
        pytest.skip(f"f16 {family} does not compile for {device} even in the multi-kernel form: {str(e)[:160]}")
    exe = _run(g, shapes, device, tmp_path, dtype="float16")
    if _fuses(device):
        assert len(exe.kernels) == 1


@pytest.mark.parametrize("family", ["softmax", "layernorm"])
@pytest.mark.parametrize("shape", [(3, 300), (5, 1000), (2, 4097)], ids=["3x300", "5x1000", "2x4097"])
def test_one_workgroup_per_row(device, tmp_path, family, shape):
    """GPU profiles (`reduction_threads`): one kernel, one workgroup per row, its threads sharing every op
    through workgroup memory and barriers."""
    g, shapes = BUILD[family](*shape)
    exe = _run(g, shapes, device, tmp_path, reduction_threads=64, row_fusion_shared_bytes=_shared(device))
    # (Softmax rows of 4097 pass 16 KiB of workgroup memory: one is computed again where it is read.)
    assert [k.workgroup_size for k in exe.kernels] == [(64, 1, 1)]
    assert int(np.prod(exe.dispatches[0].grid)) == shape[0]


@pytest.mark.parametrize("family", ["softmax", "layernorm"])
def test_one_workgroup_per_row_256_threads(device, tmp_path, family):
    """The NVIDIA profile's 256 threads: partials are combined in two levels (256 -> 32 -> 1)."""
    g, shapes = BUILD[family](4, 1100)
    exe = _run(g, shapes, device, tmp_path, reduction_threads=256, workgroup_invocations=256,
               row_fusion_shared_bytes=_shared(device))
    assert [k.workgroup_size for k in exe.kernels] == [(256, 1, 1)]


def test_workgroup_profiles_fall_back(device, tmp_path):
    """Without a workgroup-memory budget for rows, GPU profiles keep one kernel per reduction (each shared by a
    workgroup)."""
    g, shapes = _softmax(3, 4097)
    exe = _run(g, shapes, device, tmp_path, reduction_threads=64)
    # The max, the exponentials and the sum (with the division) are kernels of their own; the scaling is
    # computed again inside the max (compiler/graph/reduction_inputs.py) and, in place, before the exponentials.
    assert len(exe.kernels) >= 3
    assert any(k.workgroup_size == (64, 1, 1) for k in exe.kernels)


@pytest.mark.parametrize("family", ["softmax", "layernorm"])
@pytest.mark.parametrize("cols,threads", [(100, 32), (384, 64), (256, 64), (512, 128), (1024, 256), (64, 32)])
def test_short_rows_share_fewer_threads(device, tmp_path, family, cols, threads):
    """Rows shorter than two columns per thread of `reduction_threads` (a decoder's RMSNorm over 384, attention
    softmax over 256) stay one kernel on fewer threads per row, 4 columns each (tiles.row_threads), down to 32."""
    g, shapes = BUILD[family](9, cols)
    exe = _run(g, shapes, device, tmp_path, reduction_threads=256, row_fusion_shared_bytes=_shared(device))
    assert [k.workgroup_size for k in exe.kernels] == [(threads, 1, 1)]
    assert int(np.prod(exe.dispatches[0].grid)) == 9


@pytest.mark.parametrize("family", ["softmax", "layernorm"])
@pytest.mark.parametrize("cols", [384, 256, 100])
def test_short_rows_with_the_nvidia_row_options(device, tmp_path, family, cols):
    """Short rows under everything the nvidia profile turns on for rows (registers, vec4 runs of columns,
    subgroup shuffles where this device's Vulkan subgroup divides 64), run and checked here."""
    live, opts = _options(device)
    sg = int(opts.get("subgroup_size") or 0)
    shuffles = live.info.api == "vulkan" and 2 <= sg and 64 % sg == 0
    g, shapes = BUILD[family](7, cols)
    exe = _run(g, shapes, device, tmp_path, reduction_threads=256, row_fusion_shared_bytes=_shared(device),
               row_registers=32, row_vector_columns=4, subgroup_reduce=shuffles)
    assert len(exe.kernels) == 1


@pytest.mark.parametrize("family", ["softmax", "layernorm"])
@pytest.mark.parametrize("rows,cols,serial", [(2 * 4096, 256, 2), (4 * 4096, 128, 4), (4096, 256, 1),
                                              (4096 + 2, 128, 1), (2 * 4096, 384, 1)])
def test_short_rows_run_serially(device, tmp_path, family, rows, cols, serial):
    """With `row_workgroup_columns` (the nvidia profile's 384), a workgroup takes short rows one after the other
    until they cover that many columns (compiler/schedule/serial_rows.py), where the rows divide and the grid keeps
    tiles.SERIAL_ROWS_MIN_GRID workgroups; under the nvidia profile's row options, run and checked here."""
    from portable.compiler.strategy import tiles

    assert tiles.SERIAL_ROWS_MIN_GRID == 4096  # the shapes above are chosen around it
    live, opts = _options(device)
    sg = int(opts.get("subgroup_size") or 0)
    shuffles = live.info.api == "vulkan" and 2 <= sg and 64 % sg == 0
    g, shapes = BUILD[family](rows, cols)
    exe = _run(g, shapes, device, tmp_path, reduction_threads=256, row_fusion_shared_bytes=_shared(device),
               row_registers=32, row_vector_columns=4, subgroup_reduce=shuffles, row_workgroup_columns=384)
    assert len(exe.kernels) == 1
    assert sorted(exe.dispatches[0].grid) == [1, 1, rows // serial]


@pytest.mark.parametrize("family", ["softmax", "layernorm"])
def test_rows_past_the_workgroup_count_run_serially(device, tmp_path, family):
    """More rows than the device's workgroup count (the Mali and Adreno profiles' 65535 against a batch of 65536
    attention rows): each workgroup takes the fewest power-of-two rows that bring the grid within it, still one
    kernel; rows no such power of two divides keep one kernel per op."""
    g, shapes = BUILD[family](256, 96)
    exe = _run(g, shapes, device, tmp_path, reduction_threads=64, row_fusion_shared_bytes=_shared(device),
               max_workgroup_count=[64, 64, 64])
    assert len(exe.kernels) == 1
    assert sorted(exe.dispatches[0].grid) == [1, 1, 64]  # 4 rows per workgroup
    g, shapes = BUILD[family](255, 96)
    exe = _run(g, shapes, device, tmp_path, reduction_threads=64, row_fusion_shared_bytes=_shared(device),
               max_workgroup_count=[64, 64, 64])
    assert len(exe.kernels) > 1


@pytest.mark.parametrize("profile", ["amd-rdna2", "amd-rdna3", "intel-xe", "arm-mali-valhall", "arm-mali-bifrost",
                                     "qualcomm-adreno-6xx", "qualcomm-adreno-7xx", "nvidia"])
@pytest.mark.parametrize("family,rows,cols", [("softmax", 65536, 256), ("layernorm", 32768, 384),
                                              ("layernorm", 4096, 1024), ("softmax", 512, 16384)])
def test_gpu_profiles_one_kernel(profile, family, rows, cols):
    """Every GPU family's profile runs softmax and layernorm rows as one kernel, a workgroup per row (and rows one
    after the other past the profile's workgroup count; rows past workgroup memory computed again where read),
    for both APIs; compiled only (the kernels of these
    profiles run on this host's drivers in the strategies conformance suite)."""
    g, _ = BUILD[family](rows, cols)
    opts = profiles.codegen_options(profiles.all_profiles()[profile])
    for api in ("vulkan", "opencl"):
        exe = compile_module(g.to_mlir(), opts, (api,))
        assert len(exe.kernels) == 1, (api, len(exe.kernels))
        assert np.prod(exe.dispatches[0].grid) <= opts.get("max_workgroup_count", [65535])[0]


@pytest.mark.parametrize("profile,in_registers", [("amd-rdna2", True), ("amd-rdna3", True), ("intel-xe", True),
                                                  ("nvidia", True), ("arm-mali-valhall", False),
                                                  ("qualcomm-adreno-7xx", False)])
def test_gpu_profiles_keep_rows_in_registers(profile, in_registers):
    """AMD, Intel and NVIDIA keep a layernorm row's values in registers between its reductions (row_registers:
    no workgroup-memory array as long as the row); Mali and Adreno, with fewer registers per thread, keep the
    row in workgroup memory."""
    g, _ = BUILD["layernorm"](64, 4096)
    exe = compile_module(g.to_mlir(), profiles.codegen_options(profiles.all_profiles()[profile]), ("opencl",))
    assert len(exe.kernels) == 1
    assert (re.search(r"__local float \w+\[4096\]", exe.kernels[0].opencl) is None) == in_registers


def _subgroup_functions(live) -> bool:
    """Whether an OpenCL device compiles the sub_group_* built-ins (cl_khr_subgroups or cl_intel_subgroups)."""
    return bool({"cl_khr_subgroups", "cl_intel_subgroups"} & set(live.info.limits.get("extensions") or ()))


@pytest.mark.parametrize("family", ["softmax", "layernorm", "max"])
@pytest.mark.parametrize("shape", [(3, 256), (4, 1000), (5, 512), (2, 2048)], ids=str)
def test_rows_reduced_by_subgroups_of_any_width(device, tmp_path, family, shape):
    """`subgroup_reduce = "varying"` (AMD, Intel): each subgroup combines its partials with the device's own
    reduction (SPIR-V GroupNonUniform arithmetic, OpenCL sub_group_reduce_*) at whatever width the device runs it,
    then one value per subgroup; no shuffle over an assumed width. Run and checked here, a NaN in one row: the
    NaN-propagating max still gives NaN (the subgroup max alone need not)."""
    live, _ = _options(device)
    if live.info.api == "opencl" and not _subgroup_functions(live):
        pytest.skip(f"{device} has neither cl_khr_subgroups nor cl_intel_subgroups (the Intel CPU runtime, which "
                    f"has them, runs this in test_opencl_subgroups.py)")
    if live.info.api == "vulkan" and not live.info.limits.get("subgroup_arithmetic"):
        pytest.skip(f"{device} has no subgroup arithmetic in compute shaders")
    rows, cols = shape
    if family == "max":  # x - max(x): where NaN is not propagated, the row's other values stay finite
        g = portable.Graph()
        x = g.input(shape, "float32")
        g.output(g.sub(x, g.max(x, axis=-1, keepdims=True)))
        shapes = [shape]
    else:
        g, shapes = BUILD[family](rows, cols)
    opts = dict(reduction_threads=128, row_fusion_shared_bytes=_shared(device), row_registers=32,
                subgroup_reduce="varying", opencl_subgroups=True,
                spirv_caps=["Shader", "GroupNonUniform", "GroupNonUniformArithmetic"])
    live, opts = _options(device, **opts)
    exe = compile_module(g.to_mlir(), opts, (live.info.api,))
    k = exe.kernels[0]
    if live.info.api == "vulkan":
        from portable.codegen_spirv import disassemble
        validate(k.spirv, "vulkan1.1")
        asm = disassemble(k.spirv)
        assert re.search(r"OpGroupNonUniform(FAdd|FMax) %float %uint_3 Reduce", asm), asm
        assert "Shuffle" not in asm
        assert k.subgroup_size == 0  # any width
    else:
        assert re.search(r"sub_group_reduce_(add|max)\(", k.opencl), k.opencl
    exe.save(tmp_path / "g.ptx")
    rng = np.random.default_rng(5)
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    xs[0][1, 5] = np.nan
    out = np.asarray(portable.load(tmp_path / "g.ptx", device=device)(*xs)[0], np.float64)
    x = xs[0].astype(np.float64)
    if family == "softmax":
        z = x * 0.125
        e = np.exp(z - z.max(-1, keepdims=True))
        ref = e / e.sum(-1, keepdims=True)
    elif family == "layernorm":
        m = x.mean(-1, keepdims=True)
        ref = (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5) * xs[1] + xs[2]
    else:
        ref = x - x.max(-1, keepdims=True)
    assert len(exe.kernels) == 1
    assert np.isnan(out[1]).all() and not np.isnan(out[0]).any()
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=2e-5)


def test_serial_rows_fence_workgroup_memory_only():
    """The rows one workgroup takes were separate workgroups: no barrier of the nvidia profile's two-row softmax
    orders global memory (each row's output is written before the next row's barriers)."""
    g, _ = BUILD["softmax"](2 * 4096, 256)
    exe = compile_module(g.to_mlir(), profiles.codegen_options(profiles.all_profiles()["nvidia"]), ("opencl",))
    assert exe.dispatches[0].grid == (4096, 1, 1)
    src = exe.kernels[0].opencl
    assert src.count("barrier(") == 4 and "CLK_GLOBAL_MEM_FENCE" not in src, src


def test_rows_under_two_columns_per_subgroup_fall_back(device, tmp_path):
    """Rows shorter than two columns for each of 32 threads do not fill a workgroup: one kernel per op."""
    g, shapes = _layernorm(9, 60)
    exe = _run(g, shapes, device, tmp_path, reduction_threads=64, row_fusion_shared_bytes=_shared(device))
    assert len(exe.kernels) > 1


def test_chain_result_used_outside(device, tmp_path):
    """The row max is also a graph output: the chain stops before it escapes, results stay right."""
    g = portable.Graph()
    x = g.input((9, 300))
    m = g.max(x, axis=-1, keepdims=True)
    e = g.exp(g.sub(x, m))
    g.output(g.div(e, g.sum(e, axis=-1, keepdims=True)), m)
    live, opts = _options(device, row_fusion_private_bytes=1 << 20, reduction_threads=0)
    exe = compile_module(g.to_mlir(), opts, (live.info.api,))
    path = tmp_path / "g.ptx"
    exe.save(path)
    xs = np.random.default_rng(2).standard_normal((9, 300)).astype(np.float32)
    for out, ref in zip(portable.load(path, device=device)(xs), g.reference(xs)):
        np.testing.assert_allclose(out, ref, rtol=2e-5, atol=2e-5)
    assert len(exe.kernels) >= 2


@pytest.mark.parametrize("op", ["Softmax", "LayerNormalization"])
def test_onnx_one_kernel(device, op):
    """ONNX Softmax and LayerNormalization (keepdims reductions through torch-mlir) form the same chain."""
    from onnx import TensorProto, helper

    rows, cols = 33, 1000
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, cols])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, cols])
    rng = np.random.default_rng(4)
    gamma, beta = rng.standard_normal(cols).astype(np.float32), rng.standard_normal(cols).astype(np.float32)
    if op == "Softmax":
        nodes, inits = [helper.make_node("Softmax", ["x"], ["y"], axis=-1)], []
    else:
        nodes = [helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1, epsilon=1e-5)]
        inits = [helper.make_tensor("g", TensorProto.FLOAT, [cols], gamma),
                 helper.make_tensor("b", TensorProto.FLOAT, [cols], beta)]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    exe = portable.compile(model.SerializeToString(), device=device)
    xs = rng.standard_normal((rows, cols)).astype(np.float32)
    if op == "Softmax":
        e = np.exp(xs - xs.max(-1, keepdims=True))
        ref = e / e.sum(-1, keepdims=True)
    else:
        ref = (xs - xs.mean(-1, keepdims=True)) / np.sqrt(xs.var(-1, keepdims=True) + 1e-5) * gamma + beta
    np.testing.assert_allclose(exe(xs)[0], ref, rtol=1e-4, atol=1e-4)
    if _fuses(device):
        assert len(exe.executable.kernels) == 1


def test_attention_scores_softmax(device, tmp_path):
    """softmax(q @ k * scale): the scale stays the matmul's epilogue, the softmax is one more kernel."""
    g = portable.Graph()
    q, k = g.input((4, 64, 32)), g.input((4, 32, 96))
    g.output(g.softmax(g.mul(g.matmul(q, k), 0.125), axis=-1))
    exe = _run(g, [(4, 64, 32), (4, 32, 96)], device, tmp_path)
    if _fuses(device):
        assert len(exe.kernels) == 2


@pytest.mark.parametrize("family", ["softmax", "layernorm"])
def test_nvidia_profile_one_kernel_coalesced(family):
    """The NVIDIA profile (256 threads, workgroup-memory rows): one kernel per softmax/layernorm, and every
    step takes columns cyclically (thread t: t, t+256, ...), so the OpenCL C indexes by the local id plus the
    loop counter (or its unrolled values: rows in registers) and never scales the local id into a contiguous
    chunk. (Without row_vector_columns, which then deals them in runs of 4: test_nvidia_row_columns_as_vectors.)"""
    import re

    g, _ = BUILD[family](8, 4096)
    exe = compile_module(g.to_mlir(), dict(profiles.codegen_options(profiles.all_profiles()["nvidia"]),
                                           row_vector_columns=0), ("vulkan", "opencl"))
    assert len(exe.kernels) == 1 and len(exe.dispatches) == 1
    assert exe.kernels[0].workgroup_size == (256, 1, 1)
    src = exe.kernels[0].opencl
    lid = re.search(r"int (v\d+) = \(int\)get_local_id\(0\);", src).group(1)
    assert not re.search(rf"\b{lid} \* \d+", src), src
    assert re.search(rf"= {lid} \+ (i\d+|\d+);", src), src  # a loop counter, or its unrolled values


@pytest.mark.parametrize("family", ["softmax", "layernorm"])
@pytest.mark.parametrize("subgroups", [False, True], ids=["tree", "subgroup"])
@pytest.mark.parametrize("shape", [(3, 256), (2, 2048), (5, 1000)], ids=["3x256", "2x2048", "5x1000"])
def test_rows_in_registers(device, tmp_path, family, subgroups, shape):
    """`row_registers`: a row that each thread alone writes and reads stays in its registers (rows of 4 and 32
    columns per thread; 1000 columns do not divide among 64 threads and keep workgroup memory), and
    `subgroup_reduce` combines the partials by subgroup shuffles (Vulkan; OpenCL C only with a known shuffle)."""
    g, shapes = BUILD[family](*shape)
    live, opts = _options(device)
    sg = int(opts.get("subgroup_size") or 0)
    if subgroups and (live.info.api != "vulkan" or sg < 2 or 64 % sg):
        pytest.skip(f"{device}: subgroup shuffles are only generated for Vulkan with a subgroup size dividing 64")
    exe = _run(g, shapes, device, tmp_path, reduction_threads=64, row_fusion_shared_bytes=_shared(device),
               row_registers=32, subgroup_reduce=subgroups)
    assert [k.workgroup_size for k in exe.kernels] == [(64, 1, 1)]
    if live.info.api == "vulkan":
        from portable.codegen_spirv import disassemble
        asm = disassemble(exe.kernels[0].spirv)
        assert ("OpGroupNonUniformShuffleXor" in asm) == subgroups
        # Shuffles over sg lanes: the pipeline requires that width (Kernel.subgroup_size).
        assert exe.kernels[0].subgroup_size == (sg if subgroups else 0)
        # Rows kept in registers leave only the small arrays of partials in workgroup memory.
        assert (shape[1] in _workgroup_arrays(asm)) == (shape[1] % 64 != 0)


@pytest.mark.parametrize("family", ["softmax", "layernorm"])
@pytest.mark.parametrize("shape", [(3, 256), (2, 2048), (5, 1000)], ids=["3x256", "2x2048", "5x1000"])
def test_row_columns_as_vectors(device, tmp_path, family, shape):
    """`row_vector_columns` (row_columns.py): rows kept in registers, partials combined by subgroup shuffles, are
    dealt to the threads in runs of 4 columns and read and written as vec4 (gamma and beta too); 1000 columns
    (not in registers) are left as they are."""
    g, shapes = BUILD[family](*shape)
    live, opts = _options(device)
    sg = int(opts.get("subgroup_size") or 0)
    if live.info.api != "vulkan" or sg < 2 or 64 % sg:
        pytest.skip(f"{device}: the regrouping needs partials in registers, combined by subgroup shuffles, which are "
                    f"only generated for Vulkan with a subgroup size dividing 64 (the nvidia profile's OpenCL C: "
                    f"test_nvidia_row_columns_as_vectors)")
    common = dict(reduction_threads=64, row_fusion_shared_bytes=_shared(device), row_registers=32,
                  subgroup_reduce=True)
    runs = _run(g, shapes, device, tmp_path, row_vector_columns=4, **common)
    scalar = _run(g, shapes, device, tmp_path, row_vector_columns=0, **common)
    from portable.codegen_spirv import disassemble

    def loads(exe) -> int:  # buffer loads (not the builtin ids); lavapipe types 16 bytes as 2 x u64
        return sum(" OpLoad " in ln and "%v3uint" not in ln for ln in disassemble(exe.kernels[0].spirv).splitlines())

    per = 1 if family == "softmax" else 3  # x; x, gamma, beta
    assert loads(scalar) - loads(runs) == (3 * per * shape[1] // 256 if shape[1] % 256 == 0 else 0)


@pytest.mark.parametrize("family", ["softmax", "layernorm"])
def test_nvidia_row_columns_as_vectors(family):
    """The nvidia profile: softmax/layernorm rows of 4096 as 4 vec4 per thread and buffer in both targets (a
    128-bit SPIR-V load, an aligned float4 in OpenCL C), and no scalar access to the row left."""
    g, _ = BUILD[family](8, 4096)
    exe = compile_module(g.to_mlir(), profiles.codegen_options(profiles.all_profiles()["nvidia"]),
                         ("vulkan", "opencl"))
    from portable.codegen_spirv import disassemble
    per = 1 if family == "softmax" else 3
    assert disassemble(exe.kernels[0].spirv).count("OpLoad %v4float") == 4 * per
    src = exe.kernels[0].opencl
    assert src.count("(*(__global const float4*)") == 4 * per and src.count("*(__global float4*)") == 4


def _workgroup_arrays(asm: str) -> set[int]:
    """Lengths of the float arrays in Workgroup variables of a SPIR-V disassembly."""
    structs = dict(re.findall(r"%(_struct_\d+) = OpTypeStruct %_arr_float_uint_(\d+)", asm))
    return {int(n) for s, n in structs.items() if f"%_ptr_Workgroup_{s} = " in asm}
