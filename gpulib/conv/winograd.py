"""16.5: Winograd convolution F(2x2, 3x3), fused (cuDNN's WINOGRAD) and non-fused
(WINOGRAD_NONFUSED).

Each 2x2 block of outputs reads a 4x4 tile of the input (tiles overlap by 2). Winograd's
minimal filtering algorithm computes the 2x2 outputs of one tile and one channel with 16
multiplications instead of 2·2·3·3 = 36:

    Y_tile = Aᵀ [ (G g Gᵀ) ⊙ (Bᵀ d B) ] A        d: 4x4 input tile, g: 3x3 filter

    U = G g Gᵀ   the filter transform, 4x4, once per (k, c)
    V = Bᵀ d B   the input transform, 4x4, once per (n, c, tile); only additions
    M = Σ_c U ⊙ V   16 products per channel, summed over channels (a batched GEMM: for each of
                 the 16 positions, M[pos] = U[pos] (K×C) · V[pos] (C×tiles))
    Y = Aᵀ M A   the output transform, only additions

Non-fused: four kernels, the transformed input V and products M go through global memory
(extra memory: 16·C·tiles + 16·K·tiles floats). Fused: one kernel per (n, k, tile) that
transforms its input tiles on the fly and keeps M in registers. Only 3x3 filters with
stride 1 qualify, as in cuDNN.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32

from gpulib.arrays import blocks, output, require_finite, to_device
from gpulib.conv.shapes import bias_or_zeros, check_conv_inputs, output_shape

BLOCK = 128
# the F(2x2, 3x3) matrices, for the NumPy reference and the docs; the kernels spell them out
BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64)
G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float64)
AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64)


def _tiles(X_shape, padding: int) -> int:
    """2x2 output tiles of a 3x3, stride-1 layer: N·⌈H'/2⌉·⌈W'/2⌉."""
    N, _, Ho, Wo = output_shape(X_shape, (1, X_shape[1], 3, 3), padding, 1)
    return N * ((Ho + 1) // 2) * ((Wo + 1) // 2)


def multiplications(X_shape, W_shape, padding: int = 0, stride: int = 1) -> int:
    """16 multiplications per tile, channel and filter (the direct convolution needs 36)."""
    return _tiles(X_shape, padding) * W_shape[0] * X_shape[1] * 16


@cuda.jit(device=True)
def tile_position(p, tiles_y, tiles_x):
    """Tile number p → (image n, tile row, tile column); tiles are 2x2 outputs."""
    return p // (tiles_y * tiles_x), (p // tiles_x) % tiles_y, p % tiles_x


@cuda.jit(device=True)
def input_transform(X, n, c, y0, x0, v):
    """v (4x4, flat) = Bᵀ d B for the 4x4 tile of X[n, c] whose top-left is (y0, x0); zero outside."""
    d = cuda.local.array(16, float32)
    H, W = X.shape[2], X.shape[3]
    for i in range(4):
        for j in range(4):
            y, x = y0 + i, x0 + j
            d[i * 4 + j] = X[n, c, y, x] if 0 <= y < H and 0 <= x < W else float32(0.0)
    t = cuda.local.array(16, float32)  # t = Bᵀ d (rows)
    for j in range(4):
        t[0 * 4 + j] = d[0 * 4 + j] - d[2 * 4 + j]
        t[1 * 4 + j] = d[1 * 4 + j] + d[2 * 4 + j]
        t[2 * 4 + j] = d[2 * 4 + j] - d[1 * 4 + j]
        t[3 * 4 + j] = d[1 * 4 + j] - d[3 * 4 + j]
    for i in range(4):  # v = t B (columns)
        v[i * 4 + 0] = t[i * 4 + 0] - t[i * 4 + 2]
        v[i * 4 + 1] = t[i * 4 + 1] + t[i * 4 + 2]
        v[i * 4 + 2] = t[i * 4 + 2] - t[i * 4 + 1]
        v[i * 4 + 3] = t[i * 4 + 1] - t[i * 4 + 3]


@cuda.jit(device=True)
def output_transform(m, Y, n, k, oy, ox, bias):
    """Y[n, k, oy:oy+2, ox:ox+2] = Aᵀ m A + bias, where it lies inside Y."""
    t = cuda.local.array(8, float32)  # t = Aᵀ m: 2 rows of 4
    for j in range(4):
        t[0 * 4 + j] = m[0 * 4 + j] + m[1 * 4 + j] + m[2 * 4 + j]
        t[1 * 4 + j] = m[1 * 4 + j] - m[2 * 4 + j] - m[3 * 4 + j]
    Ho, Wo = Y.shape[2], Y.shape[3]
    for i in range(2):
        y = oy + i
        if y < Ho:
            if ox < Wo:
                Y[n, k, y, ox] = t[i * 4 + 0] + t[i * 4 + 1] + t[i * 4 + 2] + bias
            if ox + 1 < Wo:
                Y[n, k, y, ox + 1] = t[i * 4 + 1] - t[i * 4 + 2] - t[i * 4 + 3] + bias


@cuda.jit
def filter_transform_kernel(W, U):
    """U[pos, k, c] = (G g Gᵀ)[pos] for g = W[k, c]: one thread per (k, c)."""
    i = cuda.grid(1)
    K, C = W.shape[0], W.shape[1]
    if i < K * C:
        k, c = i // C, i % C
        t = cuda.local.array(12, float32)  # t = G g: 4 rows of 3
        for j in range(3):
            g0, g1, g2 = W[k, c, 0, j], W[k, c, 1, j], W[k, c, 2, j]
            t[0 * 3 + j] = g0
            t[1 * 3 + j] = float32(0.5) * (g0 + g1 + g2)
            t[2 * 3 + j] = float32(0.5) * (g0 - g1 + g2)
            t[3 * 3 + j] = g2
        for r in range(4):  # (G g) Gᵀ
            a, b, e = t[r * 3 + 0], t[r * 3 + 1], t[r * 3 + 2]
            U[r * 4 + 0, k, c] = a
            U[r * 4 + 1, k, c] = float32(0.5) * (a + b + e)
            U[r * 4 + 2, k, c] = float32(0.5) * (a - b + e)
            U[r * 4 + 3, k, c] = e


@cuda.jit
def input_transform_kernel(X, V, padding, tiles_y, tiles_x):
    """V[pos, c, p] for tile p = (n, ty, tx): one thread per (c, p)."""
    i = cuda.grid(1)
    C, P = V.shape[1], V.shape[2]
    if i < C * P:
        c, p = i // P, i % P
        n, ty, tx = tile_position(p, tiles_y, tiles_x)
        v = cuda.local.array(16, float32)
        input_transform(X, n, c, 2 * ty - padding, 2 * tx - padding, v)
        for pos in range(16):
            V[pos, c, p] = v[pos]


@cuda.jit
def products_kernel(U, V, M):
    """M[pos, k, p] = Σ_c U[pos, k, c]·V[pos, c, p]: 16 independent GEMMs, one thread per output."""
    p = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    k = cuda.blockIdx.y
    pos = cuda.blockIdx.z
    if p < M.shape[2]:
        acc = float32(0.0)
        for c in range(U.shape[2]):
            acc += U[pos, k, c] * V[pos, c, p]
        M[pos, k, p] = acc


@cuda.jit
def output_transform_kernel(M, b, Y, tiles_y, tiles_x):
    """Y from M: one thread per (n, k, tile)."""
    i = cuda.grid(1)
    K, P = M.shape[1], M.shape[2]
    if i < K * P:
        k, p = i // P, i % P
        n, ty, tx = tile_position(p, tiles_y, tiles_x)
        m = cuda.local.array(16, float32)
        for pos in range(16):
            m[pos] = M[pos, k, p]
        output_transform(m, Y, n, k, 2 * ty, 2 * tx, b[k])


@cuda.jit
def winograd_fused_kernel(X, U, b, Y, padding, tiles_y, tiles_x):
    """The whole convolution for one (n, k, tile) per thread: input transform, products summed
    over channels, output transform; nothing but Y is written to global memory."""
    i = cuda.grid(1)
    K, C = U.shape[1], U.shape[2]
    P = X.shape[0] * tiles_y * tiles_x
    if i < K * P:
        k, p = i // P, i % P
        n, ty, tx = tile_position(p, tiles_y, tiles_x)
        m = cuda.local.array(16, float32)
        v = cuda.local.array(16, float32)
        for pos in range(16):
            m[pos] = float32(0.0)
        for c in range(C):
            input_transform(X, n, c, 2 * ty - padding, 2 * tx - padding, v)
            for pos in range(16):
                m[pos] += U[pos, k, c] * v[pos]
        output_transform(m, Y, n, k, 2 * ty, 2 * tx, b[k])


def supports(W_shape, stride: int) -> str:
    """"" when F(2x2, 3x3) applies to this filter and stride, else the reason it does not."""
    if tuple(W_shape[2:]) == (3, 3) and stride == 1:
        return ""
    return (f"Winograd F(2x2, 3x3) needs a 3x3 filter and stride 1, not a {W_shape[2]}x{W_shape[3]} "
            f"filter with stride {stride}")


def filter_transform(W):
    """U [16, K, C] = G g Gᵀ for every filter slice g = W[k, c]."""
    K, C = W.shape[0], W.shape[1]
    U = cuda.device_array((16, K, C), np.float32)
    filter_transform_kernel[blocks(K * C, BLOCK), BLOCK](to_device(W), U)
    return U


def _prepare(X, W, b, padding, stride, out):
    """Checks, Y, the tile grid and the transformed filters, shared by both variants."""
    N, K, Ho, Wo = check_conv_inputs(X, W, b, padding, stride)
    reason = supports(W.shape, stride)
    if reason:
        raise ValueError(reason)
    Y = output(out, (N, K, Ho, Wo), "out")
    for name, a in (("X", X), ("W", W)):  # inf - inf in a transform is NaN, and a NaN reaches all 4 outputs
        require_finite(a, name, "Winograd's transforms would turn into NaN beyond the outputs they "
                       "touch; use another algorithm")
    tiles_y, tiles_x = (Ho + 1) // 2, (Wo + 1) // 2
    return Y, tiles_y, tiles_x, N * tiles_y * tiles_x, filter_transform(W), bias_or_zeros(b, K)


def conv2d_winograd(X, W, b=None, padding: int = 0, stride: int = 1, *, out=None):
    """Y = conv(X, W) + b by Winograd F(2x2, 3x3) in one kernel (cuDNN's WINOGRAD)."""
    Y, tiles_y, tiles_x, P, U, bias = _prepare(X, W, b, padding, stride, out)
    K = W.shape[0]
    winograd_fused_kernel[blocks(K * P, BLOCK), BLOCK](to_device(X), U, bias, Y, padding, tiles_y, tiles_x)
    return Y


def conv2d_winograd_nonfused(X, W, b=None, padding: int = 0, stride: int = 1, *, out=None):
    """Y = conv(X, W) + b by Winograd F(2x2, 3x3) in four kernels, V and M through global memory
    (cuDNN's WINOGRAD_NONFUSED)."""
    Y, tiles_y, tiles_x, P, U, bias = _prepare(X, W, b, padding, stride, out)
    K, C = W.shape[0], W.shape[1]
    V = cuda.device_array((16, C, P), np.float32)
    input_transform_kernel[blocks(C * P, BLOCK), BLOCK](to_device(X), V, padding, tiles_y, tiles_x)
    M = cuda.device_array((16, K, P), np.float32)
    products_kernel[(blocks(P, BLOCK), K, 16), BLOCK](U, V, M)
    output_transform_kernel[blocks(K * P, BLOCK), BLOCK](M, bias, Y, tiles_y, tiles_x)
    return Y


def workspace_bytes(X_shape, W_shape, padding: int = 0, stride: int = 1) -> int:
    """Extra device memory of the fused variant: the transformed filters U [16, K, C]."""
    return 4 * 16 * W_shape[0] * X_shape[1]


def nonfused_workspace_bytes(X_shape, W_shape, padding: int = 0, stride: int = 1) -> int:
    """Extra device memory of the non-fused variant: U, and V [16, C, tiles] and M [16, K, tiles]."""
    P, K, C = _tiles(X_shape, padding), W_shape[0], X_shape[1]
    return workspace_bytes(X_shape, W_shape) + 4 * 16 * P * (C + K)


def reference_tile(d: np.ndarray, g: np.ndarray) -> np.ndarray:
    """F(2x2, 3x3) for one 4x4 tile and one 3x3 filter in float64 (for the book and tests)."""
    return AT @ ((G @ g @ G.T) * (BT @ d @ BT.T)) @ AT.T
