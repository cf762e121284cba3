"""What a tiling strategy is (choice.py picks one per dispatch group), and how the choosers read the profile.

A strategy says, for every loop of the tiled op: the workgroup tile (0 = not tiled: reduction loops) and
the number of threads that share that tile. Threads of one workgroup take contiguous chunks of the tile.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...profiles import Options

ANY_WIDTH = -1  # Strategy.subgroup_reduce: the device's own subgroup reduction, whatever its width


def or_default(value, default):
    """An option's value, or the reader's default where the profile leaves it unset."""
    return default if value is None else value


@dataclass(frozen=True)
class Strategy:
    tile: tuple[int, ...]  # workgroup tile per loop; 0 = whole loop inside the thread
    threads: tuple[int, ...]  # threads per loop; 0 = not distributed
    vectorize: bool = False  # every thread's tile is static and its innermost extent fits a vector register
    # Matmul groups: the root's reduction loop is tiled by k_tile inside each thread, so a thread's
    # accumulator tile lives in registers across the K loop (0 = no K tiling).
    root_k_tile: tuple[int, ...] = ()
    # Rows of a thread's matmul tile, each unrolled into its own 1-d register accumulator (root loop index, rows);
    # without a K tile (a window's gather): rows of the thread's tile, each vectorized on its own (loop index, rows).
    root_row_unroll: tuple[int, int] = (0, 1)
    # Columns of a thread's matmul tile wider than one vector: (root loop index, vector width, vectors per row),
    # each column block unrolled like the rows (width 0: one vector per row).
    root_col_split: tuple[int, int, int] = (0, 0, 1)
    # Reductions: one workgroup per output element, this many threads splitting the reduction loop and
    # combining partials through workgroup memory (0 = each thread reduces whole rows).
    reduce_threads: int = 0
    # Cooperative-matrix matmul (coop_matrix.py): outputs (m, n) per subgroup; one subgroup of 32 per tile.
    coop: tuple[int, int] | None = None
    # Matmul whose workgroup walks K in steps of this, operand tiles staged in workgroup memory (promotion.py;
    # with `coop`: coop_staging.py, in this many workgroup buffers per operand).
    promote_k: int = 0
    coop_buffers: int = 1
    # Row chains on one workgroup per row: the subgroup size whose shuffles combine each reduction's partials
    # (subgroup_reduce.py; ANY_WIDTH: the device's subgroup reduction at whatever width it runs; 0 = a tree of
    # partials in workgroup memory).
    subgroup_reduce: int = 0
    # Row chains: rows one workgroup takes one after the other (serial_rows.py; tiles.serial_rows).
    serial_rows: int = 1
    # 1-d elementwise kernels with more tiles than this: this many workgroups in a grid-stride loop (grid_stride.py).
    grid_stride: int = 0
    # Direct convolutions: the root's window (reduction) loops stepped one tap at a time, the thread's output
    # tile a register accumulator across them (transform_script._conv_taps).
    root_taps: bool = False
    # With root_taps: the window loops fully unrolled (SPIR-V: row_vectors.py unrolls the 2-d register tile only in
    # straight-line code, and the taps' reads of one input row become one load).
    unroll_taps: bool = False

    @property
    def workgroup_size(self) -> tuple[int, int, int]:
        if self.coop:
            return (32 * (self.tile[1] // self.coop[1]), self.tile[0] // self.coop[0], 1)
        if self.reduce_threads:
            return (self.reduce_threads, 1, 1)
        dims = [t for t in self.threads if t]
        if len(dims) <= 3:
            x = dims[-1] if dims else 1
            y = dims[-2] if len(dims) > 1 else 1
            z = dims[-3] if len(dims) > 2 else 1
            return (x, y, z)
        n = 1
        for d in dims:
            n *= d
        return (n, 1, 1)


def vector_width(o: Options) -> int:
    """Widest vector of a thread's row (matmul tile rows, elementwise runs): 4 unless the profile asks for 8 or
    16 (OpenCL C has them; SPIR-V without the Vector16 capability does not); wider matmul rows are held in
    several such vectors."""
    width = or_default(o.max_vector_width, 4)
    return width if width in (8, 16) else 4
