"""Tiling strategy per dispatch group, chosen from the op kind, its shape and the device profile (the Strategy
record: strategy.py; the strategies of particular forms: forms.py).
"""

from __future__ import annotations

import math

from ...ir.linalg_info import OpKind
from ...profiles import Options
from . import tiles
from .forms import promoted_matmul, vector_conv, vector_gathers
from .strategy import ANY_WIDTH, Strategy, or_default, vector_width

# Profile keys whose strategies only OpenCL C carries out (16-lane vectors); for gathers, SPIR-V takes only the
# plain vector loads (no load per lane). Keys that only SPIR-V carries out: vectors of any width, split into vec4
# pieces (codegen_spirv/lanes/split_vectors.py).
OPENCL_ONLY = {"max_vector_width": 4}
SPIRV_ONLY = {"conv_row_columns": 0}


def for_targets(options: Options, targets: tuple[str, ...]) -> Options:
    """The profile as the compile for `targets` reads it: with SPIR-V among them, keys that only OpenCL C can
    carry out are off; with OpenCL C among them, subgroup reductions need the device's OpenCL shuffle and small
    cooperative-matrix tiles are only for shapes the large ones do not divide (one strategy serves every target of
    an executable)."""
    o = Options.of(options)
    changes: dict = {}
    if "vulkan" in targets and any(getattr(o, k) for k in OPENCL_ONLY):
        changes.update(OPENCL_ONLY)
    if "opencl" in targets and any(getattr(o, k) for k in SPIRV_ONLY):
        changes.update(SPIRV_ONLY)
    if "vulkan" in targets and or_default(o.loop_vectorize, 0) > 4:
        changes["loop_vectorize"] = 4  # SPIR-V vectors have at most 4 lanes
    if "vulkan" in targets and o.vectorize_gathers:
        changes["vectorize_gathers"] = "contiguous"
    if "vulkan" in targets and o.subgroup_reduce == "varying" and \
            "GroupNonUniformArithmetic" not in or_default(o.spirv_caps, ()):
        changes["subgroup_reduce"] = False  # a target without SPIR-V's subgroup arithmetic
    if "opencl" in targets and o.coop_small_tiles_below:
        # PTX wmma on NVIDIA's OpenCL lost with small tiles at 64 workgroups (device_profiles/nvidia.toml): large ones
        # there.
        changes["coop_small_tiles_below"] = 0
    if "opencl" in targets and o.subgroup_reduce and changes.get("subgroup_reduce", True) and not (
            o.opencl_asm or (o.subgroup_reduce == "varying" and o.opencl_subgroups)):
        # No subgroup shuffle known in this device's OpenCL C, nor (for the varying form) cl_khr_subgroups.
        changes["subgroup_reduce"] = False
    return o.replace(**changes) if changes else o


def choose(kind: OpKind, options: Options, root: OpKind | None = None) -> Strategy:
    """Pick tiles for the op that a group tiles (its last consumer or its root).

    `kind.ranges`/`iterators` describe that op. Per-thread work per parallel loop comes from the profile:
    matmul-like groups block a `thread_tile` of outputs per thread (register blocking); elementwise ops give
    each thread `elementwise_per_thread` consecutive elements of the innermost loop.
    """
    o = Options.of(options)
    par = [i for i, it in enumerate(kind.iterators) if it == "parallel"]
    cols = or_default(o.matmul_row_vector_cols, 0)
    if kind.kind == "matmul" and cols and len(par) >= 2 and kind.ranges[par[-2]] == 1 and \
            not o.matmul_promote_tile:
        # A matrix-vector product: more columns per thread make each thread's walk down B's rows read longer runs
        # of each row (lavapipe, 16 columns per thread: gemv 1x2048x2048 CPU ms 9.9 -> 4.0).
        s = _choose(kind, o.replace(thread_tile=(1, cols), vector_cols=cols), root)
        if s.root_k_tile:
            return s
    if kind.kind == "matmul" and o.matmul_thread_tile is not None and not o.matmul_promote_tile:
        # The profile's matmul tile and thread layout are for the register-blocked vector path; where its tiles
        # do not divide, the scalar path keeps `thread_tile` (a large scalar tile only lengthens each thread's
        # loops, and lavapipe cuts an invocation off after 65535 loop iterations). Workgroup-memory matmuls
        # (matmul_promote_tile) have their own tiles.
        s = _choose(kind, o.replace(thread_tile=o.matmul_thread_tile), root)
        if s.root_k_tile:
            return s
        o = o.replace(matmul_thread_tile=None, matmul_threads_x=None)
    wide_elementwise = or_default(o.elementwise_per_thread, 1) > 4 and o.wide_buffers
    if kind.kind == "elementwise" and (wide_elementwise or o.elementwise_workgroup_invocations is not None):
        # Wide elementwise tiles (8, halved by split_vectors.py under wide_buffers) and workgroups are for the
        # vector path; where their tiles do not divide, the plain ones (64 invocations, 4 per thread) may.
        # (OpenCL C's own wide vectors, max_vector_width, keep their tiles as they are.)
        for plain in (o, o.replace(elementwise_workgroup_invocations=None)):
            s = _choose(kind, plain, root)
            if s.vectorize:
                return s
        s = _dividing_elementwise(kind, o) if root is None or not root.gathers else None
        if s is not None:
            return s
        o = o.replace(elementwise_workgroup_invocations=None,
                      elementwise_per_thread=min(4, or_default(o.elementwise_per_thread, 1)))
    s = _choose(kind, o, root)
    if kind.kind in ("matmul", "conv") and _scalar_loop_too_long(s, root, o):
        # The scalar matmul (or direct convolution: a 3-d one over 256x3x3x3 taps) loops over K for every output
        # of the thread tile: smaller tiles, down to one output, then K split over a workgroup's threads.
        for tm, tn in ((4, 4), (2, 4), (2, 2), (1, 1)):
            s = _choose(kind, o.replace(thread_tile=(tm, tn)), root)
            if not _scalar_loop_too_long(s, root, o):
                return s
        split = _choose(kind, o.replace(reduction_threads=64, split_k_max_outputs=1 << 62), root)
        if split.reduce_threads:
            return split
    return s


def _choose(kind: OpKind, o: Options, root: OpKind | None) -> Strategy:
    invocations = or_default(o.workgroup_invocations, 64)
    if kind.kind in ("matmul", "conv"):
        invocations = or_default(o.matmul_workgroup_invocations, invocations)
    elif kind.kind == "elementwise":
        invocations = or_default(o.elementwise_workgroup_invocations, invocations)
    par = [i for i, it in enumerate(kind.iterators) if it == "parallel"]
    if kind.kind == "row":
        # A row chain (dispatch.py): threads take whole rows; the column loop and unit row loops stay whole.
        par = [d for d in range(len(kind.ranges) - 1) if kind.ranges[d] > 1] or [len(kind.ranges) - 2]
    if kind.kind == "row" and or_default(o.reduction_threads, 0):
        # A row chain on a GPU profile: one workgroup per row, its threads sharing each op of the chain.
        tile = tuple(0 if d == len(kind.ranges) - 1 else 1 for d in range(len(kind.ranges)))
        t = tiles.row_threads(o.reduction_threads, kind.ranges[-1])
        sg = (o.subgroup_size or 0) if o.subgroup_reduce else 0
        sg = sg if sg and t % sg == 0 and t > sg else 0
        if o.subgroup_reduce == "varying" and t > 1:
            sg = ANY_WIDTH  # no width assumed (subgroup_reduce.py)
        rows = [r for r in kind.ranges[:-1] if r > 1]
        max_x = int(or_default(o.max_workgroup_count, (65535,))[0])
        serial = (tiles.serial_rows(rows[0], kind.ranges[-1], or_default(o.row_workgroup_columns, 0),
                                    max_x) or 1) if len(rows) == 1 and t else 1
        return Strategy(tile, tuple(0 for _ in kind.ranges), reduce_threads=t,
                        subgroup_reduce=sg, serial_rows=serial)
    wg_red = _workgroup_reduction(kind, root, o)
    if not wg_red and _loop_too_long(root, o):
        # lavapipe ends an invocation after 65535 loop iterations (LP_MAX_TGSI_LOOP_ITERATIONS, counted over all
        # its loops): a longer reduction is split over a workgroup's threads instead of being cut short.
        wg_red = _workgroup_reduction(kind, root, o.replace(reduction_threads=64))
    if wg_red:
        tile = tuple(1 if it == "parallel" else 0 for it in kind.iterators)
        return Strategy(tile, tuple(0 for _ in kind.iterators), reduce_threads=wg_red)
    conv = vector_conv(kind, root, o, invocations)
    if conv is not None:
        return conv
    gathers = vector_gathers(kind, root, par, o, invocations)
    if gathers is not None:
        return gathers
    per_thread = [1] * len(kind.ranges)
    if kind.kind in ("matmul", "conv") and len(par) >= 2:
        tm, tn = or_default(o.thread_tile, (4, 4))
        per_thread[par[-2]], per_thread[par[-1]] = tm, tn
        rows = kind.ranges[par[-2]]
        if kind.kind == "matmul" and o.matmul_short_rows_widen and rows < tm:
            # Fewer rows than the thread tile (a matrix-vector product): the spare accumulators take columns.
            per_thread[par[-2]], per_thread[par[-1]] = rows, tn * (tm // rows)
        if kind.kind == "conv" or o.matmul_thread_tile is None:  # not the CPU drivers' vector tiles
            # A matrix-vector product keeps its columns: they are its vector loads (f16 ones narrowed to one
            # column left a vector.contract neither target lowers).
            tiles.fill_device(kind, par, per_thread, or_default(o.fill_threads, 0),
                         rows_only=kind.kind == "matmul" and kind.ranges[par[-2]] == 1)
    elif kind.kind == "elementwise" and par:
        per_thread[par[-1]] = or_default(o.elementwise_per_thread, 1)
        rows = or_default(o.elementwise_rows_per_thread, 1)
        if rows > 1 and per_thread[par[-1]] == 8 and o.wide_buffers and len(par) >= 2 and \
                kind.ranges[par[-2]] % rows == 0:
            per_thread[par[-2]] = rows  # lavapipe: a bias read once for `rows` rows (row_vectors.py)
    tile = [0] * len(kind.ranges)
    threads = [0] * len(kind.ranges)
    budget = invocations
    # Threads are distributed over the innermost three parallel loops (a workgroup has three dimensions,
    # x innermost); each dimension within the device's workgroup size (z is 64 on most GPUs).
    max_size = list(or_default(o.max_workgroup_size, (1024, 1024, 64)))
    if kind.kind == "matmul" and o.matmul_threads_x and o.matmul_threads_x_slab_bytes and \
            _column_slab_bytes(kind, root, par, per_thread, invocations) < o.matmul_threads_x_slab_bytes:
        o = o.replace(matmul_threads_x=None)
    if kind.kind == "matmul" and o.matmul_threads_x:
        # Fewer columns per workgroup, more rows: the operand columns a workgroup walks stay in cache.
        max_size[0] = min(int(max_size[0]), o.matmul_threads_x)
    for i, d in enumerate(reversed(par[-3:])):
        need = max(1, -(-kind.ranges[d] // per_thread[d]))
        t = min(budget, tiles.pow2_at_least(need), tiles.pow2_at_most(int(max_size[i])))
        threads[d] = t
        tile[d] = t * per_thread[d]
        budget //= t
    if kind.kind == "elementwise" and o.elementwise_dividing_tiles and \
            any(kind.ranges[d] % tile[d] for d in par[-3:]):
        # Power-of-two tiles that do not divide (a transposed convolution's 112x112 = 12544 pixels over 1024 a
        # workgroup) leave each thread a trip count known only at run time: scalar loops, the epilogue's ops each a
        # pass over memory. Tiles that divide keep the thread's vector, or, over odd extents (SqueezeNet's 55x55
        # pools), give each thread a static tile, one element there: no loops, which PoCL vectorizes across the
        # work-items. Not where that leaves a workgroup under a quarter of its threads (a prime extent).
        per, dtile, dthreads = tiles.dividing_tiles(kind, par, per_thread, invocations, vector_width(o))
        if 4 * math.prod(t for t in dthreads if t) >= invocations:
            per_thread, tile, threads = per, dtile, dthreads
    if kind.kind == "row" and any(kind.ranges[d] % tile[d] for d in par[-3:]):
        # Rows the power-of-two tiles do not divide (127 tokens) would give each thread a row count known only at
        # run time, its rows kept in private arrays sized at run time, in scalar loops: threads that divide.
        budget = or_default(o.max_workgroup_invocations, invocations)
        loops = list(reversed(par[-3:]))  # innermost first
        for i, d in enumerate(loops):
            threads[d] = tile[d] = tiles.largest_divisor(kind.ranges[d], min(budget, int(max_size[i])))
            budget //= threads[d]
        for d in reversed(loops):  # outer loops give their threads back first, down to min_workgroups
            while math.prod(kind.ranges[e] // tile[e] for e in par if tile[e]) < or_default(o.min_workgroups, 1) and \
                    threads[d] > 1:
                threads[d] = tile[d] = tiles.largest_divisor(kind.ranges[d], threads[d] - 1)
    if kind.kind == "matmul" and root is not None and root.contiguous_b and \
            any(kind.ranges[d] % tile[d] for d in par[-3:]):
        # Sizes such as a convolution's 7x7 = 49 outputs per channel: tiles that divide every loop keep the
        # register-blocked vector path (a ragged tile falls back to scalar code, measured 10-25x slower).
        per, dtile, dthreads = tiles.dividing_tiles(kind, par, per_thread, invocations,
                                                      vector_width(o), or_default(o.matmul_threads_x, 0))
        k_range = root.ranges[root.iterators.index("reduction")] if root is not None and "reduction" in root.iterators \
            else 1
        # 1-wide columns vectorize only with an even K and rows split over workgroups (other forms leave n-d
        # vectors that the targets do not lower; e.g. 5x8 x 8x3): else the ragged tiles above stay.
        # A prime extent divides into one output per thread and a few threads per workgroup (a batch of 127x127
        # attention scores: 4 threads, one score each; 2.3 ms on PoCL where the ragged tiles above took 1.35): those
        # keep the ragged tiles. Threads over the batch count for nothing here: they share no operand.
        few = math.prod(dthreads[d] for d in par[-2:] if dthreads[d]) < invocations // 4
        if per[par[-1]] > 1 or (k_range % 2 == 0 and len(par) >= 2 and dtile[par[-2]] < kind.ranges[par[-2]]
                                and not few):
            per_thread, tile, threads = per, dtile, dthreads
    # Outer parallel loops (batch) get one workgroup per index, through a linearized grid (see
    # transform_script), rather than a long loop inside every thread.
    for d in par[:-3]:
        tile[d] = 1
    # Grid dimension i (x = innermost distributed loop) must stay within the device's workgroup-count limit:
    # past it, each thread takes proportionally more of that loop.
    max_count = list(or_default(o.max_workgroup_count, (65535, 65535, 65535)))
    stride = 0
    if kind.kind == "elementwise" and len([d for d in par if kind.ranges[d] > 1]) == 1 and kind.ranges[par[-1]] > 1:
        # One loop of tiles, a vector per thread: past the grid (or the profile's cap) a grid-stride loop over
        # them (grid_stride.py) instead of more elements per thread.
        cap = min(max_count[0], int(o.elementwise_grid_workgroups or max_count[0]))
        if -(-kind.ranges[par[-1]] // tile[par[-1]]) > cap:
            stride = cap
    for i, d in enumerate(reversed(par[-3:])):
        blocks = -(-kind.ranges[d] // tile[d])
        if blocks > max_count[i] and not stride:
            factor = -(-blocks // max_count[i])
            per_thread[d] *= factor
            tile[d] *= factor
    _spread_over_workgroups(kind, par, tile, threads, per_thread, or_default(o.min_workgroups, 0))
    promoted = promoted_matmul(kind, root, o)
    if promoted is not None:
        return promoted
    vec = _can_vectorize(kind, tile, per_thread, o)
    k_tile: tuple[int, ...] = ()
    if kind.kind == "matmul" and root is not None and _matmul_vectorizable(kind, root, tile, per_thread, o):
        vec = True
        k = root.iterators.index("reduction")
        # (Shared A reads need columns for the lanes to share a row over: a product of rows alone, each
        # thread's own dot product, would read its K step as one wide vector, which SPIR-V cannot hold.)
        kt = (_shared_k_step(o, threads[par[-1]], root.ranges[k]) if len(par) >= 2 else 0) or \
            next(t for t in (4, 2, 1) if root.ranges[k] % t == 0)
        k_tile = tuple(kt if i == k else 0 for i in range(len(root.ranges)))
        root_par = [i for i, it in enumerate(root.iterators) if it == "parallel"]
        row_unroll = (root_par[-2], per_thread[par[-2]]) if len(root_par) >= 2 and len(par) >= 2 else (0, 1)
        width = vector_width(o)
        cols = per_thread[par[-1]]
        if cols % width:
            width = 4  # a single-row tile of _vector_cols (lavapipe): vec4 chunks
        col_split = (root_par[-1], width, cols // width) if cols > width else (0, 0, 1)
        return Strategy(tuple(tile), tuple(threads), vec, k_tile, row_unroll, col_split)
    return Strategy(tuple(tile), tuple(threads), vec, k_tile, grid_stride=stride)


def _column_slab_bytes(kind: OpKind, root: OpKind | None, par: list[int], per_thread: list[int],
                       invocations: int) -> int:
    """Bytes of B (f32) that a workgroup of `invocations` threads along the columns walks over K: what a CPU driver,
    running a workgroup's threads one after another on one core, reads again for every row tile unless it stays in
    cache."""
    if root is None or "reduction" not in root.iterators or len(par) < 2 or \
            kind.ranges[par[-2]] <= per_thread[par[-2]]:
        return 0  # one row tile: B is read once whatever the workgroup's shape
    k = root.ranges[root.iterators.index("reduction")]
    return 4 * k * min(kind.ranges[par[-1]], invocations * per_thread[par[-1]])


def _dividing_elementwise(kind: OpKind, o: Options) -> Strategy | None:
    """Vector tiles for an elementwise op that power-of-two tiles do not divide (rows of 112, 56, 28 or 14: a
    squeeze-and-excitation scale over an NCHW image; it ran scalar at ~7 ns an element on lavapipe): the widest
    per-thread vector up to the profile's that divides the innermost loop, threads that divide what is left."""
    par = [i for i, it in enumerate(kind.iterators) if it == "parallel"]
    if not par or len(par) != len(kind.ranges) or kind.gathers:
        return None
    per_thread = [1] * len(kind.ranges)
    per_thread[par[-1]] = or_default(o.elementwise_per_thread, 4)
    invocations = or_default(o.elementwise_workgroup_invocations, or_default(o.workgroup_invocations, 64))
    width = 8 if o.wide_buffers else vector_width(o)
    per, tile, threads = tiles.dividing_tiles(kind, par, per_thread, invocations, width)
    for d in par[:-3]:
        tile[d] = 1
    if not _can_vectorize(kind, tile, per, o):
        return None
    return Strategy(tuple(tile), tuple(threads), True)


def _spread_over_workgroups(kind: OpKind, par: list[int], tile: list[int], threads: list[int], per_thread: list[int],
                            least: int) -> None:
    """Fewer threads per workgroup (innermost loop first) until the grid has `least` workgroups: a CPU driver runs
    one workgroup per core at a time, so a grid of one workgroup (a matrix-vector product's 2048 outputs) would
    leave cores idle. Tiles that divided their loop still do."""
    def groups() -> int:
        n = 1
        for d in par:
            n *= -(-kind.ranges[d] // tile[d]) if tile[d] else 1
        return n

    for d in reversed(par[-3:]):
        while groups() < least and threads[d] > 1:
            p = next(f for f in range(2, threads[d] + 1) if threads[d] % f == 0)
            threads[d] //= p
            tile[d] = threads[d] * per_thread[d]


def _shared_k_step(o: Options, threads_x: int, k_range: int) -> int:
    """A longer K step where the profile shares A reads across a subgroup (subgroup_reads.py: 1, 2 or 4 values
    per lane), else 0. Its lanes must lie along the columns, so that they share rows; and the K loop must keep
    at least two steps (a loop of one is folded away under the transform script)."""
    lanes = or_default(o.subgroup_shared_reads, 0)
    if not lanes or threads_x % lanes:
        return 0
    top = or_default(o.matmul_k_tile, 4 * lanes)
    return next((t for t in (top, top // 2, top // 4) if t >= lanes and k_range % t == 0 and k_range > t), 0)


def _matmul_vectorizable(kind: OpKind, root: OpKind, tile: list[int], per_thread: list[int], o: Options) -> bool:
    """Register-blocked vector matmul needs static per-thread tiles: every workgroup tile divides its loop."""
    if not o.vectorize or root.iterators.count("reduction") != 1:
        return False
    par = [i for i, it in enumerate(kind.iterators) if it == "parallel"]
    if any(tile[i] == 0 or kind.ranges[i] % tile[i] for i in par):
        return False
    cols, width = per_thread[par[-1]], vector_width(o)
    if cols in (1, 2, 4) or (width > 4 and cols % width == 0):
        return True
    # Wider single-row tiles (Options.vector_cols, set by choose for matrix-vector products where the
    # profile has matmul_row_vector_cols): vec4 chunks, unrolled (root_col_split).
    wide = or_default(o.vector_cols, 0)
    return wide > 4 and cols == wide and wide % 4 == 0 and per_thread[par[-2]] == 1


def _can_vectorize(kind: OpKind, tile: list[int], per_thread: list[int], o: Options) -> bool:
    """Vectorize elementwise groups whose per-thread tile is static (every tile divides its loop) and whose
    innermost per-thread extent is a vector width the targets have (2 or 4; SPIR-V has no wider vectors
    without the Vector16 capability; 8 or 16 where the profile's max_vector_width allows)."""
    if not o.vectorize or kind.kind != "elementwise" or kind.gathers:
        return False
    if any(it != "parallel" for it in kind.iterators) or any(t == 0 for t in tile):
        return False  # loops left whole inside a thread would become huge vectors
    if any(r % t for r, t in zip(kind.ranges, tile)):
        return False
    if per_thread[-1] in (2, 4) or (per_thread[-1] in (8, 16) and per_thread[-1] <= vector_width(o)):
        return True
    # 8: split into vec4 halves before SPIR-V where the profile asks (codegen_spirv/lanes/split_vectors.py).
    return per_thread[-1] == 8 and bool(o.wide_buffers)


def _scalar_loop_too_long(s: Strategy, root: OpKind | None, o: Options) -> bool:
    """A scalar (not register-blocked) matmul or direct-convolution tile whose K loops, one per output of a thread's
    tile, pass the profile's max_loop_iterations."""
    limit = or_default(o.max_loop_iterations, 0)
    if not limit or root is None or s.root_k_tile or s.reduce_threads or s.coop or s.promote_k:
        return False
    outputs = 1
    for t, n in zip(s.tile, s.threads):
        outputs *= -(-t // n) if n else max(t, 1)
    k = 1
    for r, it in zip(root.ranges, root.iterators):
        k *= r if it == "reduction" else 1
    return outputs * k > limit


def _loop_too_long(root: OpKind | None, o: Options) -> bool:
    """Whether one thread reducing a whole row of `root` would pass the profile's max_loop_iterations."""
    limit = or_default(o.max_loop_iterations, 0)
    if not limit or root is None or root.kind != "reduction":
        return False
    n = 1
    for r, it in zip(root.ranges, root.iterators):
        n *= r if it == "reduction" else 1
    return n > limit


# A reduction that gathers its rows along a strided dim shares them over a workgroup from this length (when its
# outputs are too few for the device).
STRIDED_ROW_MIN = 128


def _workgroup_reduction(kind: OpKind, root: OpKind | None, o: Options) -> int:
    """Threads per output element for the workgroup-reduction strategy, or 0 when it does not apply: the
    profile asks for it (GPUs; on CPU drivers barriers cost more than they save), the root reduces one
    innermost loop long enough to share, and the grid of one workgroup per output fits the device."""
    t = or_default(o.reduction_threads, 0)
    if not t or root is None or root.kind not in ("reduction", "matmul"):
        return 0
    outputs = 1
    for r, it in zip(root.ranges, root.iterators):
        outputs *= r if it == "parallel" else 1
    if root.kind == "matmul" and outputs > or_default(o.split_k_max_outputs, 8192):
        return 0  # a matrix-vector product (decode) has too few outputs to fill the GPU: split its K loop
    if root.iterators.count("reduction") != 1 or root.iterators[-1] != "reduction":
        return 0
    if root.results != 1:
        return 0  # splitting a reduction across threads takes one combiner; ArgMax's value and index are two
    strided = root.gathers and root.ranges[-1] >= STRIDED_ROW_MIN and outputs < or_default(o.fill_threads, 0) // 4
    if root.ranges[-1] < 2 * t:
        # Shorter rows share fewer threads where the threads of a workgroup read the row contiguously; a sum of
        # split_k's slices keeps a thread per output, whose neighbours read neighbouring addresses. So does a
        # strided reduction that gathers its rows (computes each element's address) with outputs enough to fill
        # the device; with fewer, a long one shares its rows too: a decode step's attention values product,
        # softmax(scores) . V over the cache and this step's row (257 for 12 heads of 128) had been 12 workgroups
        # of a thread per output, each walking 257 rows.
        t = tiles.row_threads(t, root.ranges[-1]) if root.contiguous_reduction or strided else 0
        if not t:
            return 0
    # (Such a product keeps the unit loops of its heads' layout, and so does a grouped-query attention's scores
    # product, batch and query-row loops of 1 around its heads and keys: on a linearized grid they take no grid dim.)
    par = [r for r, it in zip(kind.ranges, kind.iterators) if it == "parallel" and (r > 1 or not (
        strided or root.contiguous_reduction))]
    max_count = list(or_default(o.max_workgroup_count, (65535, 65535, 65535)))
    if len(par) > 3 or any(r > m for r, m in zip(reversed(par), max_count)):
        return 0
    return t
