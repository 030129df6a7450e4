"""16.3: the direct convolution kernel, as a ladder of versions.

    version 1  one thread per output element Y[n, k, y, x], the chapter's mapping
    version 2  shared-memory tiling: a TILE×TILE output tile for ``channels_per_block`` output
               channels, each input tile (with its halo) and the group's filters loaded once
    version 3  version 2 with the filters in constant memory instead of shared memory: every
               thread of a block reads the same filter value at once, which the constant cache
               broadcasts; the filters are compiled into the kernel, a group of output channels
               per kernel that fits constant memory's 64 KB

Layouts: X [N, C, H, W], W [K, C, R, S], b [K], Y [N, K, H', W'], all float32, C-contiguous.
``conv2d_direct`` checks its inputs and launches one of them (``default_version``: 2 on a GPU,
1 on the simulator); version 2 is compiled once per (R, S, stride, channels_per_block), version 3
once per group of filters. 16.3's notebook explains and measures them. What must stay true: every output element written once.
"""

from __future__ import annotations

from functools import lru_cache

from numba import cuda, float32

from gpulib.arrays import MAX_GRID_Z, block_edge, blocks, output, require_int, to_device
from gpulib.env import sized
from gpulib.shapes import bias_or_zeros, check_conv_inputs

TILE = 16  # output tile edge of version 2 (a 16×16 thread block)
CHANNELS_PER_BLOCK = 16  # version 2's default group (fastest measured: benchmarks/results/)
VERSIONS = ("v1", "v2", "v3")
CONSTANT_BYTES = 60 * 1024  # of constant memory's 64 KB, what one kernel's filters may take


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


# ------------------------------------------------------------------ version 3
def constant_group(C: int, R: int, S: int, KB: int) -> int:
    """Output channels whose filters one version-3 kernel holds in constant memory: the largest
    multiple of KB whose C·R·S float32 filters fit ``CONSTANT_BYTES`` (ValueError if not even KB
    channels fit)."""
    C, R, S, KB = (require_int(v, name, 1) for v, name in ((C, "C"), (R, "R"), (S, "S"), (KB, "KB")))
    per_channel = 4 * C * R * S
    fit = CONSTANT_BYTES // per_channel // KB * KB
    if fit < KB:
        raise ValueError(f"version 3 keeps W in constant memory: {KB} filters of C·R·S = {C}·{R}·{S} float32 values "
                         f"take {KB * per_channel} bytes, more than its {CONSTANT_BYTES}; use version 2")
    return fit


_CONSTANT_KERNELS: dict = {}


def conv2d_v3_kernel(W_group, stride: int, KB: int, TILE: int = TILE):
    """Version 3 for the filters ``W_group`` [KG, C, R, S] (host float32, KG a multiple of KB),
    compiled into the kernel as constant memory; one kernel per distinct filter group (cached by
    its bytes: a training step that changes W compiles again, which is why only inference-like
    use fits it)."""
    import numpy as np

    W_group = np.ascontiguousarray(W_group, dtype=np.float32)
    key = (W_group.shape, W_group.tobytes(), stride, KB, TILE)
    if key in _CONSTANT_KERNELS:
        return _CONSTANT_KERNELS[key]
    KG, C, R, S = W_group.shape
    IN_H = (TILE - 1) * stride + R
    IN_W = (TILE - 1) * stride + S

    @cuda.jit
    def conv2d_v3(X, k_first, b, Y, padding):
        Wc = cuda.const.array_like(W_group)  # constant memory: the same address for the whole block
        tile = cuda.shared.array((IN_H, IN_W), float32)
        acc = cuda.local.array(KB, float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        K = Y.shape[1]
        groups = KG // KB
        for plane in range(cuda.blockIdx.z, Y.shape[0] * groups, cuda.gridDim.z):
            n = plane // groups
            g0 = (plane % groups) * KB  # first filter of this block's group within W_group
            y = cuda.blockIdx.y * TILE + ty
            x = cuda.blockIdx.x * TILE + tx
            row0 = cuda.blockIdx.y * TILE * stride - padding
            col0 = cuda.blockIdx.x * TILE * stride - padding
            H, Wd = X.shape[2], X.shape[3]
            for kk in range(KB):
                acc[kk] = float32(0.0)
            for c in range(C):
                for i in range(ty, IN_H, TILE):
                    for j in range(tx, IN_W, TILE):
                        iy = row0 + i
                        ix = col0 + j
                        inside = 0 <= iy < H and 0 <= ix < Wd
                        tile[i, j] = X[n, c, iy, ix] if inside else float32(0.0)
                cuda.syncthreads()
                for r in range(R):
                    for s in range(S):
                        v = tile[ty * stride + r, tx * stride + s]
                        for kk in range(KB):
                            acc[kk] += Wc[g0 + kk, c, r, s] * v  # one constant read, broadcast
                cuda.syncthreads()
            if y < Y.shape[2] and x < Y.shape[3]:
                for kk in range(KB):
                    k = k_first + g0 + kk
                    if k < K:
                        Y[n, k, y, x] = acc[kk] + b[k]

    _CONSTANT_KERNELS[key] = conv2d_v3
    return conv2d_v3


# ------------------------------------------------------------------ wrapper
def default_version() -> str:
    """The version a caller gets without asking: version 2 (the fastest) on a GPU, version 1 on
    the simulator, where every barrier of version 2 makes each thread of the block take a turn
    (slower there)."""
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
    elif version == "v2":
        channels_per_block = min(int(channels_per_block), K)  # a group larger than K only idles
        groups = blocks(K, channels_per_block)
        kernel = conv2d_v2_kernel(R, S, stride, channels_per_block, int(tile))
        kernel[(blocks(Wo, tile), blocks(Ho, tile), min(N * groups, MAX_GRID_Z)), (tile, tile)](X, W, b, Y, padding)
    else:
        import numpy as np

        KB = min(int(channels_per_block), K)
        C = W.shape[1]
        fit = constant_group(C, R, S, KB)
        W_host = W.copy_to_host() if hasattr(W, "copy_to_host") else np.asarray(W)
        for k0 in range(0, K, fit):  # one kernel (and one launch) per group of filters that fits
            part = W_host[k0:k0 + fit]
            if part.shape[0] % KB:  # the last group: zero filters up to a multiple of KB, never stored
                part = np.concatenate([part, np.zeros((KB - part.shape[0] % KB, C, R, S), np.float32)])
            kernel = conv2d_v3_kernel(part, stride, KB, int(tile))
            groups = part.shape[0] // KB
            kernel[(blocks(Wo, tile), blocks(Ho, tile), min(N * groups, MAX_GRID_Z)), (tile, tile)](
                X, k0, b, Y, padding)
    return Y
