"""The VkPipelineCache of a device, loaded from and saved to disk so that later processes skip the
driver's shader compilation.

File: cache_dir()/vulkan/<pipelineCacheUUID>-<vendor>-<device>-<driverVersion>.bin, so a driver update
starts a fresh file. Content: our 8-byte magic, a SHA-256 of the blob, then the driver's blob. The
checksum and our own check of the driver's header mean a truncated or foreign file is ignored with a
warning before the driver sees it (some drivers crash on bad cache data); the cache never breaks a run.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import tempfile
import warnings
from pathlib import Path
from typing import Any

from .. import config
from ._vk import new_struct, vk
from .errors import CacheWarning, check, guard
from .properties import PhysicalDevice

_MAGIC = b"PVKPC001"
_HEADER = struct.Struct("<IIII16s")  # VkPipelineCacheHeaderVersionOne: size, version, vendor, device, uuid


def cache_path(pd: PhysicalDevice) -> Path:
    i = pd.info
    name = f"{pd.cache_uuid.hex()}-{i.vendor_id:04x}-{i.device_id:04x}-{pd.driver_version_raw}.bin"
    return config.cache_dir() / "vulkan" / name


def _read(path: Path, pd: PhysicalDevice) -> bytes:
    """The driver blob stored at `path`, or b"" (with a warning if the file exists but is unusable)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return b""
    except OSError as e:
        warnings.warn(f"Vulkan pipeline cache {path} unreadable ({e}); ignoring it", CacheWarning, stacklevel=4)
        return b""
    problem = None
    blob = raw[len(_MAGIC) + 32:]
    if raw[:len(_MAGIC)] != _MAGIC:
        problem = "not a portable pipeline cache file"
    elif hashlib.sha256(blob).digest() != raw[len(_MAGIC):len(_MAGIC) + 32]:
        problem = "checksum mismatch (truncated or corrupt)"
    elif len(blob) < _HEADER.size:
        problem = "driver data too short"
    else:
        size, version, vendor, device, uuid = _HEADER.unpack_from(blob)
        if version != 1 or size < _HEADER.size:
            problem = f"unknown driver cache header (size {size}, version {version})"
        elif (vendor, device, uuid) != (pd.info.vendor_id, pd.info.device_id, pd.cache_uuid):
            problem = "written by another device or driver"
    if problem:
        warnings.warn(f"Vulkan pipeline cache {path}: {problem}; ignoring it (it will be rewritten)",
                      CacheWarning, stacklevel=4)
        return b""
    return blob


def _write_atomic(path: Path, data: bytes) -> None:
    """Temp file in the same directory + os.replace: readers see the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class PipelineCache:
    """A VkPipelineCache seeded from disk; `save()` writes it back when pipelines were added."""

    def __init__(self, device_handle: Any, pd: PhysicalDevice):
        self.device = device_handle
        self.path = cache_path(pd)
        blob = _read(self.path, pd)
        self.handle = self._create(blob)
        if self.handle is None:  # the driver refused data that passed our checks
            warnings.warn(f"Vulkan pipeline cache {self.path} rejected by the driver; ignoring it",
                          CacheWarning, stacklevel=3)
            blob = b""
            self.handle = self._create(blob, strict=True)
        self.loaded_bytes = len(blob)  # > 0: pipelines built in an earlier run may be reused
        self.dirty = False  # set by whoever creates a pipeline with this cache

    def _create(self, blob: bytes, strict: bool = False) -> Any:
        data = vk.ffi.from_buffer(blob) if blob else vk.ffi.NULL
        info = new_struct("VkPipelineCacheCreateInfo", vk.VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
                          initialDataSize=len(blob), pInitialData=data)
        try:
            with guard("vkCreatePipelineCache"):
                return vk.vkCreatePipelineCache(self.device, info, None)
        except Exception:
            if strict or not blob:
                raise
            return None

    def data(self) -> bytes:
        """The driver's serialized cache (vkGetPipelineCacheData, which the `vulkan` package lacks)."""
        size = vk.ffi.new("size_t*")
        while True:
            check(vk.lib.vkGetPipelineCacheData(self.device, self.handle, size, vk.ffi.NULL),
                  "vkGetPipelineCacheData")
            buf = vk.ffi.new("char[]", size[0])
            result = vk.lib.vkGetPipelineCacheData(self.device, self.handle, size, buf)
            if result != vk.VK_INCOMPLETE:  # INCOMPLETE: it grew between the two calls; ask again
                check(result, "vkGetPipelineCacheData")
                return vk.ffi.buffer(buf, size[0])[:]

    def save(self) -> None:
        """Write the cache to disk if pipelines were added; failures only warn."""
        if not self.dirty or self.handle is None:
            return
        try:
            blob = self.data()
            _write_atomic(self.path, _MAGIC + hashlib.sha256(blob).digest() + blob)
            self.dirty = False
        except Exception as e:  # noqa: BLE001 - the cache is an optimisation: never fail close() over it
            warnings.warn(f"could not save the Vulkan pipeline cache to {self.path}: {e}", CacheWarning,
                          stacklevel=3)

    def destroy(self) -> None:
        if self.handle is not None:
            vk.vkDestroyPipelineCache(self.device, self.handle, None)
            self.handle = None
