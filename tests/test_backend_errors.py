"""Errors the runtimes and memory raise to users are PortableError subclasses (still ValueError/RuntimeError for
callers that caught those) and say what to do."""

from __future__ import annotations

import numpy as np
import pytest

from portable.errors import InvalidArgument, InvalidState, PortableError
from portable.memory.pieces import Pieces
from portable.memory.staging import StagingRing


def test_staging_ring_refuses_a_range_larger_than_itself():
    ring = StagingRing(1024, wait=lambda token: None)
    with pytest.raises(InvalidArgument, match="does not fit a ring of 1024 bytes; copy in parts") as e:
        ring.reserve(4096)
    assert isinstance(e.value, PortableError) and isinstance(e.value, ValueError)


def test_staging_ring_full_of_unfenced_ranges_says_to_fence():
    ring = StagingRing(1024, wait=lambda token: None)
    ring.reserve(1024)
    with pytest.raises(InvalidState, match=r"call fence\(\)") as e:
        ring.reserve(64)
    assert isinstance(e.value, PortableError) and isinstance(e.value, RuntimeError)


def test_pieces_refuse_a_range_across_two_pieces():
    p = Pieces(ranges=[(0, 256), (256, 512)], buffers=[object(), object()])
    assert p.locate(256, 16) == (1, 0)
    with pytest.raises(InvalidArgument, match="cross the end of piece 0 at 256; bind ranges within one piece"):
        p.locate(200, 100)
    with pytest.raises(InvalidArgument, match="outside the buffer's 512 bytes"):
        p.locate(600, 4)


def test_vulkan_buffer_errors_are_portable_errors():
    from portable.runtime_vk import VulkanBackend, enumerate_devices

    devices, reasons = enumerate_devices()
    if not devices:
        pytest.skip("no Vulkan device: " + ("; ".join(reasons) or "the loader lists none"))
    with VulkanBackend(devices[0].index) as backend:
        buf = backend.allocate(64)
        with pytest.raises(InvalidArgument, match="allocate a larger buffer"):
            backend.upload(buf, np.zeros(65, np.uint8))
        backend.free(buf)
        with pytest.raises(InvalidArgument, match="was freed; allocate a new buffer"):
            backend.download(buf, 4)
    with pytest.raises(InvalidState, match="closed; open the device again"):
        backend.allocate(64)
