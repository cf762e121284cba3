"""Strategies of particular forms, taken before choice.py's generic tiles where the profile asks for them: the
workgroup-memory matmul (promotion.py), register-tiled channelwise convolutions over their window taps, and gathers
vectorized along their innermost loop.
"""

from __future__ import annotations

from ...ir.linalg_info import OpKind
from ...profiles import Options
from . import tiles
from .strategy import Strategy, or_default, vector_width


def promoted_matmul(kind: OpKind, root: OpKind | None, o: Options) -> Strategy | None:
    """The workgroup-memory matmul (promotion.py) where the profile asks for it: a plain f32-sized (m, n, k)
    matmul, or a batch of them (one workgroup per batch index and tile; H200, the bench's 16x512x64 @ 16x64x512
    attention product 30.3 -> 20.4 us on Vulkan, benchmarks/results/h200/session21/bmm_promotion_nvidia.json),
    with or without an elementwise epilogue (bias, activation, residual: then the tiled op is the epilogue's last
    op, over the output's loops), whose loops the workgroup tile and K step divide.

    The profile's `matmul_promote_tiles` lists (rows, columns, thread rows, thread columns) candidates, best
    first; the first that divides the matmul and gives at least `matmul_promote_min_workgroups` workgroups is
    taken (a large tile on a small matmul leaves most of the GPU idle), else the last that divides. Without it,
    `matmul_promote_tile` with `thread_tile` is the only candidate."""
    if root is None or kind.kind != "matmul" or not o.vectorize:
        return None
    batch = len(root.iterators) == 4  # a batch matmul: one workgroup per batch index and tile (grid z)
    loops = ["parallel"] * (2 + batch)
    if list(root.iterators) != loops + ["reduction"]:
        return None
    # The tiled op: the matmul itself, or the last of its elementwise epilogue (over the output's loops).
    epilogue = list(kind.iterators) == loops and tuple(kind.ranges) == tuple(root.ranges[:-1])
    if not epilogue and tuple(kind.ranges) != tuple(root.ranges):
        return None
    candidates = [tuple(int(v) for v in c) for c in or_default(o.matmul_promote_tiles, ())]
    if not candidates and o.matmul_promote_tile:
        candidates = [(*(int(v) for v in o.matmul_promote_tile), *(int(v) for v in or_default(o.thread_tile, (4, 4))))]
    fitting = [c for c in candidates if _promotable(root, o, *c)]
    if not fitting:
        return None
    b, m, n = (root.ranges[0] if batch else 1), root.ranges[-3], root.ranges[-2]
    enough = or_default(o.matmul_promote_min_workgroups, 0)
    wm, wn, tm, tn = next((c for c in fitting if b * (m // c[0]) * (n // c[1]) >= enough), fitting[-1])
    kt = or_default(o.matmul_promote_k, 16)
    lead = (1,) * batch
    k_loop = () if epilogue else (0,)  # the tiled op's own K loop (tiled by promotion.emit)
    return Strategy((*lead, wm, wn, *k_loop), (*(0,) * batch, wm // tm, wn // tn, *k_loop), True,
                    (*(0,) * batch, 0, 0, 4), (batch, tm), promote_k=kt)


def _promotable(kind: OpKind, o: Options, wm: int, wn: int, tm: int, tn: int) -> bool:
    """Tiles divide the loops, K steps are whole vectors, and the threads and the two f32 operand tiles fit the
    device's workgroup limits and shared memory."""
    m, n, k = kind.ranges[-3:]
    kt = or_default(o.matmul_promote_k, 16)
    if m % wm or n % wn or k % kt or kt % 4 or wm % tm or wn % tn or tn not in (1, 2, 4):
        return False
    if (wm + wn) * kt * 4 > or_default(o.shared_memory_bytes, 16384):
        return False
    rows, cols = wm // tm, wn // tn
    max_size = list(or_default(o.max_workgroup_size, (1024, 1024, 64)))
    return rows * cols <= or_default(o.max_workgroup_invocations, 1024) and cols <= max_size[0] \
        and rows <= max_size[1]


def vector_conv(kind: OpKind, root: OpKind | None, o: Options, invocations: int) -> Strategy | None:
    """A channelwise (depthwise) convolution as register tiles where the profile asks for it
    (`conv_vector_taps`): a thread takes `thread_tile` outputs of the two innermost parallel loops (NHWC: width,
    channels; NCHW: height, width), tiles that divide every loop (static vectors), and accumulates them in
    registers over the window taps (`root_taps`). Each tap reads rows of channels (NHWC) or of columns (NCHW),
    contiguous."""
    if not o.conv_vector_taps or not o.vectorize or root is None or \
            root.kind != "conv" or not root.channelwise:
        return None
    par = [i for i, it in enumerate(kind.iterators) if it == "parallel"]
    if kind.kind != "conv" or len(par) < 3 or "reduction" not in root.iterators:
        return None
    if root.channelwise == "columns" and "reduction" in kind.iterators:
        # NCHW: the vectors run along the output's columns, the innermost loop of an epilogue in the output's
        # layout; the convolution's own innermost loop is its channels.
        return None
    per_thread = [1] * len(kind.ranges)
    per_thread[par[-2]], per_thread[par[-1]] = (int(v) for v in or_default(o.thread_tile, (4, 4)))
    per, tile, threads = tiles.dividing_tiles(kind, par, per_thread, invocations, vector_width(o))
    width = kind.ranges[par[-1]]
    if per[par[-1]] == 1 and root.channelwise == "columns" and 1 < width <= or_default(o.conv_row_columns, 0):
        # NCHW rows that no vector divides (7x7 late layers): whole rows per thread, held as vec4 pieces and the
        # rest (SPIR-V: codegen_spirv/lanes/split_vectors.py).
        per_thread[par[-1]] = width
        per, tile, threads = tiles.dividing_tiles(kind, par, per_thread, invocations, width)
    if per[par[-1]] == 1:
        return None  # one column (channel) per thread: the vectors would run across rows, strided
    for d in par[:-3]:
        tile[d] = 1
    return Strategy(tuple(tile), tuple(threads), True, root_taps=True)


def vector_gathers(kind: OpKind, root: OpKind | None, par: list[int], o: Options,
                    invocations: int) -> Strategy | None:
    """A gather marked vectorizable (a float pad, linalg_info.VECTOR_GATHER) vectorized along its innermost loop
    where the profile asks for it (`vectorize_gathers`; "contiguous": only gathers read by plain vector loads):
    `elementwise_per_thread` lanes per thread there, one element of every other loop, tiles that divide every
    loop (static vectors); its read along that loop becomes a vector load. An unrolled window (a depthwise
    convolution, a pool) takes `window_outputs_per_thread` positions of the next loop too, one vector each,
    unrolled: neighbouring outputs share taps, so each input vector is loaded once for all of them."""
    allowed = o.vectorize_gathers
    if not (allowed and o.vectorize and kind.kind == "elementwise" and root is not None
            and root.vector_gather in (("contiguous",) if allowed == "contiguous" else ("contiguous", "lanes"))
            and par and len(par) == len(kind.ranges)):
        return None
    per_thread = [1] * len(kind.ranges)
    per_thread[par[-1]] = or_default(o.elementwise_per_thread, 1)
    if root.window and len(par) >= 2:
        per_thread[par[-2]] = or_default(o.window_outputs_per_thread, 1)
    per, tile, threads = tiles.dividing_tiles(kind, par, per_thread, invocations, 4)
    if per[par[-1]] not in (2, 4):
        return None
    for d in par[:-3]:
        tile[d] = 1
    rows = per[par[-2]] if len(par) >= 2 else 1
    return Strategy(tuple(tile), tuple(threads), True, root_row_unroll=(par[-2], rows) if rows > 1 else (0, 1))
