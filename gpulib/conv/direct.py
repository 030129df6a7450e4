"""16.3: the direct convolution kernel, as a ladder of versions.

    version 1  one thread per output element Y[n, k, y, x], the chapter's mapping
    version 2  shared-memory tiling: a TILE×TILE output tile for ``channels_per_block`` output
               channels, each input tile (with its halo) and the group's filters loaded once

Layouts: X [N, C, H, W], W [K, C, R, S], b [K], Y [N, K, H', W'], all float32, C-contiguous.
``conv2d_direct`` checks its inputs and launches one of them (``default_version``: 2 on a GPU,
1 on the simulator); version 2 is compiled once per (R, S, stride, channels_per_block). 16.3's
notebook explains and measures both. What must stay true: every output element written once.
"""

from __future__ import annotations

from functools import lru_cache

from numba import cuda, float32

from gpulib.arrays import MAX_GRID_Z, block_edge, blocks, output, require_int, to_device
from gpulib.env import sized
from gpulib.shapes import bias_or_zeros, check_conv_inputs

TILE = 16  # output tile edge of version 2 (a 16×16 thread block)
CHANNELS_PER_BLOCK = 16  # version 2's default group (fastest measured: benchmarks/results/)
VERSIONS = ("v1", "v2")


# ------------------------------------------------------------------ version 1
@cuda.jit
def conv2d_v1_kernel(X, W, b, Y, padding, stride):
    """One thread per output element: Y[n, k, y, x] = b[k] + Σ_{c,r,s} W[k,c,r,s]·X[n,c,iy,ix]."""
    x = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    y = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    K = Y.shape[1]
    H, Wd = X.shape[2], X.shape[3]
    for plane in range(cuda.blockIdx.z, Y.shape[0] * K, cuda.gridDim.z):  # (image, channel) planes
        n = plane // K
        k = plane % K
        if x < Y.shape[3] and y < Y.shape[2]:
            acc = b[k]
            for c in range(X.shape[1]):
                for r in range(W.shape[2]):
                    iy = y * stride + r - padding
                    if 0 <= iy < H:
                        for s in range(W.shape[3]):
                            ix = x * stride + s - padding
                            if 0 <= ix < Wd:  # outside the image is the zero padding
                                acc += W[k, c, r, s] * X[n, c, iy, ix]
            Y[n, k, y, x] = acc


# ------------------------------------------------------------------ version 2
@lru_cache(maxsize=None)
def conv2d_v2_kernel(R: int, S: int, stride: int, KB: int, TILE: int = TILE,
                     LOAD_BARRIER: bool = True, REUSE_BARRIER: bool = True):
    """Version 2 compiled for an R×S filter, a stride, KB output channels per block and a
    TILE×TILE output tile (launch it with TILE×TILE threads per block).

    LOAD_BARRIER / REUSE_BARRIER=False compile it without one of its two barriers: the
    mistakes 16.3 shows the tracer catching (the compiler drops the constant ``if``)."""
    IN_H = (TILE - 1) * stride + R  # input rows a TILE×TILE output tile needs, halo included
    IN_W = (TILE - 1) * stride + S

    @cuda.jit
    def conv2d_v2(X, W, b, Y, padding):
        tile = cuda.shared.array((IN_H, IN_W), float32)
        filt = cuda.shared.array((KB, R, S), float32)
        acc = cuda.local.array(KB, float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        K = Y.shape[1]
        groups = (K + KB - 1) // KB
        for plane in range(cuda.blockIdx.z, Y.shape[0] * groups, cuda.gridDim.z):  # the whole block alike
            n = plane // groups
            k0 = (plane % groups) * KB
            y = cuda.blockIdx.y * TILE + ty
            x = cuda.blockIdx.x * TILE + tx
            row0 = cuda.blockIdx.y * TILE * stride - padding  # input row of tile[0, :]
            col0 = cuda.blockIdx.x * TILE * stride - padding
            H, Wd = X.shape[2], X.shape[3]
            for kk in range(KB):
                acc[kk] = float32(0.0)
            flat = ty * TILE + tx
            for c in range(X.shape[1]):
                # the whole block loads the input tile (zeros where it hangs over the edge) ...
                for i in range(ty, IN_H, TILE):
                    for j in range(tx, IN_W, TILE):
                        iy = row0 + i
                        ix = col0 + j
                        inside = 0 <= iy < H and 0 <= ix < Wd
                        tile[i, j] = X[n, c, iy, ix] if inside else float32(0.0)
                # ... and the KB filters of this channel, spread over the block's threads
                for e in range(flat, KB * R * S, TILE * TILE):
                    kk = e // (R * S)
                    r = (e // S) % R
                    s = e % S
                    filt[kk, r, s] = W[k0 + kk, c, r, s] if k0 + kk < K else float32(0.0)
                if LOAD_BARRIER:
                    cuda.syncthreads()  # all loads done before anyone reads the tile
                for r in range(R):
                    for s in range(S):
                        v = tile[ty * stride + r, tx * stride + s]  # one shared read, KB uses
                        for kk in range(KB):
                            acc[kk] += filt[kk, r, s] * v
                if REUSE_BARRIER:
                    cuda.syncthreads()  # all reads done before the next channel overwrites the tile
            if y < Y.shape[2] and x < Y.shape[3]:
                for kk in range(KB):
                    if k0 + kk < K:
                        Y[n, k0 + kk, y, x] = acc[kk] + b[k0 + kk]

    return conv2d_v2


# ------------------------------------------------------------------ wrapper
def default_version() -> str:
    """The version a caller gets without asking: version 2 (the fastest) on a GPU, version 1 on
    the simulator, where every barrier of version 2 costs the Python threads a rendezvous
    (3x slower there)."""
    return sized(gpu="v2", sim="v1")


def conv2d_direct(X, W, b=None, padding: int = 0, stride: int = 1, *, out=None, version: str | None = None,
                  channels_per_block: int = CHANNELS_PER_BLOCK, tile: int = TILE):
    """Direct convolution Y = conv(X, W) + b with one of the versions above (``default_version``
    when None); returns Y on the device."""
    version = version or default_version()
    if version not in VERSIONS:
        raise ValueError(f"unknown version {version!r}; choose one of {VERSIONS}")
    channels_per_block, tile = require_int(channels_per_block, "channels_per_block", 1), require_int(tile, "tile", 1)
    if not channels_per_block <= 32:
        raise ValueError(f"channels_per_block must be an integer from 1 to 32, not {channels_per_block}")
    if not tile <= 32:
        raise ValueError(f"tile must be an integer from 1 to 32 (tile² threads per block), not {tile}")
    shape = check_conv_inputs(X, W, b, padding, stride)
    N, K, Ho, Wo = shape
    R, S = W.shape[2], W.shape[3]
    Y = output(out, shape, "out")
    X, W, b = to_device(X), to_device(W), bias_or_zeros(b, K)
    if version == "v1":
        bx, by = block_edge(Wo, TILE), block_edge(Ho, TILE)  # no idle threads on small images
        conv2d_v1_kernel[(blocks(Wo, bx), blocks(Ho, by), min(N * K, MAX_GRID_Z)), (bx, by)](X, W, b, Y, padding, stride)
    else:
        channels_per_block = min(int(channels_per_block), K)  # a group larger than K only idles
        groups = blocks(K, channels_per_block)
        kernel = conv2d_v2_kernel(R, S, stride, channels_per_block, int(tile))
        kernel[(blocks(Wo, tile), blocks(Ho, tile), min(N * groups, MAX_GRID_Z)), (tile, tile)](X, W, b, Y, padding)
    return Y
