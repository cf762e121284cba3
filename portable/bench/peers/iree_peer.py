"""IREE on its Vulkan HAL: the same Linalg MLIR compiled by iree.compiler for `vulkan-spirv`, run with
iree.runtime on the 'vulkan' driver (or .vmfb modules exported ahead of time, for hosts without the compiler).

Device-only time = one call of the module's function on device-resident arrays (the default, synchronous
ABI returns after the device finished); end-to-end time adds the upload of numpy inputs and the download.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ..workloads import Workload
from .base import Peer, Prepared, Unavailable, Unsupported


def compile_vmfb(text: str, target: str | None) -> bytes:
    """IREE compile for the Vulkan HAL; target None = IREE's default Vulkan target (vp_android_baseline_2022)."""
    import iree.compiler as ic

    args = [f"--iree-vulkan-target={target}"] if target else []
    try:
        return ic.compile_str(text, target_backends=["vulkan-spirv"], extra_args=args)
    except Exception as e:
        diag = str(e)
        first = next((ln.strip() for ln in diag.splitlines() if "error:" in ln), diag.splitlines()[0] if diag else "")
        raise RuntimeError(f"iree-compile failed: {first}\n{diag[:2500]}") from e


def _to_host(device, array) -> np.ndarray:
    """Download through a mapped staging buffer. IREE's own `to_host` imports a numpy allocation, which the
    Vulkan allocator rejects unless it is 4096-byte aligned (minImportedHostPointerAlignment)."""
    import iree.runtime as rt

    bv = array._buffer_view
    src = bv.get_buffer()
    host = device.allocator.allocate_buffer(
        memory_type=int(rt.MemoryType.HOST_LOCAL | rt.MemoryType.DEVICE_VISIBLE),
        allowed_usage=int(rt.BufferUsage.TRANSFER_TARGET | rt.BufferUsage.MAPPING_SCOPED),
        allocation_size=src.byte_length())
    sem = device.create_semaphore(0)
    device.queue_copy(src, host, wait_semaphores=rt.HalFence.create_at(sem, 0),
                      signal_semaphores=rt.HalFence.create_at(sem, 1))
    rt.HalFence.create_at(sem, 1).wait()
    dtype = rt.HalElementType.map_to_dtype(bv.element_type)
    return np.array(host.map().asarray(tuple(bv.shape), dtype))


class _Prepared(Prepared):
    def __init__(self, peer: IreePeer, vmfb: bytes, inputs: list[np.ndarray], compile_s: float, source: str):
        import iree.runtime as rt

        self.peer, self.compile_s, self.source = peer, compile_s, source
        self.ctx = rt.SystemContext(config=peer.config)
        self.ctx.add_vm_module(rt.VmModule.copy_buffer(self.ctx.instance, vmfb))
        self.fn = self.ctx.modules.module["main"]
        self.resident = [rt.asdevicearray(peer.device, a) for a in inputs]

    def run_device(self) -> None:
        self.fn(*self.resident)

    def run_e2e(self, inputs: list[np.ndarray]) -> np.ndarray:
        return _to_host(self.peer.device, self.fn(*inputs))

    def device_result(self) -> np.ndarray:
        return _to_host(self.peer.device, self.fn(*self.resident))

    def info(self) -> dict:
        return {"compile_s": round(self.compile_s, 3), "source": self.source, "target": self.peer.target or "default"}


class IreePeer(Peer):
    name = "iree"

    def __init__(self, device_name: str, target: str | None = None, import_dir: Path | None = None,
                 manifest: dict | None = None):
        self.device_name, self.target, self.import_dir, self.manifest = device_name, target, import_dir, manifest
        self.device = self.config = None

    def describe(self) -> dict:
        try:
            import iree.runtime as rt
        except ImportError as e:
            raise Unavailable(f"iree.runtime is not installed ({e}); pip install iree-base-runtime") from e
        if self.import_dir is None:
            try:
                import iree.compiler  # noqa: F401
            except ImportError as e:
                raise Unavailable(f"iree.compiler is not installed ({e}); pip install iree-base-compiler, "
                                  f"or export .vmfb files elsewhere and use --import") from e
        try:
            driver = rt.get_driver("vulkan")
            found = driver.query_available_devices()
        except Exception as e:
            raise Unavailable(f"IREE's vulkan driver found no device: {e}") from e
        match = [d for d in found if self.device_name and self.device_name in d["name"]] or found[:1]
        if not match:
            raise Unavailable("IREE's vulkan driver lists no device")
        self.device = driver.create_device(match[0]["device_id"])
        self.config = rt.Config(device=self.device)
        from importlib.metadata import version

        return {"name": match[0]["name"], "driver": "vulkan", "target": self.target or "default",
                "iree_runtime": version("iree-base-runtime"), "mode": "vmfb import" if self.import_dir else "compile"}

    def prepare(self, w: Workload, inputs: list[np.ndarray]) -> Prepared:
        if w.family == "model":
            raise Unsupported("model workloads are ONNX files; this peer compiles the Linalg MLIR of the op "
                              "workloads (no ONNX import here)")
        t0 = time.perf_counter()
        if self.import_dir is not None:
            entry = (self.manifest or {}).get("workloads", {}).get(w.id, {}).get("iree", {})
            path = entry.get(self.target or "default")
            if not path or path.startswith("error:"):
                raise Unsupported(f"no .vmfb exported for target {self.target or 'default'}"
                                  + (f" ({path})" if path else ""))
            vmfb, source = (self.import_dir / path).read_bytes(), f"loaded {path}"
        else:
            vmfb = compile_vmfb(w.mlir, self.target)
            source = "compiled here"
        return _Prepared(self, vmfb, inputs, time.perf_counter() - t0, source)
