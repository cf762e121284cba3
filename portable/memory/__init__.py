"""API-neutral device memory: pooled buffers and liveness-based planning of intermediates."""

from .planner import plan_buffers
from .pool import BufferPool

__all__ = ["BufferPool", "plan_buffers"]
