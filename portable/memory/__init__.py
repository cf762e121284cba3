"""API-neutral device memory: pooled sub-allocation, staging rings, liveness planning, dependency analysis."""

from .hazards import Region, Use, barriers, dependencies, uses
from .pieces import Pieces, plan_pieces
from .planner import plan_buffers
from .pool import BlockSource, BufferPool, RangeAllocator
from .staging import StagingRing

__all__ = [
           "BlockSource",
           "BufferPool",
           "Pieces",
           "RangeAllocator",
           "Region",
           "StagingRing",
           "Use",
           "barriers",
           "dependencies",
           "plan_buffers",
           "plan_pieces",
           "uses",
]
