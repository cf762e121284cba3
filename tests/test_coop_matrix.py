"""The cooperative-matrix matmul strategy (portable/compiler/schedule/coop_matrix.py), compiled for profiles that list
VK_KHR_cooperative_matrix shapes (nvidia, amd-rdna3). No device here has the extension (lavapipe, PoCL), so these tests
check what is generated and when the strategy is (not) chosen; the numbers are checked on the GPU host by
`portable bench` (f16 matmul, output compared with numpy before timing)."""

from __future__ import annotations

import struct

import pytest

import portable
from portable import profiles
from portable.compiler.pipeline import compile_module
from portable.compiler.schedule import coop_matrix, coop_staging
from portable.compiler.strategy import choice as strategy


def _tiles(opts, *shape):
    return coop_matrix.tiles(profiles.Options.of(opts), *shape)


def _stage_k(opts, *args):
    return coop_staging.stage_k(profiles.Options.of(opts), *args)

OP_COOP_MULADD = 4459  # OpCooperativeMatrixMulAddKHR (SPV_KHR_cooperative_matrix)
OP_COOP_LOAD = 4457  # OpCooperativeMatrixLoadKHR
OP_BARRIER = 224  # OpControlBarrier


def _opcodes(spirv: bytes) -> set[int]:
    words = struct.unpack(f"<{len(spirv) // 4}I", spirv)
    ops, i = set(), 5
    while i < len(words):
        n, op = words[i] >> 16, words[i] & 0xFFFF
        ops.add(op)
        i += max(n, 1)
    return ops


def _matmul(m: int, k: int, n: int, out: str = "float32") -> str:
    g = portable.Graph("mm_f16")
    g.output(g.matmul(g.input((m, k), "float16"), g.input((k, n), "float16"), out_dtype=out))
    return g.to_mlir()


# The profile's large tiles at every shape here (coop_small_tiles off; the choice: test_coop_matrix.py).
NVIDIA = dict(profiles.codegen_options(profiles.all_profiles()["nvidia"]), coop_small_tiles=())
UNSTAGED = dict(NVIDIA, coop_stage_k=0)  # fragments loaded from global memory (coop_matrix.py alone)
(WG_M, WG_N), (SG_M, SG_N) = _tiles(NVIDIA)
COOP_WORKGROUP = (32 * (WG_N // SG_N), WG_M // SG_M, 1)  # one subgroup of 32 per subgroup tile


@pytest.mark.parametrize("out", ["float32", "float16"])
def test_f16_matmul_uses_cooperative_matrices_on_vulkan(out):
    exe = compile_module(_matmul(2 * WG_M, 64, 3 * WG_N, out), NVIDIA, ("vulkan",))
    (kernel,) = exe.kernels
    assert kernel.workgroup_size == COOP_WORKGROUP
    assert {OP_COOP_MULADD, OP_COOP_LOAD} <= _opcodes(kernel.spirv)
    (d,) = exe.dispatches
    assert tuple(d.grid) == (3, 2, 1)
    assert struct.unpack("<I", kernel.spirv[4:8])[0] == 0x00010600  # SPIR-V 1.6: where the KHR ops exist


def test_rdna3_runs_cooperative_matrices_in_32_lane_subgroups():
    """The amd-rdna3 profile (wave64 by default, 32-64 lanes on request) takes the strategy too: its kernel is laid
    over 32-lane subgroups and says so (Kernel.subgroup_size), so the pipeline requires that width; RDNA2, without
    the extension, keeps FMA. A live device that cannot run 32 lanes keeps FMA as well."""
    import dataclasses

    from portable.backend import DeviceInfo

    rdna3 = profiles.all_profiles()["amd-rdna3"]
    (kernel,) = compile_module(_matmul(128, 64, 128), profiles.codegen_options(rdna3), ("vulkan",)).kernels
    assert OP_COOP_MULADD in _opcodes(kernel.spirv) and kernel.subgroup_size == 32
    live = DeviceInfo(api="vulkan", index=0, name="AMD Radeon RX 7900 XTX (RADV NAVI31)", driver="radv",
                      driver_version="", vendor_id=0x1002, device_id=0x744C, device_type="gpu")
    only64 = dataclasses.replace(live, limits=dict(rdna3["limits"], subgroup_size=64, subgroup_size_control=False))
    (kernel,) = compile_module(_matmul(128, 64, 128), profiles.codegen_options(rdna3, only64), ("vulkan",)).kernels
    assert OP_COOP_MULADD not in _opcodes(kernel.spirv) and kernel.subgroup_size == 0
    rdna2 = profiles.codegen_options(profiles.all_profiles()["amd-rdna2"])
    for kernel in compile_module(_matmul(128, 64, 128), rdna2, ("vulkan",)).kernels:
        assert OP_COOP_MULADD not in _opcodes(kernel.spirv)


@pytest.mark.parametrize("why, text, profile, targets", [
    ("OpenCL C has no cooperative matrices", _matmul(256, 64, 384), NVIDIA, ("vulkan", "opencl")),
    ("m is not a multiple of the workgroup tile", _matmul(200, 64, 384), NVIDIA, ("vulkan",)),
    ("k is not a multiple of 16", _matmul(256, 40, 384), NVIDIA, ("vulkan",)),
    ("lavapipe lists no cooperative-matrix shapes",
     _matmul(256, 64, 384), profiles.codegen_options(profiles.all_profiles()["lavapipe"]), ("vulkan",)),
])
def test_falls_back_to_the_fma_strategy(why, text, profile, targets):
    exe = compile_module(text, profile, targets)
    for kernel in exe.kernels:
        assert kernel.workgroup_size != COOP_WORKGROUP, why
        if kernel.spirv:
            assert OP_COOP_MULADD not in _opcodes(kernel.spirv), why


@pytest.mark.parametrize("wg, sg", [((64, 64), (32, 32)), ((128, 128), (64, 32)), ((64, 64), (16, 16))])
def test_tiles_from_the_profile(wg, sg):
    """Each subgroup multiplies (sg/16)^2 fragments: loads of A and B fragments shared by the multiplies."""
    opts = dict(UNSTAGED, coop_workgroup_tile=wg, coop_subgroup_tile=sg)
    exe = compile_module(_matmul(256, 64, 256), opts, ("vulkan",))
    (kernel,) = exe.kernels
    assert kernel.workgroup_size == (32 * (wg[1] // sg[1]), wg[0] // sg[0], 1)
    words = struct.unpack(f"<{len(kernel.spirv) // 4}I", kernel.spirv)
    muladds = sum(1 for w in words if w & 0xFFFF == OP_COOP_MULADD and w >> 16 == 6)  # 6-word instruction
    assert muladds == (sg[0] // 16) * (sg[1] // 16)


@pytest.mark.parametrize("m, n, expected", [
    (4096, 4096, ((128, 128), (64, 64))),  # 1024 workgroups of the large tiles
    (1024, 1024, ((64, 64), (32, 32))),  # 64 of them would leave half the SMs idle: 256 of the small ones
    (512, 4096, ((128, 128), (64, 64))),  # 128: about one per SM
    (192, 4096, ((64, 64), (32, 32))),  # 128 does not divide 192
    (96, 4096, ((128, 128), (64, 64))),  # neither divides: the large ones (the matmul is not eligible)
])
def test_small_tiles_where_the_large_ones_leave_the_device_idle(m, n, expected):
    nvidia = profiles.codegen_options(profiles.all_profiles()["nvidia"])
    assert _tiles(nvidia, (m, n)) == expected
    assert _tiles(nvidia) == ((128, 128), (64, 64))
    # OpenCL (PTX wmma): small tiles only where the large ones do not divide the product.
    opencl = strategy.for_targets(nvidia, ("opencl",))
    assert _tiles(opencl, (m, n)) == (expected if m % 128 else ((128, 128), (64, 64)))


def test_a_small_product_runs_on_the_small_tiles():
    """The staged kernel at 64x64 workgroup tiles: 4 subgroups of 32x32 (2x2 fragments), 4 x 4 workgroups."""
    nvidia = profiles.codegen_options(profiles.all_profiles()["nvidia"])
    (kernel,) = (exe := compile_module(_matmul(256, 128, 256), nvidia, ("vulkan",))).kernels
    assert kernel.workgroup_size == (64, 2, 1) and tuple(exe.dispatches[0].grid) == (4, 4, 1)
    ops = [op for op, _ in _instructions(kernel.spirv)]
    assert ops.count(OP_COOP_MULADD) == 2 * 2 * (64 // 16)  # one K step of 64, straight-line
    assert _coop_load_storage(kernel.spirv) == {STORAGE_WORKGROUP}
    _validate_coop(kernel.spirv)


def test_bad_tiles_are_refused():
    with pytest.raises(ValueError, match="must divide"):
        _tiles(dict(NVIDIA, coop_workgroup_tile=(64, 64), coop_subgroup_tile=(48, 32)))


def test_f32_matmul_stays_on_fma():
    g = portable.Graph("mm_f32")
    g.output(g.matmul(g.input((128, 64)), g.input((64, 192))))
    exe = compile_module(g.to_mlir(), NVIDIA, ("vulkan",))
    assert all(OP_COOP_MULADD not in _opcodes(k.spirv) for k in exe.kernels)


def test_read_only_buffer_sharing_a_written_buffers_block_type_gets_its_own():
    """NVIDIA driver quirk (device_profiles/nvidia.toml): NonWritable on a block type that a written buffer shares made
    the driver drop writes. The residual input has the output's shape: it gets a block type of its own and is
    NonWritable, like the weights; the output stays writable."""
    from portable.codegen_spirv import disassemble

    g = portable.Graph("matmul_residual")
    x, w, r = g.input((64, 1024)), g.input((1024, 384)), g.input((64, 384))
    g.output(g.add(g.matmul(x, w), r))
    exe = compile_module(g.to_mlir(), dict(NVIDIA, fill_threads=0), ("vulkan",))  # one kernel, not split_k.py's two
    (kernel,) = exe.kernels
    (d,) = exe.dispatches
    text = disassemble(kernel.spirv)
    nonwritable = {int(line.split("_arg_")[1].split()[0]) for line in text.splitlines() if "NonWritable" in line}
    kinds = {s.id: (s.kind, s.index) for s in exe.slots}
    args = {kinds[sid]: i for i, sid in enumerate(d.slots)}
    assert args[("input", 2)] in nonwritable  # r: same shape as the output
    assert args[("input", 1)] in nonwritable  # w
    assert f"%main_kernel_arg_{args[('input', 2)]}_block = OpTypeStruct" in text
    assert not any("w" in kernel.access[i] for i in nonwritable)


# ---- operand tiles staged in workgroup memory (compiler/schedule/coop_staging.py) ------------------------------------
STORAGE_WORKGROUP, STORAGE_BUFFER = 4, 12  # SPIR-V storage classes


def _instructions(spirv: bytes) -> list[tuple[int, tuple[int, ...]]]:
    words = struct.unpack(f"<{len(spirv) // 4}I", spirv)
    out, i = [], 5
    while i < len(words):
        n = max(words[i] >> 16, 1)
        out.append((words[i] & 0xFFFF, words[i + 1:i + n]))
        i += n
    return out


OP_MEMORY_MODEL, OP_CAPABILITY, OP_LOAD, OP_STORE, OP_COOP_STORE = 14, 17, 61, 62, 4458
VULKAN_MODEL, GLSL450, VULKAN_MEMORY_MODEL_CAP = 3, 1, 5345
NON_PRIVATE, MAKE_AVAILABLE, MAKE_VISIBLE = 0x20, 0x2000, 0x4000


def test_cooperative_kernels_follow_the_vulkan_memory_model():
    """A kernel on cooperative matrices declares the Vulkan memory model (SPIR-V requires it with
    CooperativeMatrixKHR in a shader); its workgroup-memory and buffer accesses are non-private and its barriers
    make memory available and visible, so the staged tiles and the epilogue's reads of other subgroups' fragments
    stay ordered under that model. A kernel without them keeps GLSL450."""
    exe = compile_module(_matmul(2 * WG_M, 64, 3 * WG_N), NVIDIA, ("vulkan",))
    (kernel,) = exe.kernels
    ins = _instructions(kernel.spirv)
    assert [args[1] for op, args in ins if op == OP_MEMORY_MODEL] == [VULKAN_MODEL]
    assert VULKAN_MEMORY_MODEL_CAP in {args[0] for op, args in ins if op == OP_CAPABILITY}
    barriers = [args for op, args in ins if op == OP_BARRIER]
    assert barriers
    consts = {args[1]: args[2] for op, args in ins if op == 43}  # OpConstant: result id -> value
    assert all(consts[b[2]] & (MAKE_AVAILABLE | MAKE_VISIBLE) == MAKE_AVAILABLE | MAKE_VISIBLE for b in barriers)
    coop_mem = [args for op, args in ins if op in (OP_COOP_LOAD, OP_COOP_STORE)]
    assert coop_mem and all(NON_PRIVATE & a[-1] for a in coop_mem)  # the memory operand, last
    assert any(op in (OP_LOAD, OP_STORE) and len(a) >= 3 and a[-1] & NON_PRIVATE for op, a in ins)
    _validate_coop(kernel.spirv)
    g = portable.Graph("mm_f32")
    g.output(g.matmul(g.input((64, 64), "float32"), g.input((64, 64), "float32")))
    plain = compile_module(g.to_mlir(), NVIDIA, ("vulkan",))
    for k in plain.kernels:
        assert [args[1] for op, args in _instructions(k.spirv) if op == OP_MEMORY_MODEL] == [GLSL450]


def _coop_load_storage(spirv: bytes) -> set[int]:
    """Storage classes of the pointers every OpCooperativeMatrixLoadKHR reads through."""
    ptr_class, value_type = {}, {}
    for op, args in _instructions(spirv):
        if op == 32:  # OpTypePointer: result, storage class, type
            ptr_class[args[0]] = args[1]
        elif op in (59, 65, 66):  # OpVariable, OpAccessChain, OpInBoundsAccessChain: result type, result
            value_type[args[1]] = args[0]
    return {ptr_class[value_type[args[2]]] for op, args in _instructions(spirv) if op == OP_COOP_LOAD}


def _validate_coop(spirv: bytes) -> None:
    """spirv-val the kernel as it is, where the installed spirv-val knows SPV_KHR_cooperative_matrix (such a
    spirv-val also requires the Vulkan memory model with cooperative matrices: codegen_spirv/memory_model.py)."""
    import subprocess
    import tempfile

    from portable.codegen_spirv.serialize import find_tool

    tool = find_tool("spirv-val")
    if tool is None:
        pytest.skip("no spirv-val")
    with tempfile.TemporaryDirectory() as d:
        path = f"{d}/k.spv"
        with open(path, "wb") as f:
            f.write(spirv)
        r = subprocess.run([tool, "--target-env", "vulkan1.3", path], capture_output=True, text=True)
    if "Invalid capability" in r.stderr + r.stdout:
        pytest.skip(f"this spirv-val predates SPV_KHR_cooperative_matrix: {(r.stderr + r.stdout).strip()[:80]}")
    assert r.returncode == 0, r.stderr + r.stdout


@pytest.mark.parametrize("out", ["float32", "float16"])
@pytest.mark.parametrize("wg, sg, kt, buffers", [((128, 128), (64, 64), 64, 1), ((128, 128), (64, 64), 32, 2),
                                                  ((128, 256), (64, 64), 16, 2), ((64, 64), (32, 32), 32, 1)])
def test_staged_fragments_come_from_workgroup_memory(out, wg, sg, kt, buffers):
    """Every fragment is loaded from workgroup memory (filled by 16-byte copies: the operand buffers and the
    tiles are arrays of vec4 of 32-bit words); one K step's multiplies are straight-line code; a single copy
    of the tiles takes two barriers per step, two copies one."""
    opts = dict(NVIDIA, coop_workgroup_tile=wg, coop_subgroup_tile=sg, coop_stage_k=kt, coop_stage_buffers=buffers)
    assert _stage_k(opts, 4 * kt, _tiles(opts)) == (kt, buffers)
    exe = compile_module(_matmul(2 * wg[0], 4 * kt, 2 * wg[1], out), opts, ("vulkan",))
    (kernel,) = exe.kernels
    assert kernel.workgroup_size == (32 * (wg[1] // sg[1]), wg[0] // sg[0], 1)
    assert tuple(exe.dispatches[0].grid) == (2, 2, 1)
    assert _coop_load_storage(kernel.spirv) == {STORAGE_WORKGROUP}
    ops = [op for op, _ in _instructions(kernel.spirv)]
    assert ops.count(OP_COOP_MULADD) == (sg[0] // 16) * (sg[1] // 16) * (kt // 16)
    assert ops.count(OP_BARRIER) == 2  # in the loop (single copy: both there; double: one before the loop)
    # The copies move 16 bytes per load: no f16 is loaded on its own (OpLoad's result type a 16-bit float).
    half = {args[0] for op, args in _instructions(kernel.spirv) if op == 22 and args[1] == 16}  # OpTypeFloat
    assert half and not any(op == 61 and args[0] in half for op, args in _instructions(kernel.spirv))
    _validate_coop(kernel.spirv)


def test_unstaged_fragments_come_from_the_buffers():
    exe = compile_module(_matmul(256, 64, 256), UNSTAGED, ("vulkan",))
    (kernel,) = exe.kernels
    assert _coop_load_storage(kernel.spirv) == {STORAGE_BUFFER}
    assert OP_BARRIER not in _opcodes(kernel.spirv)


@pytest.mark.parametrize("why, opts, k, expected", [
    ("k not a multiple of the step", dict(NVIDIA, coop_stage_k=64), 96, (0, 1)),
    ("the tiles do not fit 48 KiB", dict(NVIDIA, coop_workgroup_tile=(256, 256), coop_stage_k=64), 4096, (0, 1)),
    ("two copies do not fit: one", dict(NVIDIA, coop_stage_k=64, coop_stage_buffers=2), 4096, (64, 1)),
    ("no step in the profile", UNSTAGED, 4096, (0, 1)),
])
def test_stage_k_falls_back(why, opts, k, expected):
    assert _stage_k(opts, k, _tiles(opts)) == expected, why


def test_k_not_a_multiple_of_the_step_stays_unstaged():
    exe = compile_module(_matmul(256, 96, 256), dict(NVIDIA, coop_stage_k=64), ("vulkan",))
    (kernel,) = exe.kernels
    assert OP_COOP_MULADD in _opcodes(kernel.spirv)
    assert _coop_load_storage(kernel.spirv) == {STORAGE_BUFFER}


# ---- fused elementwise epilogues (coop_matrix.emit_epilogue) ----------------------------------------------------
RDNA3 = profiles.codegen_options(profiles.all_profiles()["amd-rdna3"])
OP_STORE = 4458  # OpCooperativeMatrixStoreKHR
OP_EXT_INST, GLSL_TANH = 12, 21
UNIFORM_MEMORY = 0x40  # MemorySemantics: storage buffers


def _mlp(m: int, k: int, n: int, out: str = "float32", residual: bool = False) -> str:
    """gelu(x @ W + b) or x @ W + r, f16 operands: one matmul group with an in-place epilogue."""
    g = portable.Graph("mlp")
    y = g.matmul(g.input((m, k), "float16"), g.input((k, n), "float16"), out_dtype=out)
    g.output(g.add(y, g.input((m, n), out)) if residual else g.gelu(g.add(y, g.input((n,), out))))
    return g.to_mlir()


def _constants(spirv: bytes) -> dict[int, int]:
    return {args[1]: args[2] for op, args in _instructions(spirv) if op == 43 and len(args) == 3}  # OpConstant


@pytest.mark.parametrize("residual", [False, True], ids=["bias_gelu", "residual"])
@pytest.mark.parametrize("out", ["float32", "float16"])
@pytest.mark.parametrize("name, opts, barriers", [("nvidia", NVIDIA, 3), ("nvidia-unstaged", UNSTAGED, 1),
                                                  ("amd-rdna3", RDNA3, 1)])
def test_epilogue_fuses_into_the_cooperative_matrix_kernel(name, opts, barriers, out, residual):
    """One kernel: the subgroups' fragments stored to the output, one barrier with storage-buffer semantics (the
    K loop's staging barriers order workgroup memory only), then the epilogue on every thread, reading back the
    fragments. No buffer but the inputs and the output: the fragments go where the epilogue updates in place."""
    (wm, wn), (sm, sn) = _tiles(opts)
    exe = compile_module(_mlp(2 * wm, 256, 3 * wn, out, residual), opts, ("vulkan",))
    (kernel,) = exe.kernels
    (d,) = exe.dispatches
    assert kernel.workgroup_size == (32 * (wn // sn), wm // sm, 1) and kernel.subgroup_size == 32
    assert tuple(d.grid) == (3, 2, 1) and kernel.num_buffers == 4
    ins = _instructions(kernel.spirv)
    ops = [op for op, _ in ins]
    steps = _stage_k(opts, 256, _tiles(opts))[0] // 16 or 1
    assert ops.count(OP_COOP_MULADD) == (sm // 16) * (sn // 16) * steps
    assert ops.count(OP_STORE) == (sm // 16) * (sn // 16)
    consts = _constants(kernel.spirv)
    bars = [i for i, (op, _) in enumerate(ins) if op == OP_BARRIER]
    assert len(bars) == barriers
    full = [i for i in bars if consts[ins[i][1][2]] & UNIFORM_MEMORY]
    assert len(full) == 1 and full[0] == bars[-1]
    stores = [i for i, op in enumerate(ops) if op == OP_STORE]
    assert max(stores) < full[0]
    after = ins[full[0]:]
    assert not any(op in (OP_COOP_LOAD, OP_STORE, OP_COOP_MULADD) for op, _ in after)
    if not residual:
        assert any(op == OP_EXT_INST and args[3] == GLSL_TANH for op, args in after)
    workgroup_vars = [a for op, a in ins if op == 59 and a[2] == STORAGE_WORKGROUP]  # OpVariable
    assert len(workgroup_vars) == (2 if barriers > 1 else 0)  # staged: the A and B tiles alone
    _validate_coop(kernel.spirv)


def test_epilogue_on_opencl_through_ptx():
    """The same kernel in OpenCL C for nvidia: wmma through inline PTX, a barrier that fences global memory after
    the last fragment store, then the epilogue on float4 rows of the output."""
    exe = compile_module(_mlp(2 * WG_M, 256, 2 * WG_N), NVIDIA, ("opencl",))
    (kernel,) = exe.kernels
    src = kernel.opencl
    assert kernel.workgroup_size == COOP_WORKGROUP and "wmma.mma.sync" in src
    full = "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);"
    assert src.count(full) == 1 and src.count("barrier(CLK_LOCAL_MEM_FENCE);") == 2
    body = src[src.index("__kernel"):]
    store = body.rindex("pt_wmma_store_f32_global(")
    assert store < body.index(full) < body.index("tanh(")
    assert "float4" in body[body.index(full):]


@pytest.mark.parametrize("why, text", [
    ("n is not a multiple of the workgroup tile", _mlp(2 * WG_M, 256, WG_N + 16)),
    ("the residual is read transposed", None),
])
def test_epilogue_falls_back_to_fma(why, text):
    if text is None:
        g = portable.Graph("transposed_residual")
        y = g.matmul(g.input((WG_M, 64), "float16"), g.input((64, WG_M), "float16"), out_dtype="float32")
        g.output(g.add(y, g.transpose(g.input((WG_M, WG_M), "float32"), (1, 0))))
        text = g.to_mlir()
    for kernel in compile_module(text, NVIDIA, ("vulkan",)).kernels:
        assert OP_COOP_MULADD not in _opcodes(kernel.spirv), why


@pytest.mark.parametrize("wg, sg, threads", [((128, 128), (64, 64), (4, 32)), ((64, 64), (32, 32), (8, 16)),
                                             ((64, 256), (32, 64), (4, 64)), ((16, 512), (16, 512), (1, 32)),
                                             ((16, 192), (16, 192), None)])
def test_epilogue_threads(wg, sg, threads):
    """A row of the workgroup tile on neighbouring threads, 4 columns each (coalesced), or all the threads on
    one row where it is longer; None where they do not divide the tile (192 columns over 32 threads of 4)."""
    assert coop_matrix.epilogue_threads(wg, sg) == threads


# ---- products rounded to f16 before the epilogue (an f16 model's MatMul / Gemm; coop_narrow.py) ----------------
OP_FCONVERT, OP_VARIABLE, STORAGE_FUNCTION = 115, 59, 7


def _f16_model(m: int, k: int, n: int, bias_relu: bool | None) -> str:
    """What the ONNX importer makes of an f16 MatMul (`bias_relu` None), Gemm + Relu (True) or MatMul then x + x
    (False): the product accumulated in f32, rounded to f16, then the epilogue in f16."""
    epilogue = {None: "", False: "\n      %y = arith.addf %h, %h : f16", True: """
      %b = arith.addf %h, %c : f16
      %z = arith.cmpf ugt, %b, %zero : f16
      %y = arith.select %z, %b, %zero : f16"""}[bias_relu]
    bias = f", %bias: tensor<{n}xf16>" if bias_relu else ""
    ins = f"%p, %bias : tensor<{m}x{n}xf32>, tensor<{n}xf16>" if bias_relu else f"%p : tensor<{m}x{n}xf32>"
    maps = "[#id, #col, #id]" if bias_relu else "[#id, #id]"
    args = "%in: f32, %c: f16, %out: f16" if bias_relu else "%in: f32, %out: f16"
    return f"""#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @f16_model(%a: tensor<{m}x{k}xf16>, %w: tensor<{k}x{n}xf16>{bias}) -> tensor<{m}x{n}xf16> {{
  %zero = arith.constant 0.0 : f16
  %f0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{m}x{n}xf32>
  %acc = linalg.fill ins(%f0 : f32) outs(%e : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %p = linalg.matmul ins(%a, %w : tensor<{m}x{k}xf16>, tensor<{k}x{n}xf16>)
    outs(%acc : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %e16 = tensor.empty() : tensor<{m}x{n}xf16>
  %r = linalg.generic {{indexing_maps = {maps}, iterator_types = ["parallel", "parallel"]}}
      ins({ins}) outs(%e16 : tensor<{m}x{n}xf16>) {{
    ^bb0({args}):
      %h = arith.truncf %in : f32 to f16{epilogue}
      linalg.yield {"%h" if bias_relu is None else "%y"} : f16
  }} -> tensor<{m}x{n}xf16>
  return %r : tensor<{m}x{n}xf16>
}}
"""


@pytest.mark.parametrize("bias_relu", [None, False, True], ids=["matmul", "matmul_twice", "gemm_relu"])
@pytest.mark.parametrize("name", ["nvidia", "nvidia-unstaged", "amd-rdna3"])
def test_a_product_rounded_to_f16_is_one_kernel_of_f16_fragments(name, bias_relu):
    """One kernel, which binds only the model's buffers (no f32 product anywhere: not in global, not in private
    memory), rounds its fragments (OpFConvert on the cooperative matrix) and stores them as f16, then the epilogue
    reads them back after the barrier with storage-buffer semantics; a plain MatMul's fragments are its output (no
    epilogue: nothing is stored after them)."""
    opts = {"nvidia": profiles.codegen_options(profiles.all_profiles()["nvidia"]), "nvidia-unstaged": UNSTAGED,
            "amd-rdna3": RDNA3}[name]
    m, n = 256, 384
    (wm, wn), (sm, sn) = _tiles(opts, (m, n))
    exe = compile_module(_f16_model(m, 256, n, bias_relu), opts, ("vulkan",))
    (kernel,) = exe.kernels
    assert kernel.num_buffers == 3 + bool(bias_relu) and len(exe.slots) == 3 + bool(bias_relu)
    ins = _instructions(kernel.spirv)
    ops = [op for op, _ in ins]
    frags = (wm // sm) * (wn // sn) * (sm // 16) * (sn // 16) // ((wm // sm) * (wn // sn))
    assert ops.count(OP_STORE) == frags and ops.count(OP_FCONVERT) == frags
    types = {args[0]: (op, args) for op, args in ins if op in (21, 22, 28, 30, 32)}  # OpType*: int, float, array...
    assert not any(op == OP_VARIABLE and args[2] == STORAGE_FUNCTION and types.get(_pointee(types, args[0]), (0,))[0]
                   == 30 for op, args in ins), "an array in private memory"
    consts = _constants(kernel.spirv)
    bars = [i for i, (op, _) in enumerate(ins) if op == OP_BARRIER]
    last_store = max(i for i, (op, _) in enumerate(ins) if op == OP_STORE)
    if bias_relu is None:
        assert not any(op == 62 for op, _ in ins[last_store:]) and not any(b > last_store for b in bars)  # OpStore
    else:
        assert consts[ins[bars[-1]][1][2]] & UNIFORM_MEMORY and last_store < bars[-1]
    _validate_coop(kernel.spirv)


def _pointee(types: dict, pointer_type: int) -> int:
    """The pointee of an OpTypePointer id, through a struct's first member (buffers and arrays are wrapped)."""
    op, args = types.get(pointer_type, (0, ()))
    if op != 32:  # OpTypePointer
        return 0
    inner = args[2]
    op, args = types.get(inner, (0, ()))
    return args[1] if op == 30 else inner  # OpTypeStruct -> its first member


def test_a_product_rounded_to_f16_on_opencl_rounds_the_wmma_fragments():
    exe = compile_module(_f16_model(256, 256, 384, True), NVIDIA, ("opencl",))
    (kernel,) = exe.kernels
    src = kernel.opencl
    body = src[src.index("__kernel"):]
    assert "pt_wmma_store_f32" not in src and body.count("pt_wmma_store_f16_global(") == (SG_M // 16) * (SG_N // 16)
    assert body.count("pt_pack_f16x2(") == 4 * (SG_M // 16) * (SG_N // 16)
    assert "cvt.rn.f16.f32" in src and kernel.num_buffers == 4


def test_a_rounded_product_without_cooperative_matrices_stays_two_kernels():
    """lavapipe has no cooperative matrices: the rounding epilogue stays a kernel of its own (the FMA strategy's
    epilogues update their product in place)."""
    lavapipe = profiles.codegen_options(profiles.all_profiles()["lavapipe"])
    assert len(compile_module(_f16_model(256, 256, 384, True), lavapipe, ("vulkan",)).kernels) == 2
