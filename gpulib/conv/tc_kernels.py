"""16.5: the tensor-core convolution's kernels, versions 1-4 (implicit GEMM, fp16 in, fp32 sums), and
the kernels that convert NCHW operands to the layouts they read. Kernels only: what each version
does, its operands and its launcher are in gpulib/conv/tensorcore.py."""

from __future__ import annotations

from numba import cuda, float32, types, uint32

from gpulib.arrays import blocks, integer_arguments
from gpulib.env import sized
from gpulib.tensorcore import tma, wgmma, wmma
from gpulib.tensorcore.wmma import AB_DTYPE, AB_FRAGMENT, ACC_FRAGMENT, SHARED_ALIGN, TILE, warp_mma, warp_store

float16 = types.float16
BM = BN = 64
THREADS = 128


@wmma.kernel
def tc_conv_kernel(X, W_mat, b, Y, padding, stride, rows):
    a_tile = cuda.shared.array((BM, TILE), float16, alignment=SHARED_ALIGN)
    b_tile = cuda.shared.array((TILE, BN), float16, alignment=SHARED_ALIGN)
    y_tile = cuda.shared.array((BM, BN), float32, alignment=SHARED_ALIGN)
    a = cuda.local.array((2, AB_FRAGMENT), AB_DTYPE)
    bf = cuda.local.array((2, AB_FRAGMENT), AB_DTYPE)
    acc = cuda.local.array((4, ACC_FRAGMENT), float32)
    t = cuda.threadIdx.x
    warp = t // 32
    wy, wx = (warp // 2) * 32, (warp % 2) * 32
    row0, col0 = cuda.blockIdx.y * BM, cuda.blockIdx.x * BN  # filters, output pixels
    H, Wd = X.shape[2], X.shape[3]
    K, Ho, Wo = Y.shape[1], Y.shape[2], Y.shape[3]
    CRS = W_mat.shape[1]
    NP = Y.shape[0] * Ho * Wo
    for f in range(4):
        wmma.fill(acc[f], float32(0.0))
    for k0 in range(0, CRS, TILE):
        for e in range(t, BM * TILE, THREADS):
            r, c = e // TILE, e % TILE  # W_mat tile
            gi, gk = row0 + r, k0 + c
            a_tile[r, c] = W_mat[gi, gk] if gi < K and gk < CRS else float16(0.0)
            r, c = e // BN, e % BN  # X_col tile, gathered from X
            row, col = k0 + r, col0 + c
            v = float16(0.0)
            if row < CRS and col < NP:
                n = col // (Ho * Wo)
                p = col % (Ho * Wo)
                iy = (p // Wo) * stride - padding + rows[row, 1]
                ix = (p % Wo) * stride - padding + rows[row, 2]
                if 0 <= iy < H and 0 <= ix < Wd:
                    v = X[n, rows[row, 0], iy, ix]
            b_tile[r, c] = v
        cuda.syncthreads()
        warp_mma(a_tile, b_tile, a, bf, acc, wy, wx, 0)
        cuda.syncthreads()
    warp_store(y_tile, acc, wy, wx, 2, 2)
    cuda.syncthreads()
    for e in range(t, BM * BN, THREADS):  # shared fp32 tile → Y[n, k, y, x] + b[k]
        r, c = e // BN, e % BN
        k, col = row0 + r, col0 + c
        if k < K and col < NP:
            p = col % (Ho * Wo)
            Y[col // (Ho * Wo), k, p // Wo, p % Wo] = y_tile[r, c] + b[k]


V2_BM, V2_BN, V2_BK = 128, 64, 32  # output pixels x filters x (r, s, c) per step
V2_THREADS = 128  # 4 warps in 2x2, each 64 pixels x 32 filters (4x2 fragments)
X_LD, W_LD = V2_BK + 8, V2_BN + 8  # padded row lengths (fp16 values) of the shared X_col and W tiles


@cuda.jit(device=True)
def _issue_nhwc_tiles(a_tile, b_tile, X, Wt, pix_n, pix_y, pix_x, k0, col0, S, H, Wd, t):
    """Start the copies of the X_col tile (rows: this block's 128 output pixels; columns k0:+32
    of (r, s, c)) and of Wt[k0:+32, col0:+64]. Each thread copies 8 channels for 4 pixels, and
    2 chunks of W."""
    C = X.shape[1]
    RSC = Wt.shape[0]
    k = k0 + (t % 4) * 8  # this thread's 8 channels: one (r, s), channels c:c+8
    rs, c = k // C, k % C
    r, s = rs // S, rs % S
    for i in range(4):
        iy, ix = pix_y[i] + r, pix_x[i] + s
        inside = k < RSC and pix_n[i] >= 0 and 0 <= iy < H and 0 <= ix < Wd
        wmma.copy8_async(a_tile, t // 4 + 32 * i, (t % 4) * 8, X, (pix_n[i] * H + iy) * Wd + ix, c, inside)
    for i in range(2):
        e = t + i * V2_THREADS
        row, cc = e // 8, (e % 8) * 8
        wmma.copy8_async(b_tile, row, cc, Wt, k0 + row, col0 + cc, k0 + row < RSC and col0 + cc < Wt.shape[1])


# 173 registers per thread unbounded: 2 blocks (8 warps) per SM; capped at 168, 3 blocks fit and
# the H200 ran the 16.3 layer in 0.073 ms instead of 0.091 (at 128 it spills and slows again)
@wmma.kernel(max_registers=168)
def tc_conv_nhwc_kernel(X, Wt, bias_rows, Y, H, Wd, Ho, Wo, S, padding, stride):
    """X [N·H·W, C] (NHWC, fp16, C a multiple of 8), Wt [R·S·C, Kp] (rows in (r, s, c) order,
    fp16), bias_rows [16, ≥ Kp rounded up to 64] (every row the bias), Y [≥ N·H'·W', Kp] fp32,
    rows and Kp multiples of 16. Block (bx, by): output pixels 128·bx:+128, filters 64·by:+64."""
    a_tiles = cuda.shared.array((2, V2_BM, X_LD), float16, alignment=SHARED_ALIGN)
    b_tiles = cuda.shared.array((2, V2_BK, W_LD), float16, alignment=SHARED_ALIGN)
    a = cuda.local.array((4, AB_FRAGMENT), AB_DTYPE)
    bf = cuda.local.array((2, AB_FRAGMENT), AB_DTYPE)
    acc = cuda.local.array((8, ACC_FRAGMENT), float32)
    pix_n = cuda.local.array(4, types.int32)  # the 4 output pixels this thread gathers for
    pix_y = cuda.local.array(4, types.int32)  # (their window's top-left corner in X)
    pix_x = cuda.local.array(4, types.int32)
    t = cuda.threadIdx.x
    warp = t // 32
    wy, wx = (warp // 2) * 64, (warp % 2) * 32
    row0, col0 = cuda.blockIdx.x * V2_BM, cuda.blockIdx.y * V2_BN
    npix = (X.shape[0] // (H * Wd)) * Ho * Wo
    for i in range(4):
        m = row0 + t // 4 + 32 * i
        p = m % (Ho * Wo)
        pix_n[i] = m // (Ho * Wo) if m < npix else -1
        pix_y[i] = (p // Wo) * stride - padding
        pix_x[i] = (p % Wo) * stride - padding
    for f in range(8):  # D = A·B + C with C = the bias
        wmma.load_c(acc[f], bias_rows, 0, col0 + wx + 16 * (f % 2))
    steps = (Wt.shape[0] + V2_BK - 1) // V2_BK
    _issue_nhwc_tiles(a_tiles[0], b_tiles[0], X, Wt, pix_n, pix_y, pix_x, 0, col0, S, H, Wd, t)
    wmma.async_commit()
    for step in range(steps):
        if step + 1 < steps:
            _issue_nhwc_tiles(a_tiles[(step + 1) % 2], b_tiles[(step + 1) % 2], X, Wt, pix_n, pix_y, pix_x,
                              (step + 1) * V2_BK, col0, S, H, Wd, t)
            wmma.async_commit()
            wmma.async_wait_one()
        else:
            wmma.async_wait_all()
        cuda.syncthreads()
        for kk in range(0, V2_BK, TILE):
            warp_mma(a_tiles[step % 2], b_tiles[step % 2], a, bf, acc, wy, wx, kk)
        cuda.syncthreads()
    warp_store(Y, acc, row0 + wy, col0 + wx, 4, 2)


V3_BM, V3_BN, V3_BK, V3_STAGES = 128, 64, 64, 4  # pixels x filters x (r, s, c); buffers in the ring
V3_THREADS = 2 * wgmma.WARPGROUP
V3_ACC = V3_BN // 2  # each thread's accumulators (64 x 64 per warpgroup)
V3_A_BYTES = V3_BM * V3_BK * 2
V3_STAGE_BYTES = V3_A_BYTES + V3_BN * V3_BK * 2
V3_SHARED = V3_STAGES * V3_STAGE_BYTES + wgmma.ATOM_BYTES
_multiply64 = wgmma.MULTIPLY_TILE["fp16", V3_BN]  # a 64-deep step: 64 pixels x 64 filters per warpgroup


@cuda.jit(device=True)
def _issue_wgmma_tiles(smem, stage, X, Wk, pix_corner, pix_y, pix_x, tap, col0, Wd, H, t):
    """Start the copies of one 64-deep step's X_col tile (this block's 128 pixels) and Wk's tile
    into buffer ``stage``, each 16-byte chunk at its swizzled place: 4 chunks of X (8 channels of
    one input pixel each) and 2 of Wk per thread. ``tap`` = (k, r, s, c) of this thread's chunk
    in the step: its column of X_col and the filter tap and channels that column is, kept up to
    date by ``_next_tap`` (no division per step). ``pix_corner`` is each pixel's window corner
    as a row of X (n·H + y0)·W + x0, so the tap's row is pix_corner + r·W + s."""
    k, r, s, c = tap[0], tap[1], tap[2], tap[3]
    chunk = t % 8
    live = k < Wk.shape[1]
    offset = r * Wd + s
    for i in range(4):
        row = t // 8 + 32 * i
        iy, ix = pix_y[i] + r, pix_x[i] + s
        inside = live and 0 <= iy < H and 0 <= ix < Wd
        wgmma.copy16_async(smem, stage + wgmma.swizzled_byte(row, chunk), X, pix_corner[i] + offset, c, inside)
    for i in range(2):
        row = t // 8 + 32 * i
        wgmma.copy16_async(smem, stage + V3_A_BYTES + wgmma.swizzled_byte(row, chunk), Wk, col0 + row, k,
                           live and col0 + row < Wk.shape[0])


@cuda.jit(device=True)
def _next_tap(tap, C, S):
    """Move (k, r, s, c) on by one step of 64 columns of X_col: channels first, then s, then r."""
    tap[0] += V3_BK
    tap[3] += V3_BK
    while tap[3] >= C:
        tap[3] -= C
        tap[2] += 1
        if tap[2] == S:
            tap[2] = 0
            tap[1] += 1


@cuda.jit(device=True)
def _bias_n64(acc, bias, col0):
    """Every accumulator starts as its column's bias (D = A·B + C, C = the bias row)."""
    _, c0 = wgmma.accumulator_corner(0, col0)
    for j in range(8):
        for h in range(2):
            col = c0 + 8 * j + h
            value = bias[col] if col < bias.shape[0] else float32(0.0)
            acc[4 * j + h] = value
            acc[4 * j + 2 + h] = value


@wgmma.kernel
def tc_conv_wgmma_kernel(X, Wk, bias, Y, H, Wd, Ho, Wo, S, padding, stride):
    """X [N·H·W, C] (NHWC, fp16, C a multiple of 8), Wk [K, R·S·C] (KRSC, fp16), bias [K] fp32,
    Y [N·H'·W', K] fp32. Block (bx, by): output pixels 128·bx:+128, filters 64·by:+64."""
    smem = cuda.shared.array(0, float16)
    base = 2 * wgmma.aligned_start(smem)
    acc = cuda.local.array(V3_ACC, float32)
    pix_corner = cuda.local.array(4, types.int64)  # the 4 output pixels this thread gathers for:
    pix_y = cuda.local.array(4, types.int32)  # their window's top-left corner, as a row of X and as (y, x)
    pix_x = cuda.local.array(4, types.int32)
    tap = cuda.local.array(4, types.int64)  # (k, r, s, c) of this thread's next chunk to copy
    t = cuda.threadIdx.x
    group = t // wgmma.WARPGROUP
    row0, col0 = cuda.blockIdx.x * V3_BM, cuda.blockIdx.y * V3_BN
    npix = Y.shape[0]
    C = X.shape[1]
    for i in range(4):
        m = row0 + t // 8 + 32 * i
        p = m % (Ho * Wo)
        pix_y[i] = (p // Wo) * stride - padding if m < npix else -(1 << 20)  # past the last pixel: never inside
        pix_x[i] = (p % Wo) * stride - padding
        pix_corner[i] = ((m // (Ho * Wo)) * H + pix_y[i]) * Wd + pix_x[i]
    tap[0] = 8 * (t % 8)
    tap[3] = tap[0] % C
    tap[2] = (tap[0] // C) % S
    tap[1] = (tap[0] // C) // S
    steps = (Wk.shape[1] + V3_BK - 1) // V3_BK
    for s in range(V3_STAGES - 2):
        if s < steps:
            _issue_wgmma_tiles(smem, base + s * V3_STAGE_BYTES, X, Wk, pix_corner, pix_y, pix_x, tap, col0, Wd, H, t)
            _next_tap(tap, C, S)
        wgmma.async_commit()
    _bias_n64(acc, bias, col0)
    for step in range(steps):
        wgmma.async_wait_one()
        wgmma.fence_async_proxy()
        cuda.syncthreads()
        ahead = step + V3_STAGES - 2
        if ahead < steps:
            _issue_wgmma_tiles(smem, base + ahead % V3_STAGES * V3_STAGE_BYTES, X, Wk, pix_corner, pix_y, pix_x, tap,
                               col0, Wd, H, t)
            _next_tap(tap, C, S)
        wgmma.async_commit()
        stage = base + step % V3_STAGES * V3_STAGE_BYTES
        wgmma.fence()
        _multiply64(acc, smem, stage + group * wgmma.M_TILE * 128, stage + V3_A_BYTES, 1)
        wgmma.commit()
        wgmma.wait_one()
    wgmma.wait_all()
    wgmma.store_n64(Y, row0 + wgmma.M_TILE * group, col0, acc)


V4_STAGES = 4  # conv v4: v3's tile and ring, the boxes brought by TMA
V4_SHARED = V4_STAGES * V3_STAGE_BYTES + wgmma.ATOM_BYTES
V4_PIXEL_TILES = (8, 16, 32, 64, 128)  # widths of a block's patch of output pixels (height 128 / width)


@integer_arguments(Ho=1, Wo=1)
def pixel_tile(Ho: int, Wo: int) -> tuple[int, int]:
    """(height, width) of the patch of 128 output pixels a conv v4 block owns: of the widths in
    V4_PIXEL_TILES, the one that leaves the fewest patch pixels outside the image (ties: the wider)."""
    def wasted(w):
        h = 128 // w
        return blocks(Ho, h) * h * blocks(Wo, w) * w - Ho * Wo
    width = min(V4_PIXEL_TILES, key=lambda w: (wasted(w), -w))
    return 128 // width, width


@integer_arguments(Ho=1, Wo=1, R=1)
def halo_tile(Ho: int, Wo: int, R: int) -> tuple[int, int]:
    """(height, width) of conv v6's patch of 128 output pixels: of the widths in V4_PIXEL_TILES,
    the one whose boxes (the patch and the R - 1 rows below it, per filter column) bring the
    fewest pixels from L2 for the whole image (ties: the wider). A tall, narrow patch shares
    more of its rows between taps: for 56 x 56 and R = 3, 8 wide and 16 tall."""
    def loaded(w):
        h = 128 // w
        return blocks(Ho, h) * blocks(Wo, w) * (h + R - 1) * w
    width = min(V4_PIXEL_TILES, key=lambda w: (loaded(w), -w))
    return 128 // width, width


@cuda.jit(device=True)
def _store_patch(Y, acc, n, y0, x0, width, Ho, Wo, col0, group):
    """This thread's 32 results: rows of the block's 128-pixel patch (row i is pixel (y0 + i //
    width, x0 + i % width) of image n) into Y [N·H'·W', K], skipping pixels outside the image and
    filters past K."""
    i0, c0 = wgmma.accumulator_corner(wgmma.M_TILE * group, col0)  # row i0 of the patch, filter c0
    for h in range(2):
        i = i0 + 8 * h
        y, x = y0 + i // width, x0 + i % width
        if y < Ho and x < Wo:
            row = (n * Ho + y) * Wo + x
            for j in range(8):
                c = c0 + 8 * j
                if c < Y.shape[1]:
                    Y[row, c] = acc[4 * j + 2 * h]
                if c + 1 < Y.shape[1]:
                    Y[row, c + 1] = acc[4 * j + 2 * h + 1]


@cuda.jit(device=True)
def _request_step(smem, base, bars, x_map, w_map, step, chunks, S, n, y0, x0, col0, padding):
    """(One thread) step ``step`` = (tap r·S + s, channels c0:+64) into buffer step mod STAGES:
    announce the bytes, ask TMA for the 4-D box of X (the patch moved by the tap, padding
    included: rows and columns before the image or past it arrive as zeros) and the 3-D box of
    the filters."""
    tap, c0 = step // chunks, (step % chunks) * V3_BK
    s = step % V4_STAGES
    stage = base + s * V3_STAGE_BYTES
    tma.expect(bars, s, V3_STAGE_BYTES)
    tma.load4(smem, stage, x_map, n, y0 + tap // S - padding, x0 + tap % S - padding, c0, bars, s)
    tma.load3(smem, stage + V3_A_BYTES, w_map, col0, tap, c0, bars, s)


@tma.kernel
def tc_conv_tma_kernel(x_map, w_map, bias, Y, C, Ho, Wo, S, taps, padding, width, patches_x, patches):
    """Maps: X [N, H, W, C] boxes [1, 128 / width, width, 64] and Wk [K, R·S, C] boxes [64, 1, 64]
    (fp16, C a multiple of 8); bias [K] fp32; Y [N·H'·W', K] fp32. Block (bx, by): patch bx of
    the ``patches`` per image (row-major, ``patches_x`` across), filters 64·by:+64."""
    smem = cuda.shared.array(0, float16)
    bars = cuda.shared.array(V4_STAGES, types.uint64)
    base = 2 * wgmma.aligned_start(smem)
    acc = cuda.local.array(V3_ACC, float32)
    t = cuda.threadIdx.x
    group = t // wgmma.WARPGROUP
    n, patch = cuda.blockIdx.x // patches, cuda.blockIdx.x % patches
    y0, x0 = (patch // patches_x) * (128 // width), (patch % patches_x) * width
    col0 = cuda.blockIdx.y * V3_BN
    chunks = (C + V3_BK - 1) // V3_BK
    steps = taps * chunks
    if t == 0:
        for s in range(V4_STAGES):
            tma.init(bars, s, 1)
        tma.acquire(x_map)  # the maps were copied from the host: fence before TMA reads them
        tma.acquire(w_map)
    tma.fence_init()
    cuda.syncthreads()
    if t == 0:
        for step in range(min(V4_STAGES - 1, steps)):
            _request_step(smem, base, bars, x_map, w_map, step, chunks, S, n, y0, x0, col0, padding)
    _bias_n64(acc, bias, col0)
    for step in range(steps):
        s = step % V4_STAGES
        tma.wait(bars, s, (step // V4_STAGES) % 2)
        wgmma.fence()
        stage = base + s * V3_STAGE_BYTES
        _multiply64(acc, smem, stage + group * wgmma.M_TILE * 128, stage + V3_A_BYTES, 1)
        wgmma.commit()
        wgmma.wait_one()
        cuda.syncthreads()  # every warpgroup is done with step - 1: its buffer may be refilled
        if t == 0 and step + V4_STAGES - 1 < steps:
            _request_step(smem, base, bars, x_map, w_map, step + V4_STAGES - 1, chunks, S, n, y0, x0, col0, padding)
    wgmma.wait_all()
    _store_patch(Y, acc, n, y0, x0, width, Ho, Wo, col0, group)


V5_STAGES = 6  # conv v5: a ring of X boxes only (16 KiB each); the filters stay in shared memory
V5_BARRIERS = V5_STAGES + 1  # the ring's barriers, then the filters' (a constant: Numba sizes shared arrays by one)
V5_FILTER_BOX_BYTES = V3_BN * V3_BK * 2  # one (tap, 64 channels) box of 64 filters: 8 KiB
V5_MAX_FILTER_BOXES = 12  # taps x channel chunks that stay resident (96 KiB: a 3x3 layer of C ≤ 64, or 1x1 to 768)
V5_RING_BYTES = V5_STAGES * V3_A_BYTES


@cuda.jit(device=True)
def _tile_origin(q, patches, patches_x, height, width):
    """(n, y0, x0) of height x width patch q of all N·patches (``patches`` per image, ``patches_x`` across)."""
    patch = q % patches
    return q // patches, (patch // patches_x) * height, (patch % patches_x) * width


@cuda.jit(device=True)
def _patch_origin(q, patches, patches_x, width):
    """(n, y0, x0) of 128-pixel patch q of all N·patches (``patches`` per image, ``patches_x`` across)."""
    return _tile_origin(q, patches, patches_x, 128 // width, width)


@cuda.jit(device=True)
def _request_x(smem, base, bars, x_map, f, at, chunks, S, taps, padding, width, patches, patches_x, first, stride_tiles):
    """(One thread) the f-th box of this block's stream into buffer f mod STAGES, then ``at`` moved
    on to the next: ``at`` = (patch of its own, tap, channel chunk, n, y0, x0) of box f. The box is
    the patch moved by the tap (zeros outside the image, the padding). Counters, not divisions
    of f: a 64-bit division by a run-time size costs hundreds of cycles, and the first warpgroup
    waits for this thread at its next wgmma."""
    s = f % V5_STAGES
    tap = at[1]
    tma.expect(bars, s, V3_A_BYTES)
    tma.load4(smem, base + s * V3_A_BYTES, x_map, at[3], at[4] + tap // S - padding, at[5] + tap % S - padding,
              at[2] * V3_BK, bars, s)
    at[2] += 1
    if at[2] == chunks:
        at[2] = 0
        at[1] += 1
        if at[1] == taps:  # the next patch: once per patch
            at[1] = 0
            at[0] += 1
            at[3], at[4], at[5] = _patch_origin(first + at[0] * stride_tiles, patches, patches_x, width)


def _patch_writer(staged: bool):
    """The persistent convs' way out for one patch's results: fp32 into Y by each thread
    (_store_patch), or (``staged``) fp16 packed into the box at byte ``out_byte`` and written by
    one TMA store at (n, y0, x0, col0) of Y, the pixels past the image left out by the copy engine."""
    _, stage_out = wgmma.EPILOGUE["fp16", V3_BN]

    @cuda.jit(device=True)
    def write_patch(smem, out_byte, y_map, Y, acc, n, y0, x0, width, Ho, Wo, col0, group, t):
        if staged:
            if t == 0:
                tma.store_wait_read()  # the previous patch's box has left the staged tile
            cuda.syncthreads()
            stage_out(smem, out_byte, wgmma.M_TILE * group, acc)
            wgmma.fence_async_proxy()
            cuda.syncthreads()
            if t == 0:
                tma.store4(smem, out_byte, y_map, n, y0, x0, col0)
                tma.store_commit()
        else:
            _store_patch(Y, acc, n, y0, x0, width, Ho, Wo, col0, group)

    return write_patch


def make_tc_conv_v5(out: str = "fp32"):
    """conv v5's kernel writing Y in fp32 (``out="fp32"``, each thread its values) or fp16
    (``"fp16"``, as cuDNN writes it: staged in shared memory as one [128 pixels, 64 filters] box
    of 16-bit words in the 128B swizzle, written by a TMA store that runs on while the next
    patch is multiplied)."""
    if out not in ("fp32", "fp16"):
        raise ValueError(f"out must be 'fp32' or 'fp16', not {out!r}")
    staged = out == "fp16"
    write_patch = _patch_writer(staged)

    @tma.kernel
    def tc_conv_persistent_kernel(x_map, w_map, y_map, bias, Y, C, Ho, Wo, S, taps, padding, width, patches_x,
                                  patches, cols):
        """conv v5: v4's boxes, persistent. Maps as v4's (X [N, H, W, C] boxes [1, 128 / width,
        width, 64], Wk [K, R·S, C] boxes [64, 1, 64]); bias [K] fp32; Y [N·H'·W', K] (fp32, or
        fp16 through ``y_map``, Y [N, H', W', K] in boxes [1, 128 / width, width, 64]; unread for
        fp32). Block b works for filters 64·(b mod cols):+64, whose taps x chunks boxes it loads
        once and keeps, and on the pixel patches b // cols, b // cols + gridDim.x / cols, ... of
        all N·patches, one stream of X boxes through a ring of V5_STAGES buffers running across
        its patches."""
        smem = cuda.shared.array(0, float16)
        bars = cuda.shared.array(V5_BARRIERS, types.uint64)  # the ring's, then the filters' (index V5_STAGES)
        base = 2 * wgmma.aligned_start(smem)
        filters = base + V5_RING_BYTES
        acc = cuda.local.array(V3_ACC, float32)
        t = cuda.threadIdx.x
        group = t // wgmma.WARPGROUP
        col0 = (cuda.blockIdx.x % cols) * V3_BN
        first, stride_tiles = cuda.blockIdx.x // cols, cuda.gridDim.x // cols
        chunks = (C + V3_BK - 1) // V3_BK
        steps = taps * chunks
        tiles = patches * (Y.shape[0] // (Ho * Wo))  # N images of ``patches`` each
        mine = max(tiles - first + stride_tiles - 1, 0) // stride_tiles
        total = mine * steps
        if t == 0:
            for s in range(V5_BARRIERS):
                tma.init(bars, s, 1)
            tma.acquire(x_map)
            tma.acquire(w_map)
            if staged:
                tma.acquire(y_map)
        tma.fence_init()
        cuda.syncthreads()
        at = cuda.local.array(6, types.int64)  # (thread 0) where its next box is
        at[0], at[1], at[2] = 0, 0, 0
        at[3], at[4], at[5] = _patch_origin(first, patches, patches_x, width)
        if t == 0:
            tma.expect(bars, V5_STAGES, steps * V5_FILTER_BOX_BYTES)  # every filter box on one barrier
            for j in range(steps):
                tma.load3(smem, filters + j * V5_FILTER_BOX_BYTES, w_map, col0, j // chunks, (j % chunks) * V3_BK,
                          bars, V5_STAGES)
            for f in range(min(V5_STAGES - 1, total)):
                _request_x(smem, base, bars, x_map, f, at, chunks, S, taps, padding, width, patches, patches_x, first,
                           stride_tiles)
        tma.wait(bars, V5_STAGES, 0)  # the filters have landed
        for i in range(mine):  # (two loops, the results written after the inner one: written inside a branch of
            n, y0, x0 = _patch_origin(first + i * stride_tiles, patches, patches_x, width)  # one loop, ptxas
            _bias_n64(acc, bias, col0)  # serializes every wgmma, C7518)
            for step in range(steps):
                f = i * steps + step
                s = f % V5_STAGES
                tma.wait(bars, s, (f // V5_STAGES) % 2)
                wgmma.fence()
                _multiply64(acc, smem, base + s * V3_A_BYTES + group * wgmma.M_TILE * 128,
                            filters + step * V5_FILTER_BOX_BYTES, 1)
                wgmma.commit()
                wgmma.wait_one()
                cuda.syncthreads()  # every warpgroup is done with box f - 1: its buffer may be refilled
                if t == 0 and f + V5_STAGES - 1 < total:
                    _request_x(smem, base, bars, x_map, f + V5_STAGES - 1, at, chunks, S, taps, padding, width, patches,
                               patches_x, first, stride_tiles)
            wgmma.wait_all()
            write_patch(smem, filters + steps * V5_FILTER_BOX_BYTES, y_map, Y, acc, n, y0, x0, width, Ho, Wo, col0,
                        group, t)
        if staged and t == 0:
            tma.store_wait()

    return tc_conv_persistent_kernel


tc_conv_persistent_kernel = make_tc_conv_v5("fp32")
tc_conv_persistent16_kernel = make_tc_conv_v5("fp16")


V6_MAX_STAGES = 6  # conv v6: a ring of up to 6 halo boxes (as many as shared memory holds beside the filters)
V6_BARRIERS = V6_MAX_STAGES + 1  # the ring's, then the filters' (index V6_MAX_STAGES)


@cuda.jit(device=True)
def _request_halo(smem, ring, box_bytes, bars, s, x_map, at, chunks, S, padding, patches, patches_x, width, first,
                  stride_tiles):
    """(One thread) the next halo box of this block's stream into ring buffer ``s``, then ``at``
    moved on: ``at`` = (patch of its own, filter column dx, channel chunk, n, y0, x0). The box is
    the patch's rows and the R - 1 below them, moved dx columns: every tap (dy, dx) of the
    filter reads its pixels from it, dy rows further in (zeros outside the image: the padding)."""
    tma.expect(bars, s, box_bytes)
    tma.load4(smem, ring + s * box_bytes, x_map, at[3], at[4] - padding, at[5] + at[1] - padding, at[2] * V3_BK, bars, s)
    at[2] += 1
    if at[2] == chunks:
        at[2] = 0
        at[1] += 1
        if at[1] == S:  # the next patch: once per patch
            at[1] = 0
            at[0] += 1
            at[3], at[4], at[5] = _patch_origin(first + at[0] * stride_tiles, patches, patches_x, width)


def make_tc_conv_v6(out: str = "fp32"):
    """conv v6's kernel (Y in fp32, or fp16 through a TMA store as v5 writes it): v5 with one
    box of X per filter column and channel chunk instead of one per tap. The box holds the
    patch and the R - 1 pixel rows below it, so the R taps of that filter column all read
    their 128 pixels out of it: tap (dy, dx) is the box's pixels from row dy on (dy·width
    pixels in, a whole number of 8-row swizzle atoms as width is a multiple of 8). For a 3x3
    filter a patch costs 3 boxes instead of 9: a third of the bytes from L2."""
    if out not in ("fp32", "fp16"):
        raise ValueError(f"out must be 'fp32' or 'fp16', not {out!r}")
    staged = out == "fp16"
    write_patch = _patch_writer(staged)

    @tma.kernel
    def tc_conv_halo_kernel(x_map, w_map, y_map, bias, Y, C, Ho, Wo, R, S, padding, width, patches_x, patches, cols,
                            box_bytes, stages):
        """conv v6. Maps: X [N, H, W, C] in boxes [1, 128 / width + R - 1, width, 64] (``box_bytes``
        each, ``stages`` of them in the ring), Wk [K, R·S, C] boxes [64, 1, 64], Y as v5's. Block b:
        filters 64·(b mod cols):+64 (kept in shared memory, after the ring), pixel patches
        b // cols, b // cols + gridDim.x / cols, ... of all N·patches."""
        smem = cuda.shared.array(0, float16)
        bars = cuda.shared.array(V6_BARRIERS, types.uint64)
        ring = 2 * wgmma.aligned_start(smem)
        filters = ring + stages * box_bytes
        acc = cuda.local.array(V3_ACC, float32)
        t = cuda.threadIdx.x
        group = t // wgmma.WARPGROUP
        col0 = (cuda.blockIdx.x % cols) * V3_BN
        first, stride_tiles = cuda.blockIdx.x // cols, cuda.gridDim.x // cols
        chunks = (C + V3_BK - 1) // V3_BK
        boxes = S * chunks  # per patch
        filter_boxes = R * boxes
        tiles = patches * (Y.shape[0] // (Ho * Wo))
        mine = max(tiles - first + stride_tiles - 1, 0) // stride_tiles
        total = mine * boxes
        if t == 0:
            for s in range(V6_BARRIERS):
                tma.init(bars, s, 1)
            tma.acquire(x_map)
            tma.acquire(w_map)
            if staged:
                tma.acquire(y_map)
        tma.fence_init()
        cuda.syncthreads()
        at = cuda.local.array(6, types.int64)  # (thread 0) where its next box is
        at[0], at[1], at[2] = 0, 0, 0
        at[3], at[4], at[5] = _patch_origin(first, patches, patches_x, width)
        if t == 0:
            tma.expect(bars, V6_MAX_STAGES, filter_boxes * V5_FILTER_BOX_BYTES)
            for j in range(filter_boxes):  # box j: tap j // chunks (= dy·S + dx), channels (j mod chunks)·64
                tma.load3(smem, filters + j * V5_FILTER_BOX_BYTES, w_map, col0, j // chunks, (j % chunks) * V3_BK,
                          bars, V6_MAX_STAGES)
            for f in range(min(stages - 1, total)):
                _request_halo(smem, ring, box_bytes, bars, f, x_map, at, chunks, S, padding, patches, patches_x,
                              width, first, stride_tiles)
        s_next = min(stages - 1, total) % stages  # (thread 0) the buffer of its next request
        tma.wait(bars, V6_MAX_STAGES, 0)  # the filters have landed
        s, phase = 0, 0
        f = 0
        for i in range(mine):
            n, y0, x0 = _patch_origin(first + i * stride_tiles, patches, patches_x, width)
            _bias_n64(acc, bias, col0)
            for dx in range(S):
                for chunk in range(chunks):
                    tma.wait(bars, s, phase)
                    wgmma.fence()
                    pixels = ring + s * box_bytes + group * wgmma.M_TILE * 128  # this warpgroup's 64 rows
                    for dy in range(R):
                        _multiply64(acc, smem, pixels + dy * width * 128,
                                    filters + ((dy * S + dx) * chunks + chunk) * V5_FILTER_BOX_BYTES, 1)
                    wgmma.commit()
                    wgmma.wait_one()  # the multiplies of the box before are done
                    cuda.syncthreads()  # ... in both warpgroups: its buffer may be refilled
                    if t == 0 and f + stages - 1 < total:
                        _request_halo(smem, ring, box_bytes, bars, s_next, x_map, at, chunks, S, padding, patches,
                                      patches_x, width, first, stride_tiles)
                        s_next += 1
                        if s_next == stages:
                            s_next = 0
                    f += 1
                    s += 1
                    if s == stages:
                        s, phase = 0, phase ^ 1
            wgmma.wait_all()
            write_patch(smem, filters + filter_boxes * V5_FILTER_BOX_BYTES, y_map, Y, acc, n, y0, x0, width, Ho, Wo,
                        col0, group, t)
        if staged and t == 0:
            tma.store_wait()

    return tc_conv_halo_kernel


tc_conv_halo_kernel = make_tc_conv_v6("fp32")
tc_conv_halo16_kernel = make_tc_conv_v6("fp16")


# conv v7: filters as the multiply's A (64 of them), a patch's pixels as its B (N = the patch's
# pixels), a producer warpgroup and two multiplying warpgroups that each own whole patches
V7_TILES = ((8, 8), (14, 8), (16, 8), (8, 16))  # (height, width): N = 64, 112, 128, 128 pixels
V7_MAX_STAGES = 16  # a ring as deep as shared memory allows beside the filters (15 boxes of 10 x 8 pixels)
V7_THREADS = 3 * wgmma.WARPGROUP
V7_REGISTERS = (168, 40, 232)  # at launch (384 threads in 65536), then the producer's and the multipliers'


@integer_arguments(Ho=1, Wo=1, R=1)
def v7_tile(Ho: int, Wo: int, R: int) -> tuple[int, int]:
    """(height, width) of conv v7's patch: of V7_TILES, the one that computes the fewest pixels
    outside the image, then the one with the smallest box (a deeper ring of boxes in flight:
    15 for 8 x 8 on the 16.3 layer, 9 for 14 x 8), then the larger N. For 56 x 56 and R = 3:
    8 x 8, which tiles the image exactly (v6's 16 x 8 leaves an eighth of its rows outside);
    16.5b's table has 14 x 8 as fast, 16 x 8 and 8 x 16 slower."""
    def cost(tile):
        h, w = tile
        patches = blocks(Ho, h) * blocks(Wo, w)
        return patches * h * w, (h + R - 1) * w, -h * w
    return min(V7_TILES, key=cost)


@cuda.jit(device=True)
def next_position(s, phase, steps, stages):
    """The ring position (buffer, parity) ``steps`` boxes after (s, phase): a count, no division
    in the loop that feeds the tensor cores."""
    s += steps
    while s >= stages:
        s -= stages
        phase ^= 1
    return s, phase


def make_tc_conv_v7(height: int, width: int, out: str = "fp32"):
    """conv v7's kernel for patches of height x width pixels (Y in fp32 or fp16). v6's halo boxes
    with the operands the other way round: the 64 filters are wgmma's A (M = 64) and the patch's
    pixels its B (N = height·width, up to 128 here), so one multiply does as much as v6's two
    warpgroups do together and reads A once for all of them. Warpgroup 0 (one thread) loads the
    filters once and then every halo box of the block's patches into a ring, waiting only for a
    buffer to be given back; warpgroups 1 and 2 take turns at the patches (1 the even ones, 2 the
    odd ones), so that one writes its results while the other multiplies. Each thread holds
    results for two filters and N/8 pixel pairs: it writes them straight to Y [N·H'·W', K],
    where a warp's stores cover 4 pixels x 8 neighbouring filters (32-byte runs in fp32)."""
    if out not in ("fp32", "fp16"):
        raise ValueError(f"out must be 'fp32' or 'fp16', not {out!r}")
    if (height, width) not in V7_TILES:
        raise ValueError(f"(height, width) must be one of {V7_TILES}, not {(height, width)!r}")
    rounded = float16 if out == "fp16" else float32
    pixels = height * width
    multiply = wgmma.MULTIPLY_TILE["fp16", pixels]
    groups, acc_size = pixels // 8, pixels // 2

    @cuda.jit(device=True)
    def start(acc, b0, b8):
        """The accumulators = the bias of this thread's two filters, k0 (b0) and k0 + 8 (b8)."""
        for j in range(groups):
            acc[4 * j] = b0
            acc[4 * j + 1] = b0
            acc[4 * j + 2] = b8
            acc[4 * j + 3] = b8

    @cuda.jit(device=True)
    def write(Y, acc, n, y0, x0, Ho, Wo, k0, q0):
        """This thread's results: filters k0 and k0 + 8 at patch pixels 8j + q0 and 8j + q0 + 1
        (pixel p at (y0 + p // width, x0 + p % width) of image n), skipping what lies outside.
        A patch wholly inside the image and the filters (all of them on the 16.3 layer) is
        written without a test: pixel 8j + q0 + e lies at row 8j // width, column 8j % width +
        q0 + e of the patch (width is a multiple of 8), offsets the compiler works out."""
        if y0 + height <= Ho and x0 + width <= Wo and k0 + 8 < Y.shape[1]:
            corner = (n * Ho + y0) * Wo + x0 + q0
            for j in range(groups):
                row = corner + (8 * j // width) * Wo + 8 * j % width
                for e in range(2):
                    for i in range(2):
                        Y[uint32(row + e), uint32(k0 + 8 * i)] = rounded(acc[4 * j + 2 * i + e])  # unsigned: no wrap
            return
        for j in range(groups):
            for e in range(2):
                p = 8 * j + q0 + e
                y, x = y0 + p // width, x0 + p % width
                if y < Ho and x < Wo:
                    row = (n * Ho + y) * Wo + x
                    for i in range(2):
                        k = k0 + 8 * i
                        if k < Y.shape[1]:
                            Y[row, k] = rounded(acc[4 * j + 2 * i + e])

    release, claim = wgmma.RELEASE[V7_REGISTERS[1]], wgmma.CLAIM[V7_REGISTERS[2]]

    @tma.kernel(max_registers=V7_REGISTERS[0])
    def tc_conv_v7_kernel(x_map, w_map, bias, Y, C, Ho, Wo, R, S, padding, patches_x, patches, cols, box_bytes,
                          stages):
        """conv v7. Maps: X [N, H, W, C] in boxes [1, height + R - 1, width, 64] (``box_bytes`` each,
        ``stages`` of them in the ring), Wk [K, R·S, C] in boxes [64, 1, 64]. Block b: filters
        64·(b mod cols):+64 (kept in shared memory after the ring), patches b // cols, b // cols
        + gridDim.x / cols, ... of all N·patches; its i-th patch's boxes are ring positions
        i·S·chunks onwards, multiplied by warpgroup 1 + i mod 2."""
        smem = cuda.shared.array(0, float16)
        full = cuda.shared.array(V7_MAX_STAGES, types.uint64)
        empty = cuda.shared.array(V7_MAX_STAGES, types.uint64)
        loaded = cuda.shared.array(1, types.uint64)  # the filters
        ring = 2 * wgmma.aligned_start(smem)
        filters = ring + stages * box_bytes
        t = cuda.threadIdx.x
        role = t // wgmma.WARPGROUP
        col0 = (cuda.blockIdx.x % cols) * V3_BN
        first, stride_tiles = cuda.blockIdx.x // cols, cuda.gridDim.x // cols
        chunks = (C + V3_BK - 1) // V3_BK
        boxes = S * chunks  # per patch
        tiles = patches * (Y.shape[0] // (Ho * Wo))
        mine = max(tiles - first + stride_tiles - 1, 0) // stride_tiles
        if t == 0:
            for s in range(stages):
                tma.init(full, s, 1)  # the producer's expect; then the bytes
                tma.init(empty, s, wgmma.WARPGROUP)  # every thread of the warpgroup that multiplied it
            tma.init(loaded, 0, 1)
            tma.acquire(x_map)
            tma.acquire(w_map)
        tma.fence_init()
        cuda.syncthreads()  # the only block-wide barrier
        if role == 0:
            release()
            if t == 0:
                tma.expect(loaded, 0, R * boxes * V5_FILTER_BOX_BYTES)
                for j in range(R * boxes):  # box j: tap j // chunks (= dy·S + dx), channels (j mod chunks)·64
                    tma.load3(smem, filters + j * V5_FILTER_BOX_BYTES, w_map, col0, j // chunks,
                              (j % chunks) * V3_BK, loaded, 0)
                s, phase = 0, 0
                f = 0
                for i in range(mine):
                    n, y0, x0 = _tile_origin(first + i * stride_tiles, patches, patches_x, height, width)
                    for dx in range(S):
                        for chunk in range(chunks):
                            if f >= stages:  # the box that buffer held, f - stages, has been multiplied
                                tma.wait(empty, s, phase ^ 1)
                            tma.expect(full, s, box_bytes)
                            tma.load4(smem, ring + s * box_bytes, x_map, n, y0 - padding, x0 + dx - padding,
                                      chunk * V3_BK, full, s)
                            f += 1
                            s += 1
                            if s == stages:
                                s, phase = 0, phase ^ 1
        else:
            claim()
            lane = wgmma.thread_in_warpgroup()
            k0 = col0 + 16 * (lane // 32) + (lane % 32) // 4  # this thread's filters: k0 and k0 + 8
            q0 = 2 * (lane % 4)  # and its pixels: 8j + q0 and 8j + q0 + 1
            acc = cuda.local.array(acc_size, float32)
            # the bias of its two filters, read once (the same for every patch of the block)
            b0 = bias[k0] if k0 < bias.shape[0] else float32(0.0)
            b8 = bias[k0 + 8] if k0 + 8 < bias.shape[0] else float32(0.0)
            tma.wait(loaded, 0, 0)
            tap_bytes = S * chunks * V5_FILTER_BOX_BYTES  # the filter box of the tap one row further down
            s, phase = next_position(0, 0, (role - 1) * boxes, stages)  # its first patch's first box
            for i in range(role - 1, mine, 2):
                n, y0, x0 = _tile_origin(first + i * stride_tiles, patches, patches_x, height, width)
                start(acc, b0, b8)
                done = -1  # the buffer whose multiplies may still run
                column = filters  # the filter box of tap (0, dx), channel chunk: counted, not multiplied out
                for dx in range(S):
                    for chunk in range(chunks):
                        tma.wait(full, s, phase)
                        wgmma.fence()
                        a, b = column, ring + s * box_bytes
                        for dy in range(R):  # tap (dy, dx): the box's pixels from row dy on
                            multiply(acc, smem, a, b, 1)
                            a += tap_bytes
                            b += width * 128
                        wgmma.commit()
                        wgmma.wait_one()  # the box before is done with: its buffer goes back
                        if done >= 0:
                            tma.arrive(empty, done)
                        done = s
                        column += V5_FILTER_BOX_BYTES
                        s += 1
                        if s == stages:
                            s, phase = 0, phase ^ 1
                wgmma.wait_all()
                tma.arrive(empty, done)
                s, phase = next_position(s, phase, boxes, stages)  # past the other warpgroup's patch
                write(Y, acc, n, y0, x0, Ho, Wo, k0, q0)

    return tc_conv_v7_kernel


V7_KERNELS = {(tile, out): make_tc_conv_v7(*tile, out) for tile in V7_TILES for out in ("fp32", "fp16")}


@cuda.jit
def to_fp16_kernel(src, dst):
    """dst[i] = fp16(src[i]) on flat views: the operands of version 1."""
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] = float16(src[i])


# a layout change's block: 32 x 32 values by 32 x LAYOUT_ROWS threads (8 on a GPU: 4 values each; 1 on
# the simulator, whose cost is its threads that meet at the barrier: a 32-thread block is 10 times quicker)
LAYOUT_TILE, LAYOUT_ROWS = 32, sized(gpu=8, sim=1)
LAYOUT_SHARED = (LAYOUT_TILE, LAYOUT_TILE + 1)  # + 1: a column of the tile falls in 32 banks (a constant shape)


@cuda.jit
def nchw_to_nhwc16_kernel(X, Xn, HW):
    """Xn [N·H·W, C8] fp16 from X [N, C·H·W] (NCHW, flat per image; HW = H·W): Xn[n·H·W + p, c] = X[n, c·H·W
    + p], zeros in the padding channels c ≥ C. Block (bx, by, n) turns a 32-pixel x 32-channel
    tile through shared memory: it reads 32 neighbouring pixels of a channel (one 128-byte run)
    and writes 32 neighbouring channels of a pixel, so both sides move whole runs (a thread per
    element of Xn would read with a stride of H·W values). Grid (pixels / 32, C8 / 32, N), block (32, LAYOUT_ROWS)."""
    tile = cuda.shared.array(LAYOUT_SHARED, float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    p0, c0, n = cuda.blockIdx.x * LAYOUT_TILE, cuda.blockIdx.y * LAYOUT_TILE, cuda.blockIdx.z
    C8, C = Xn.shape[1], X.shape[1] // HW
    for i in range(ty, LAYOUT_TILE, LAYOUT_ROWS):
        c, p = c0 + i, p0 + tx
        tile[i, tx] = X[n, c * HW + p] if c < C and p < HW else float32(0.0)
    cuda.syncthreads()
    for i in range(ty, LAYOUT_TILE, LAYOUT_ROWS):
        p, c = p0 + i, c0 + tx
        if p < HW and c < C8:
            Xn[n * HW + p, c] = float16(tile[tx, i])


@cuda.jit
def filters_to_rsck16_kernel(W, Wt):
    """Wt [R·S·C8, K16] fp16 from W [K, C, R, S]: Wt[(r·S + s)·C8 + c, k] = W[k, c, r, s], zeros
    where c ≥ C or k ≥ K. One thread per element of Wt."""
    i = cuda.grid(1)
    rows, K16 = Wt.shape
    if i < rows * K16:
        K, C, R, S = W.shape
        C8 = rows // (R * S)
        k, row = i % K16, i // K16
        c, rs = row % C8, row // C8
        r, s = rs // S, rs % S
        Wt[row, k] = float16(W[k, c, r, s]) if c < C and k < K else float16(0.0)


@cuda.jit
def bias_rows_kernel(b, bias_rows):
    """bias_rows [16, K64]: b repeated in 16 rows, zeros beyond K (the accumulators' start)."""
    i = cuda.grid(1)
    if i < bias_rows.size:
        k = i % bias_rows.shape[1]
        bias_rows[i // bias_rows.shape[1], k] = b[k] if k < b.size else float32(0.0)


@cuda.jit
def nhwc_rows_to_nchw_kernel(Yn, Y, HW):
    """Y [N, K·H'·W'] (NCHW, flat per image; HW = H'·W') from Yn [rows ≥ N·H'·W', ≥ K]: Y[n, k·H'·W' + p] =
    Yn[n·H'·W' + p, k], the padding rows and filters dropped. nchw_to_nhwc16_kernel's tile the
    other way: 32 filters of a pixel read, 32 pixels of a filter written. Grid (pixels / 32,
    K / 32, N), block (32, LAYOUT_ROWS)."""
    tile = cuda.shared.array(LAYOUT_SHARED, float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    p0, k0, n = cuda.blockIdx.x * LAYOUT_TILE, cuda.blockIdx.y * LAYOUT_TILE, cuda.blockIdx.z
    K = Y.shape[1] // HW
    for i in range(ty, LAYOUT_TILE, LAYOUT_ROWS):
        p, k = p0 + i, k0 + tx
        if p < HW and k < K:
            tile[i, tx] = Yn[n * HW + p, k]
    cuda.syncthreads()
    for i in range(ty, LAYOUT_TILE, LAYOUT_ROWS):
        k, p = k0 + i, p0 + tx
        if k < K and p < HW:
            Y[n, k * HW + p] = tile[tx, i]


@cuda.jit
def filters_to_krsc16_kernel(W, Wk):
    """Wk[k, (r·S + s)·C8 + c] = fp16(W[k, c, r, s]); zeros for the padding channels c ≥ C."""
    i = cuda.grid(1)
    if i < Wk.size:
        K, C, R, S = W.shape
        C8 = Wk.shape[1] // (R * S)
        k, rest = i // Wk.shape[1], i % Wk.shape[1]
        rs, c = rest // C8, rest % C8
        Wk[k, rest] = float16(W[k, c, rs // S, rs % S]) if c < C else float16(0.0)


# version 2 without its register cap: 16.5 measures what the cap (more blocks per SM) buys
tc_conv_nhwc_uncapped_kernel = wmma.kernel(tc_conv_nhwc_kernel.py_func)
