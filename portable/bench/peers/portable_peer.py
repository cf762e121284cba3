"""portable itself: compiled here from the workload's MLIR, or loaded from an ahead-of-time export.

End-to-end time = `CompiledGraph.__call__` (upload, run, download). Device-only time = the Executable's plan
over buffers of its own with the inputs uploaded once, through the `Backend` contract only: a recording with
no copies replayed (`Backend.record(steps, [], []).run([])`, a blocking run) where the backend records, otherwise
`Backend.execute` (records and submits every call). Both wait for completion (fence / event).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ..workloads import Workload
from .base import BATCH, Peer, Prepared, Unavailable, Unsupported


class DeviceOnly:
    """An Executable's plan bound to buffers of its own on `backend`, inputs and constants uploaded once."""

    def __init__(self, exe, backend, inputs: list[np.ndarray]):
        self.backend = backend
        self.buffers: list = []
        self.recording = None
        kernels = [backend.load_kernel(k) for k in exe.kernels]
        bufs = {}
        for s in exe.slots:  # every slot its own buffer: no aliasing of intermediates, nothing shared
            bufs[s.id] = backend.allocate(max(int(s.nbytes), 4))
            self.buffers.append(bufs[s.id])
        for sid, data in exe.constants.items():
            backend.upload(bufs[sid], np.ascontiguousarray(data))
        for sid, arr in zip(exe.input_slots, inputs):
            if arr.nbytes:
                backend.upload(bufs[sid], np.ascontiguousarray(arr))
        plan = [(kernels[d.kernel], tuple(bufs[s] for s in d.slots), tuple(d.grid), tuple(d.push_constants))
                for d in exe.dispatches]
        self.mode = "execute"
        if hasattr(backend, "record"):
            try:
                from ...backend import Step

                self.recording = backend.record([Step(*p) for p in plan], [], [])
                self.recording.run([])
                self.mode = getattr(self.recording, "mode", "record") or "record"
            except Exception:  # noqa: BLE001 - a backend that cannot record without copies: execute instead
                self.recording = None
        self.plan = plan
        self.batch = None  # the plan BATCH times in one recording, made on first use
        self.outputs = [(bufs[sid], sig) for sid, sig in exe.outputs]

    def result(self) -> np.ndarray:
        buf, sig = self.outputs[0]
        return sig.to_host(self.backend.download(buf, sig.nbytes))

    def run(self) -> None:
        if self.recording is not None:
            self.recording.run([])
        else:
            self.backend.execute(self.plan)

    def run_batch(self) -> int:
        """The plan BATCH times back to back in one recording (barriers between repeats where the plan's
        buffers need them), one submission and one wait; 0 where the backend cannot record."""
        if self.recording is None:
            return 0
        if self.batch is None:
            from ...backend import Step

            self.batch = self.backend.record([Step(*p) for p in self.plan] * BATCH, [], [])
        self.batch.run([])
        return BATCH

    def close(self) -> None:
        if self.batch is not None:
            self.batch.close()
            self.batch = None
        if self.recording is not None:
            self.recording.close()
            self.recording = None
        for b in self.buffers:
            self.backend.free(b)
        self.buffers.clear()


class _Prepared(Prepared):
    def __init__(self, exe, inputs: list[np.ndarray], compile_s: float, source: str):
        self.exe = exe
        self.compile_s = compile_s
        self.source = source
        self.device_only = DeviceOnly(exe.executable, exe.device.backend, inputs)

    def run_device(self) -> None:
        self.device_only.run()

    def run_device_batch(self) -> int:
        return self.device_only.run_batch()

    def run_e2e(self, inputs: list[np.ndarray]) -> np.ndarray:
        return self.exe(*inputs)[0]

    def device_result(self) -> np.ndarray:
        self.device_only.run()
        return self.device_only.result()

    def info(self) -> dict:
        e = self.exe.executable
        return {"kernels": len(e.kernels), "dispatches": len(e.dispatches), "profile": e.profile,
                "compile_s": round(self.compile_s, 3), "source": self.source,
                "device_only_mode": self.device_only.mode,
                "workgroup_sizes": sorted({tuple(k.workgroup_size) for k in e.kernels})}

    def close(self) -> None:
        self.device_only.close()
        self.exe.close()


class PortablePeer(Peer):
    name = "portable"

    def __init__(self, device: str, import_dir: Path | None = None, manifest: dict | None = None):
        self.device = device
        self.import_dir = import_dir
        self.manifest = manifest or {}

    def describe(self) -> dict:
        from ...devices import open_device

        try:
            live = open_device(self.device)
        except Exception as e:
            raise Unavailable(f"{self.device}: {type(e).__name__}: {e}") from e
        i = live.info
        return {"device": i.uri, "name": i.name, "driver": i.driver, "driver_version": i.driver_version,
                "device_type": i.device_type, "profile": live.profile.name}

    def prepare(self, w: Workload, inputs: list[np.ndarray]) -> Prepared:
        import portable

        t0 = time.perf_counter()
        if self.import_dir is not None:
            entry = self.manifest.get("workloads", {}).get(w.id, {})
            if not entry.get("portable"):
                raise Unsupported(f"not in the export: {entry.get('portable_error', 'no executable exported')}")
            api = self.device.split(":")[0]
            rel = entry.get("portable_by_api", {}).get(api, entry["portable"])
            pinned = entry.get("portable_sha256", {}).get(rel)
            if pinned is None:
                raise Unsupported(f"the export's manifest records no sha256 for {rel} (an export older than pinned "
                                  "loads): export again with `portable bench --export`")
            # The export folder is the one the user named on the command line: its manifest pins each file.
            exe = portable.load(self.import_dir / rel, device=self.device, expect_hash=pinned)
            source = f"loaded {rel} (profile {exe.executable.profile})"
        elif w.family == "model":
            exe = portable.compile(w.onnx_path, device=self.device)
            source = "compiled here from the exported ONNX file (or from the on-disk cache)"
        else:
            exe = portable.compile(w.mlir, device=self.device)
            source = "compiled here (or from the on-disk cache)"
        return _Prepared(exe, inputs, time.perf_counter() - t0, source)
