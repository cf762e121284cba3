"""Kernels over tensors larger than a device binds at once run in chunks (compiler/dispatch/split.py): several
dispatches
of one kernel, each binding a byte range of the big buffers, which live whole in one pool block. Forced on with
a small `max_bind_bytes` on every device; for real on lavapipe (maxStorageBufferRange 128 MiB); and where no
loop allows it, OutOfDeviceMemory names the buffer, its size and the limit. A chunked tensor above one allocation
(CL_DEVICE_MAX_MEM_ALLOC_SIZE) is held in several pool buffers, cut between the chunks."""

from __future__ import annotations

import numpy as np
import pytest

import portable
from portable import profiles
from portable.api import CompiledGraph
from portable.compiler.pipeline import compile_module
from portable.devices import open_device
from portable.errors import OutOfDeviceMemory, PortableError
from portable.executable import Executable
from portable.memory import BufferPool, barriers, uses
from portable.package import Package, write

MIB = 1 << 20


def _compile(g, device, max_bind_bytes):
    live = open_device(device)
    opts = dict(profiles.codegen_options(profiles.match(live.info), live.info), max_bind_bytes=max_bind_bytes)
    return live, compile_module(g.to_mlir(), opts, (live.info.api,))


def _run_saved(exe, live, tmp_path, *inputs):
    """Run the Executable after a save/load round trip (the byte ranges are part of the file format), and check
    that a package keeps them too."""
    path = tmp_path / "split.ptx"
    exe.save(path)
    loaded = Executable.load(path)
    version = 5 if any(k.texel_buffers for k in exe.kernels) else 2  # lavapipe's texel reads need format 5
    assert loaded.dispatches == exe.dispatches and loaded.format_version == version
    write(tmp_path / "split.ptpk", [(exe, profiles.match(live.info))])
    pkg = Package(tmp_path / "split.ptpk")
    assert pkg.manifest["version"] == version and pkg.executable(pkg.targets[0]).dispatches == exe.dispatches
    with CompiledGraph(loaded, live) as cg:
        out = cg(*inputs)
        recs = cg._bind().recordings
        return out, recs


def test_elementwise_chain_runs_in_chunks(device, tmp_path):
    g = portable.Graph()
    x, y = g.input((1100, 512)), g.input((1100, 512))  # 2.1 MiB each, 1 MiB bindable: 3 chunks
    g.output(g.relu(g.mul(g.add(x, y), y)))
    live, exe = _compile(g, device, MIB)
    assert len(exe.dispatches) == 3 and len(exe.kernels) == 2  # 2 chunks of 367 rows + a 366-row remainder
    row = 512 * 4
    assert [d.offsets for d in exe.dispatches] == [(0,) * 3, (367 * row,) * 3, (734 * row,) * 3]
    assert [d.sizes[0] for d in exe.dispatches] == [367 * row, 367 * row, 366 * row]
    assert all(size <= MIB for d in exe.dispatches for size in d.sizes)
    rng = np.random.default_rng(1)
    xs, ys = (rng.standard_normal((1100, 512), dtype=np.float32) for _ in range(2))
    (out,), recs = _run_saved(exe, live, tmp_path, xs, ys)
    np.testing.assert_allclose(out, np.maximum((xs + ys) * ys, 0), rtol=1e-6, atol=1e-6)
    # The chunks write disjoint views of one buffer: nothing orders them.
    assert recs and recs[0].dispatches == 3 and recs[0].barriers == 0


def test_matmul_and_softmax_run_in_chunks(device, tmp_path):
    g = portable.Graph()
    a, b, bias = g.input((2048, 256)), g.input((256, 384)), g.input((384,))
    h = g.relu(g.add(g.matmul(a, b), bias))  # A 2 MiB, result 3 MiB: split along M; B and bias bound whole
    g.output(g.softmax(h, axis=-1))
    live, exe = _compile(g, device, MIB)
    # 4 matmul chunks of 512 rows (1.5 KiB per result row), then the softmax in chunks of its rows.
    assert len(exe.dispatches) >= 8
    mm = [d for d in exe.dispatches if len(d.slots) == 4]
    assert len(mm) == 4 and len({d.kernel for d in mm}) == 1
    assert all(size <= MIB for d in exe.dispatches for size in d.sizes)
    rng = np.random.default_rng(2)
    A, B = rng.standard_normal((2048, 256), dtype=np.float32) / 8, rng.standard_normal((256, 384), dtype=np.float32)
    C = rng.standard_normal(384, dtype=np.float32)
    (out,), _ = _run_saved(exe, live, tmp_path, A, B, C)
    np.testing.assert_allclose(out, g.reference(A, B, C)[0], rtol=1e-4, atol=1e-6)


def test_classifier_weight_read_in_chunks(device, tmp_path):
    """A torch Linear exported to ONNX: its weight, folded into (K, N) order, is indexed by the output column in
    its second dimension; the split stores it as (N, K) and runs the product in chunks of output columns."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(32 * 3 * 3, 1200), torch.nn.ReLU()).eval()
    path = tmp_path / "fc.onnx"
    torch.onnx.export(model, (torch.zeros(1, 32, 3, 3),), str(path), opset_version=17, dynamo=False)
    live = open_device(device)
    opts = dict(profiles.codegen_options(profiles.match(live.info), live.info), max_bind_bytes=MIB // 2)
    exe = compile_module(portable.api.graph_text(str(path)), opts, (live.info.api,))  # weight 1.3 MiB
    chunks = [d for d in exe.dispatches if d.offsets and any(d.offsets)]
    assert chunks and all(size <= MIB // 2 for d in exe.dispatches for size in d.sizes)
    x = np.random.default_rng(3).standard_normal((1, 32, 3, 3), dtype=np.float32)
    (out,), _ = _run_saved(exe, live, tmp_path, x)
    with torch.no_grad():
        np.testing.assert_allclose(out, model(torch.from_numpy(x)).numpy(), rtol=1e-4, atol=1e-5)


def test_tensor_over_the_real_bindable_range(device):
    """A 144 MB add on a device that binds at most 128 MiB (lavapipe): two dispatches, one buffer each."""
    live = open_device(device)
    limit = live.options["max_bind_bytes"]
    n = 6000
    if not limit or limit >= n * n * 4 or live.pool.max_block < n * n * 4:
        pytest.skip(f"{device} binds {limit} bytes at once: a {n}x{n} float32 tensor fits, nothing to split")
    g = portable.Graph()
    x, y = g.input((n, n)), g.input((n, n))
    g.output(g.add(x, y))
    with portable.compile(g, device=device) as exe:
        assert len(exe.executable.dispatches) == 2
        xs = np.arange(n * n, dtype=np.float32).reshape(n, n)
        ys = np.full((n, n), 0.5, np.float32)
        out, = exe(xs, ys)
        np.testing.assert_array_equal(out[::997], xs[::997] + 0.5)
        np.testing.assert_array_equal(out[-1], xs[-1] + 0.5)
        del out, xs, ys


def test_unsplittable_kernel_names_buffer_size_and_limit(device):
    g = portable.Graph()
    x = g.input((1024, 512))
    g.output(g.sum(x, axis=0))  # the big input's leading dim is the reduction: no chunk of it is independent
    with pytest.raises(OutOfDeviceMemory, match=r"input 0 \(1024, 512\) float32' needs 2097152 bytes .*"
                                                r"max_bind_bytes = 1048576 bytes.*loop 0 is a reduction"):
        _compile(g, device, MIB)
    g = portable.Graph()
    x = g.input((2, 1 << 19))  # one row is 2 MiB: over the limit by itself
    g.output(g.relu(x))
    with pytest.raises(OutOfDeviceMemory, match=r"input 0 \(2, 524288\) float32.*2097152 bytes, over the limit"):
        _compile(g, device, MIB)


# ---- the pool side: views of one block ------------------------------------------------------------------
class _Source:
    def __init__(self):
        self.limits = {"alignment": 256, "max_block": 1 << 30, "max_range": 1 << 20}
        self.freed = []

    def allocate_block(self, nbytes):
        return "block"

    def free(self, buffer):
        self.freed.append(buffer)

    def view(self, block, offset, nbytes):
        return [block, offset, nbytes]

    def buffer_limits(self):
        return self.limits


def test_pool_binds_large_buffers_through_views():
    pool = BufferPool(_Source(), "fake")
    with pytest.raises(OutOfDeviceMemory,
                       match=r"'big' needs 4194304 bytes \(4.0 MiB\), above the largest buffer a kernel"):
        pool.acquire(4 * MIB, "big")  # bound whole: over the 1 MiB range
    big = pool.acquire(4 * MIB, "big", bound=MIB)  # bound one chunk at a time: fine
    head, tail = pool.view(big, 0, MIB), pool.view(big, 3 * MIB, MIB)
    assert head[1:] == [big[1], MIB] and tail[1:] == [big[1] + 3 * MIB, MIB]  # placed in the block
    with pytest.raises(OutOfDeviceMemory, match="at byte 100, not a multiple of the 256-byte binding alignment"):
        pool.view(big, 100, 1024)
    with pytest.raises(OutOfDeviceMemory, match="1048832 bytes .* bound at once"):
        pool.view(big, 0, MIB + 256)
    pool.release(head)
    pool.release(tail)
    assert pool.live_bytes == 4 * MIB  # views are no allocations
    pool.release(big)
    assert pool.live_bytes == 0


def test_views_of_one_block_overlap_only_where_they_share_bytes(device):
    live = open_device(device)
    buf = live.pool.acquire(8192, "t", bound=4096)
    halves = [live.pool.view(buf, 0, 4096), live.pool.view(buf, 4096, 4096)]
    whole = live.pool.view(buf, 0, 8192) if live.pool.max_range >= 8192 else buf
    try:
        regions = [b.region for b in halves]
        assert regions[0][0] == regions[1][0] == whole.region[0] and regions[0][2] == regions[1][1]
        assert barriers([uses([regions[0]], ["w"]), uses([regions[1]], ["w"])]) == [False, False]
        assert barriers([uses([regions[0]], ["w"]), uses([whole.region], ["r"])]) == [False, True]
    finally:
        for v in halves + ([whole] if whole is not buf else []):
            live.pool.release(v)
        live.pool.release(buf)


# ---- tensors above one allocation: a slot held in several pool buffers ("pieces") -------------------------
def test_plan_pieces_cuts_between_bound_ranges():
    from portable.memory import plan_pieces
    chunks = [(0, 1000), (1024, 1000), (2048, 952)]
    assert plan_pieces(3000, chunks, 4096, 256) == [(0, 3000)]  # fits one allocation: one piece
    assert plan_pieces(3000, chunks, 2100, 256) == [(0, 2048), (2048, 3000)]  # two ranges in the first piece
    assert plan_pieces(3000, chunks, 1100, 256) == [(0, 1024), (1024, 2048), (2048, 3000)]
    assert plan_pieces(3000, [(0, 1000), (512, 1000)], 1200, 256) is None  # overlapping ranges: 1512 together
    assert plan_pieces(3000, [(0, 3000)], 1200, 256) is None  # bound whole
    assert plan_pieces(3000, [(0, 1000), (1000, 1000)], 1100, 256) is None  # no aligned cut between them
    assert plan_pieces(5000, [(0, 100)], 2048, 256) == [(0, 2048), (2048, 4096), (4096, 5000)]  # unbound bytes


def _lower_max_block(monkeypatch, live, limit):
    """The test devices allow allocations of hundreds of MiB (PoCL, lavapipe), so a tensor above one allocation
    would take GBs of host memory here. Lowering the live pool's limits makes a few-MiB tensor "too large for one
    allocation" the way a 1.2 GB tensor is on Adreno (CL_DEVICE_MAX_MEM_ALLOC_SIZE ~1 GB); monkeypatch restores
    them for the next test. block_bytes too, so that new blocks respect the lowered limit."""
    monkeypatch.setattr(live.pool, "max_block", limit)
    monkeypatch.setattr(live.pool, "block_bytes", min(live.pool.block_bytes, limit))


def test_elementwise_chain_over_several_allocations(device, monkeypatch):
    g = portable.Graph()
    x, y = g.input((4000, 512)), g.input((4000, 512))  # 7.8 MiB each: 8 chunks of 512 rows (1 MiB)
    g.output(g.relu(g.mul(g.add(x, y), y)))
    live, exe = _compile(g, device, MIB)
    assert len(exe.dispatches) == 8
    _lower_max_block(monkeypatch, live, 5 * MIB // 2)  # 2.5 MiB: two 1 MiB chunks per piece
    rng = np.random.default_rng(3)
    xs, ys = (rng.standard_normal((4000, 512), dtype=np.float32) for _ in range(2))
    with CompiledGraph(exe, live) as cg:
        bound = cg._bind()
        slots = [*exe.input_slots, exe.outputs[0][0]]
        assert {sid: bound.pieces.get(sid) for sid in slots} == {sid: 4 for sid in slots}
        for _ in range(2):  # a frame replayed: the pieces keep their data apart
            out, = cg(xs, ys)
            np.testing.assert_allclose(out, np.maximum((xs + ys) * ys, 0), rtol=1e-6, atol=1e-6)
            xs, ys = ys, xs
        held = [live.pool._leases[id(b)].nbytes for f in bound._frames for sid in slots
                for b in f.buffers[sid].buffers]
        assert held and max(held) <= 5 * MIB // 2  # no buffer above the (lowered) allocation limit


def test_matmul_and_softmax_over_several_allocations(device, monkeypatch):
    g = portable.Graph()
    a, b, bias = g.input((4096, 256)), g.input((256, 256)), g.input((256,))
    h = g.relu(g.add(g.matmul(a, b), bias))  # A, the intermediate h and the result 4 MiB each: split along M
    g.output(g.softmax(h, axis=-1))
    live, exe = _compile(g, device, MIB)
    _lower_max_block(monkeypatch, live, 2 * MIB)
    rng = np.random.default_rng(4)
    A, B = rng.standard_normal((4096, 256), dtype=np.float32) / 8, rng.standard_normal((256, 256), dtype=np.float32)
    C = rng.standard_normal(256, dtype=np.float32)
    with CompiledGraph(exe, live) as cg:
        bound = cg._bind()
        temps = [s.id for s in exe.slots if s.kind == "temp"]
        big = [exe.input_slots[0], exe.outputs[0][0], *temps]
        assert temps and all(bound.pieces.get(sid, 1) > 1 for sid in big), bound.pieces
        assert exe.input_slots[1] not in bound.pieces  # B (256 KiB) fits one allocation
        out, = cg(A, B, C)
        np.testing.assert_allclose(out, g.reference(A, B, C)[0], rtol=1e-4, atol=1e-6)


def test_slot_bound_whole_above_one_allocation_is_refused(device, monkeypatch):
    g = portable.Graph()
    x = g.input((1024, 512))  # 2 MiB, bound whole (4 MiB bindable): no range to cut between
    g.output(g.relu(x))
    live, exe = _compile(g, device, 4 * MIB)
    _lower_max_block(monkeypatch, live, MIB)
    with CompiledGraph(exe, live) as cg, pytest.raises(
            OutOfDeviceMemory, match=r"input 0 \(1024, 512\) float32' needs 2097152 bytes \(2.0 MiB\), above the "
                                     r"largest single allocation .* = 1048576 bytes"):
        cg(np.zeros((1024, 512), np.float32))


def test_carried_state_in_pieces_is_refused(device, monkeypatch):
    g = portable.Graph()
    s, x = g.input((4000, 512)), g.input((4000, 512))
    g.output(g.add(s, x))
    live, exe = _compile(g, device, MIB)
    _lower_max_block(monkeypatch, live, 5 * MIB // 2)
    with CompiledGraph(exe, live) as cg, \
            pytest.raises(PortableError, match=r"carried state (in|out)put 0 needs 8192000 bytes.* 4 pieces"):
        cg.with_state({0: 0})


def test_ragged_rows_are_peeled_in_a_residual_block(device, tmp_path):
    """A torchvision BasicBlock with a strided downsample at 11x11 output pixels (121 rows: no divisor near a
    register tile's rows): its matmuls run their first rows and the rest as two kernels, binding byte ranges of one
    output, and the block matches torch. The downsample's groups are formed after the main branch's but come first
    in the function: a part's buffers are found by launch, in function order."""
    torch = pytest.importorskip("torch")
    from portable.zoo import builders

    tv = builders._torchvision()
    torch.manual_seed(0)
    block = tv.models.resnet.BasicBlock(16, 32, stride=2, downsample=torch.nn.Sequential(
        torch.nn.Conv2d(16, 32, 1, stride=2, bias=False), torch.nn.BatchNorm2d(32))).eval()
    path = tmp_path / "block.onnx"
    torch.onnx.export(block, (torch.zeros(1, 16, 22, 22),), str(path), opset_version=17, dynamo=False)
    x = np.random.default_rng(4).standard_normal((1, 16, 22, 22), dtype=np.float32)
    with portable.compile(str(path), device=device) as exe:
        parts = [d for d in exe.executable.dispatches if d.offsets and any(d.offsets)]
        out, = exe(x)
    assert parts, "no matmul was peeled"
    # Byte ranges start where the device can bind them (OpenCL: CL_DEVICE_MEM_BASE_ADDR_ALIGN).
    align = open_device(device).info.limits.get("min_storage_buffer_offset_alignment") or 1
    assert all(off % align == 0 for d in parts for off in d.offsets)
    with torch.no_grad():
        np.testing.assert_allclose(out, block(torch.from_numpy(x)).numpy(), rtol=1e-4, atol=1e-4)
