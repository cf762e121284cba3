"""Workgroup grids within the limit every device takes: a tiled loop nest whose workgroup tiles do not fit one
loop per grid dimension (more than three tiled loops, or a loop of more tiles than GRID_LIMIT) is mapped to a
linearized grid whose x, y and z counts each stay within the limit.

A convolution's im2col over 2048 channels x 3x3 taps x 28x28 positions tiles into 73728 workgroups: as one
dimension that is past lavapipe's maxComputeWorkGroupCount[0] of 65535 and the runtime refuses the plan. Upstream
`map_forall_to_blocks` with `linear_dim_*` mapping delinearizes the workgroup's linear id (x + y*X + z*X*Y) into
the loops' indices and guards the body with `id < tiles` when the grid has more workgroups than tiles. Grids are
factored exactly where the count allows, so that guard is rare.
"""

from __future__ import annotations

# Workgroups per grid dimension that every device takes: the Vulkan spec's minimum maxComputeWorkGroupCount (GPU
# and CPU drivers alike); OpenCL bounds only the work-item counts, which this keeps within 32 bits too.
GRID_LIMIT = 65535


def tile_counts(ranges, tile) -> list[int]:
    """Workgroup tiles along each tiled loop (tile size 0: the loop is not tiled)."""
    return [-(-int(r) // int(t)) for r, t in zip(ranges, tile) if t]


def linear_grid(counts: list[int], limit: int = GRID_LIMIT) -> list[int] | None:
    """None when the loops map one to a grid dimension (at most three, each within `limit`); else the [x, y, z]
    workgroup counts of a linearized grid covering their product, each within `limit`: an exact factoring where
    one exists near the smallest y (no idle workgroups), else the fewest extra workgroups."""
    if len(counts) <= 3 and all(c <= limit for c in counts):
        return None
    total = 1
    for c in counts:
        total *= int(c)
    if total <= limit:
        return [total, 1, 1]
    z = -(-total // (limit * limit))  # past limit^2 workgroups only
    rest = -(-total // z)
    y = -(-rest // limit)
    if z == 1:
        y = next((d for d in range(y, min(limit, 64 * y) + 1) if total % d == 0), y)
    if z > limit:
        raise ValueError(f"{counts} workgroup tiles do not fit a grid of {limit}^3 workgroups")
    return [-(-rest // y), y, z]


__all__ = ["GRID_LIMIT", "linear_grid", "tile_counts"]
