"""The transfer queue: a recorded run split into upload (transfer queue) -> dispatches (compute queue) ->
download (transfer queue), chained by timeline semaphores, with queue family ownership transfers when the
two queues are in different families.

What runs where: lavapipe has one queue family with one queue, so the ownership transfers cannot be executed
here. They are checked as recorded data (segments.plan with two distinct families, the emitted
VkBufferMemoryBarrier structs read back through a spy, and the reclaim path on a fake device). The three-command-
buffer chain itself runs for real on lavapipe with transfer_queue="shared" (the transfer lane on the compute
family, where the spec needs no ownership transfer), under the validation layer, through the raw recording API
and through CompiledGraph with two frames in flight and with carried state. The dedicated-family path runs on
a GPU that has a transfer-only family (benchmarks/transfer_overlap.py on the NVIDIA H200).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from portable.runtime_vk import enumerate_devices
from portable.runtime_vk._vk import vk

DATA = Path(__file__).parent / "data"
DEVICES, REASONS = enumerate_devices()
needs_device = pytest.mark.skipif(not DEVICES, reason="no Vulkan device: " + ("; ".join(REASONS) or "none listed"))
C, T = 0, 2  # compute and transfer families of a two-family device (the H200's are 0/2-like)


# ---- plan: which ranges move, with which masks ------------------------------------------------------------


def _buf(block, offset, nbytes):
    """A view as buffers.view makes it, with a fake handle (nothing reaches a driver in the plan tests)."""
    from portable.runtime_vk.buffers import Buffer

    return Buffer(nbytes=nbytes, size=(nbytes + 3) & ~3, handle=block.handle, memory=None, owner=0, offset=offset,
                  parent=block)


@pytest.fixture
def bufs():
    from portable.runtime_vk.buffers import Buffer

    block = Buffer(nbytes=1 << 20, size=1 << 20, handle="block", memory="m", owner=0)
    names = ["x", "y", "const", "tmp", "out", "state_in", "state_out"]
    return {n: _buf(block, 4096 * i, 1000 + i) for i, n in enumerate(names)}


def _plan(bufs, transfer_family, copies=True):
    from portable.runtime_vk import segments

    ups = [(bufs["x"], 0, bufs["x"].nbytes), (bufs["y"], 1024, bufs["y"].nbytes)]
    downs = [(bufs["out"], 4096, bufs["out"].nbytes)]
    carried = [(bufs["state_out"], bufs["state_in"], bufs["state_in"].nbytes)] if copies else []
    return segments.plan("staging", ups, downs, carried, C, transfer_family)


def _spans(bufs, *names):
    from portable.runtime_vk.segments import Span

    return [Span.of(bufs[n]) for n in names]


def test_one_queue_records_one_segment_without_ownership(bufs):
    from portable.runtime_vk import segments

    segs = _plan(bufs, None)
    assert [s.lane for s in segs] == ["compute"]
    assert segs[0].ownership() == []
    kinds = [type(op).__name__ for op in segs[0].ops]
    assert kinds == ["Copy", "Copy", "Barrier", "Dispatches", "Barrier", "Copy", "Barrier", "Copy", "Barrier"]
    assert isinstance(segs[0].ops[3], segments.Dispatches)


def test_two_families_release_and_acquire_exactly_inputs_and_outputs(bufs):
    from portable.runtime_vk import segments as S

    up, compute, down = _plan(bufs, T)
    assert (up.lane, compute.lane, down.lane) == ("upload", "compute", "download")
    ins, outs = _spans(bufs, "x", "y"), _spans(bufs, "out")

    # (1) transfer queue: the copies from staging, then one release barrier of exactly the uploaded ranges.
    assert [type(op) for op in up.ops] == [S.Copy, S.Copy, S.Barrier]
    rel_in = up.ops[-1]
    assert not rel_in.memory and rel_in.src_stage == S.TRANSFER
    assert [o.span for o in rel_in.buffers] == ins
    assert all((o.src_family, o.dst_family, o.src_access, o.dst_access) == (T, C, S.T_WRITE, 0)
               for o in rel_in.buffers)

    # (2) compute queue: acquire (source access 0) with the same ranges and families, then the dispatches, the
    # carried-state copy, and the release of the outputs (destination access 0).
    acq_in = compute.ops[0]
    assert isinstance(acq_in, S.Barrier) and acq_in.memory  # also covers one-shot writes on the compute queue
    assert [(o.span, o.src_family, o.dst_family, o.src_access) for o in acq_in.buffers] == [(s, T, C, 0) for s in ins]
    assert all(o.dst_access & S.S_READ for o in acq_in.buffers)
    assert isinstance(compute.ops[1], S.Dispatches)
    rel_out = compute.ops[-1]
    assert [o.span for o in rel_out.buffers] == outs and not rel_out.memory
    assert all((o.src_family, o.dst_family, o.dst_access) == (C, T, 0) and o.src_access & S.S_WRITE
               for o in rel_out.buffers)

    # (3) transfer queue: the matching acquire, the copies to staging, the host-read barrier.
    acq_out = down.ops[0]
    assert [(o.span, o.src_family, o.dst_family, o.src_access, o.dst_access) for o in acq_out.buffers] == \
        [(s, C, T, 0, S.T_READ) for s in outs]
    assert isinstance(down.ops[1], S.Copy) and down.ops[-1].dst_stage == S.HOST

    # Constants, intermediates and carried state never change family.
    moved = {o.span for seg in (up, compute, down) for o in seg.ownership()}
    assert moved == set(ins + outs)
    assert not moved & set(_spans(bufs, "const", "tmp", "state_in", "state_out"))


def test_every_release_has_its_acquire_on_the_other_family(bufs):
    segs = _plan(bufs, T)
    lane_family = {"compute": C, "upload": T, "download": T}
    releases, acquires = [], []
    for seg in segs:
        for o in seg.ownership():
            key = (o.span, o.src_family, o.dst_family)
            if lane_family[seg.lane] == o.src_family:
                releases.append(key)
                assert o.dst_access == 0
            else:
                assert lane_family[seg.lane] == o.dst_family
                acquires.append(key)
                assert o.src_access == 0
    assert releases == acquires and releases  # same order, ranges and families


def test_transfer_segments_use_only_stages_a_transfer_queue_supports(bufs):
    from portable.runtime_vk import segments as S

    allowed = S.TRANSFER | S.HOST | S.BOTTOM | vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT
    for seg in _plan(bufs, T):
        if seg.lane != "compute":
            for op in seg.ops:
                if isinstance(op, S.Barrier):
                    assert not (op.src_stage | op.dst_stage) & ~allowed, op


def test_same_family_has_three_segments_and_no_ownership(bufs):
    segs = _plan(bufs, C)
    assert [s.lane for s in segs] == ["upload", "compute", "download"]
    assert all(s.ownership() == [] for s in segs)


def test_segments_left_out_when_nothing_moves(bufs):
    from portable.runtime_vk import segments

    no_io = segments.plan("staging", [], [], [], C, T)
    assert [s.lane for s in no_io] == ["compute"] and no_io[0].ownership() == []
    only_out = segments.plan("staging", [(bufs["x"], 0, 0)], [(bufs["out"], 0, 8)], [], C, T)  # empty input
    assert [s.lane for s in only_out] == ["compute", "download"]


def test_emitted_barriers_carry_the_families_and_ranges(bufs, monkeypatch):
    """The structs handed to vkCmdPipelineBarrier (a spy stands in for the driver)."""
    from portable.runtime_vk import segments

    calls = []
    monkeypatch.setattr(vk, "vkCmdPipelineBarrier", lambda cmd, src, dst, flags, nm, mems, nb, bbs, ni, ims:
                        calls.append((src, dst, nm, [(b.srcQueueFamilyIndex, b.dstQueueFamilyIndex, b.srcAccessMask,
                                                      b.dstAccessMask, b.offset, b.size) for b in bbs or []])))
    monkeypatch.setattr(vk, "vkCmdCopyBuffer", lambda *a: None)
    handle = vk.ffi.cast("VkBuffer", 0x1000)
    for b in bufs.values():
        b.handle = handle
    up, compute, down = _plan(bufs, T, copies=False)
    segments.emit(None, up.ops)
    (src, dst, nm, released), = calls
    assert (src, dst, nm) == (segments.TRANSFER, segments.BOTTOM, 0)
    assert released == [(T, C, segments.T_WRITE, 0, bufs[n].offset, bufs[n].size) for n in ("x", "y")]
    calls.clear()
    assert segments.emit(None, compute.ops, lambda: 7) == 7
    acquired = calls[0][3]
    assert [(s, d, a) for s, d, a, _, _, _ in acquired] == [(T, C, 0), (T, C, 0)]
    assert calls[-1][3] == [(C, T, segments.S_WRITE | segments.T_WRITE, 0, bufs["out"].offset, bufs["out"].size)]
    calls.clear()
    segments.emit(None, down.ops)
    assert calls[0][3] == [(C, T, 0, segments.T_READ, bufs["out"].offset, bufs["out"].size)]
    assert calls[-1][:3] == (segments.TRANSFER, segments.HOST, 1)  # the host-read barrier, no ownership


# ---- one-shot work on a range the transfer family owns -----------------------------------------------------


def test_transfer_owned_ranges_follow_runs_and_frees(bufs):
    from portable.runtime_vk.segments import Span, TransferOwned

    owned = TransferOwned()
    owned.after_run([bufs["x"], bufs["out"]], [bufs["out"]])
    assert len(owned) == 1
    owned.after_run([bufs["out"]], [])  # a later run used it on the compute family: no longer transfer's
    assert len(owned) == 0
    owned.after_run([], [bufs["out"]])
    assert owned.take([bufs["x"]]) == []
    assert owned.take([bufs["out"]]) == [Span.of(bufs["out"])] and len(owned) == 0
    owned.after_run([], [bufs["out"]])
    owned.forget(bufs["out"].parent)  # the whole block freed
    assert len(owned) == 0


def test_reclaim_releases_on_transfer_then_acquires_on_compute(bufs, monkeypatch):
    from types import SimpleNamespace

    from portable.runtime_vk import segments

    recorded = []
    monkeypatch.setattr(vk, "vkCmdPipelineBarrier", lambda cmd, src, dst, f, nm, m, nb, bbs, ni, im: recorded.append(
        [(b.srcQueueFamilyIndex, b.dstQueueFamilyIndex, b.srcAccessMask, b.dstAccessMask, b.offset, b.size)
         for b in bbs]))
    handle = vk.ffi.cast("VkBuffer", 0x2000)
    bufs["out"].handle = handle
    t, c = SimpleNamespace(name="transfer-out", family=T), SimpleNamespace(name="compute", family=C)
    submits = []

    def submit(record, what, lane=None, wait=None):
        record(None)
        submits.append(((lane or c).name, wait and (wait[0].name, wait[1])))
        return 41

    dev = SimpleNamespace(ownership_transfers=True, transfer=None, transfer_out=t, compute=c, submit=submit,
                          transfer_owned=segments.TransferOwned())
    assert segments.reclaim(dev, [bufs["out"]]) == 0  # nothing owned by transfer yet
    dev.transfer_owned.after_run([], [bufs["out"]])
    assert segments.reclaim(dev, [bufs["out"]]) == 1
    # Released on the download queue (the outputs' last user, so queue order covers its reads), then acquired
    # on the compute queue after a semaphore wait for the release.
    assert submits == [("transfer-out", None), ("compute", ("transfer-out", 41))]
    (rel,), (acq,) = recorded
    assert rel[:2] == acq[:2] == (T, C) and rel[4:] == acq[4:] == (bufs["out"].offset, bufs["out"].size)
    assert rel[3] == 0 and acq[2] == 0 and acq[3]
    assert segments.reclaim(dev, [bufs["out"]]) == 0  # back with the compute family


def test_picks_a_transfer_only_family():
    from portable.runtime_vk.device import pick_queue_family, pick_transfer_family

    g, c, t, s = vk.VK_QUEUE_GRAPHICS_BIT, vk.VK_QUEUE_COMPUTE_BIT, vk.VK_QUEUE_TRANSFER_BIT, 0x8
    h200 = ((g | c | t | s, 16), (t | s, 2), (c | t | s, 8))  # as the H200's driver lists them (plus video)
    assert pick_queue_family(h200)[0] == 2 and pick_transfer_family(h200)[0] == 1
    lavapipe = ((g | c | t, 1),)
    assert pick_transfer_family(lavapipe)[0] is None


# ---- the chain on a real device (lavapipe: one family, so transfer_queue="shared") -------------------------


@pytest.fixture(scope="module")
def spirv(tmp_path_factory) -> bytes:
    spirv_as = shutil.which("spirv-as")
    if not spirv_as:
        pytest.skip("spirv-as not found: install spirv-tools")
    out = tmp_path_factory.mktemp("spv") / "add_scaled.spv"
    subprocess.run([spirv_as, "--target-env", "vulkan1.1", str(DATA / "vk" / "add_scaled.spvasm"), "-o", str(out)],
                   check=True, capture_output=True)
    return out.read_bytes()


def _vk_index(device: str) -> int:
    if not device.startswith("vulkan"):
        pytest.skip("Vulkan only")
    return int(device.split(":")[1])


def _backend(device: str, mode: str):
    from portable import config
    from portable.runtime_vk import VulkanBackend

    return VulkanBackend(_vk_index(device), validation=config.vk_validation(), transfer_queue=mode)


@pytest.fixture
def lane_for_any_size(monkeypatch):
    """These tests move a few KiB per run: take the transfer lane for that too (replay.TRANSFER_LANE_MIN_BYTES)."""
    from portable.runtime_vk import replay

    monkeypatch.setattr(replay, "TRANSFER_LANE_MIN_BYTES", 0)


@needs_device
@pytest.mark.parametrize("mode", ["shared", "auto", "off"])
def test_recorded_runs_through_the_transfer_lane(device, spirv, mode, lane_for_any_size):
    """Two recordings (frames) with runs in flight together; results right and the validation layer silent."""
    import test_replay as R

    from portable.memory import BufferPool

    with _backend(device, mode) as b:
        dev = b._own.device
        pool = BufferPool(b)
        recs = [R.chain(b, pool, R.axpy(spirv))[0] for _ in range(2)]
        lanes = ["compute"] if dev.transfer is None else ["upload", "compute", "download"]
        assert all(r.lanes == lanes and r.barriers == 2 for r in recs)
        if mode == "shared":
            assert b.transfer_queue_family[0] == b.queue_family[0] and not dev.ownership_transfers
        rng = np.random.default_rng(1)
        runs = []
        for i in range(6):
            x, y = rng.standard_normal(R.N, dtype=np.float32), rng.standard_normal(R.N, dtype=np.float32)
            runs.append((x, y, recs[i % 2].submit([x, y])))
        for x, y, f in runs:
            out1, out2, t1 = (r.view(np.float32) for r in f.result(timeout=60))
            np.testing.assert_allclose(out1, x + 3 * y, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(out2, y + 3 * x, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(t1, x + 5 * y, rtol=1e-5, atol=1e-5)
        if dev.transfer is not None:  # an upload and a download per run signalled the transfer timeline(s)
            assert sum(lane.last_value for lane in dev.lanes() if lane is not dev.compute) >= 12
        for r in recs:
            r.close()
    assert b.validation_messages == [], b.validation_messages


@needs_device
def test_small_runs_stay_on_the_compute_queue(device, monkeypatch):
    """A recording whose copies in and out are under replay.TRANSFER_LANE_MIN_BYTES is one command buffer on the
    compute queue even with a transfer lane; at the threshold it takes the lane. Both give the right results."""
    import test_async as A

    import portable
    from portable.api import CompiledGraph
    from portable.devices import LiveDevice
    from portable.runtime_vk import replay

    exe = portable.compile(A.G, device=device).executable
    moved = sum(s.nbytes for s in exe.inputs) + sum(sig.nbytes for _, sig in exe.outputs)
    b = _backend(device, "shared")
    live = LiveDevice(b)
    try:
        for threshold, lanes in ((moved + 1, ["compute"]), (moved, ["upload", "compute", "download"])):
            monkeypatch.setattr(replay, "TRANSFER_LANE_MIN_BYTES", threshold)
            cg = CompiledGraph(exe, live, max_in_flight=2)
            futures = [cg.submit(*A._inputs(i)) for i in range(4)]
            for i, f in enumerate(futures):
                A._check(f.result(timeout=60), i)
            # One recording per frame in flight: a second only where the first was still busy (timing).
            recs = [r.lanes for r in cg._cell[0].recordings]
            assert 1 <= len(recs) <= 2 and all(r == lanes for r in recs), recs
            cg.close()
    finally:
        b.close()
    assert b.validation_messages == [], b.validation_messages


@needs_device
def test_graph_frames_and_state_on_the_transfer_lane(device, lane_for_any_size):
    """The public path on a shared-lane backend: two frames in flight, then carried state with set/get_state
    (one-shot transfers on the compute queue between recorded runs)."""
    import test_async as A
    import test_state as S

    import portable
    from portable.api import CompiledGraph
    from portable.devices import LiveDevice

    b = _backend(device, "shared")
    live = LiveDevice(b)
    try:
        exe = CompiledGraph(portable.compile(A.G, device=device).executable, live, max_in_flight=2)
        futures = [exe.submit(*A._inputs(i)) for i in range(6)]
        for i, f in enumerate(futures):
            A._check(f.result(timeout=60), i)
        recs = exe._cell[0].recordings  # a second frame only where the first was still busy (timing)
        assert 1 <= len(recs) <= 2 and all(r.lanes == ["upload", "compute", "download"] for r in recs)
        exe.close()

        step = CompiledGraph(portable.compile(S.G, device=device).executable, live).with_state({1: 1})
        start = np.full((16, 24), 2.0, np.float32)
        step.set_state({1: start})
        x = np.ones((16, 24), np.float32)
        for k in range(3):
            y, = step(x)
            np.testing.assert_allclose(y, (2.0 + k) * x)
        np.testing.assert_allclose(step.get_state()[1], start + 3 * x)
        step.close()
    finally:
        b.close()
    assert b.validation_messages == [], b.validation_messages
