"""16.5: Winograd convolution, F(2x2, 3x3) fused (cuDNN's WINOGRAD) and non-fused
(WINOGRAD_NONFUSED), and F(4x4, 3x3) non-fused.

    Y_tile = Aᵀ [ (G g Gᵀ) ⊙ (Bᵀ d B) ] A        d: input tile, g: 3x3 filter

Non-fused: four kernels (filter transform, input transform, the products summed over channels
as a batched GEMM, output transform) through a workspace; fused: one kernel per (n, k, tile).
F(4x4) puts its 36 products on one batched GEMM launch (its tile chosen by 16.4's GEMM
auto-tuner on a GPU), its four launches bound per layer shape (gpulib.launch.BoundLaunch).
Only 3x3 filters with stride 1 qualify, as in cuDNN; 16.5's notebook derives the transforms and
their rounding. What must stay true: every form equals the float64 convolution to the tolerance
its transforms allow.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32

from gpulib.arrays import blocks, is_device_array, output, require, require_finite, require_int, require_real, to_device
from gpulib.env import on_gpu
from gpulib.gemm import autotune as gemm_autotune
from gpulib.gemm import kernels as gemm_kernels
from gpulib.launch import BoundLaunch
from gpulib.shapes import bias_or_zeros, check_conv_inputs, filter_shape, layer_shapes, output_shape

BLOCK = 128
# the F(2x2, 3x3) matrices, for the NumPy reference and the docs; the kernels spell them out
BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64)
G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float64)
AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64)


def _tile_grid(Ho: int, Wo: int, m: int = 2) -> tuple[int, int]:
    """Rows and columns of m×m output tiles covering an Ho×Wo output."""
    return (Ho + m - 1) // m, (Wo + m - 1) // m


def _tiles(X_shape, padding: int, m: int = 2) -> int:
    """m×m output tiles of a 3x3, stride-1 layer: N·⌈H'/m⌉·⌈W'/m⌉ (m = 2 for F(2x2), 4 for F(4x4))."""
    N, _, Ho, Wo = output_shape(X_shape, (1, X_shape[1], 3, 3), padding, 1)
    tiles_y, tiles_x = _tile_grid(Ho, Wo, m)
    return N * tiles_y * tiles_x


@layer_shapes
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


@filter_shape
def supports(W_shape, stride: int, variant: str = "F(2x2, 3x3)") -> str | None:
    """None when Winograd ``variant`` (F(2x2, 3x3) or F(4x4, 3x3)) applies to this filter and
    stride, else the reason it does not: both need a 3x3 filter and stride 1."""
    if tuple(W_shape[2:]) == (3, 3) and stride == 1:
        return None
    return (f"Winograd {variant} needs a 3x3 filter and stride 1, not a {W_shape[2]}x{W_shape[3]} "
            f"filter with stride {stride}")


def filter_transform(W):
    """U [16, K, C] = G g Gᵀ for every filter slice g = W[k, c]."""
    require(W, "W", 4, layout="[K, C, 3, 3]")
    if tuple(W.shape[2:]) != (3, 3):
        raise ValueError(f"W must be [K, C, 3, 3] (3x3 filters), not {tuple(W.shape)}")
    K, C = W.shape[0], W.shape[1]
    U = cuda.device_array((16, K, C), np.float32)
    filter_transform_kernel[blocks(K * C, BLOCK), BLOCK](to_device(W), U)
    return U


def _checked(X, W, b, padding, stride, out, variant: str = "F(2x2, 3x3)"):
    """The checks every Winograd variant makes before a launch; (Y, N, K, H', W')."""
    N, K, Ho, Wo = check_conv_inputs(X, W, b, padding, stride)
    reason = supports(W.shape, stride, variant)
    if reason:
        raise ValueError(reason)
    Y = output(out, (N, K, Ho, Wo), "out")
    for name, a in (("X", X), ("W", W)):  # inf - inf in a transform is NaN, and a NaN reaches all outputs
        require_finite(a, name, "Winograd's transforms would turn into NaN beyond the outputs they "
                       "touch; use another algorithm")
    return Y, N, K, Ho, Wo


def _prepare(X, W, b, padding, stride, out):
    """Checks, Y, the tile grid and the transformed filters, shared by both F(2x2) variants."""
    Y, N, K, Ho, Wo = _checked(X, W, b, padding, stride, out)
    tiles_y, tiles_x = _tile_grid(Ho, Wo)
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


@layer_shapes
def workspace_bytes(X_shape, W_shape, padding: int = 0, stride: int = 1) -> int:
    """Extra device memory of the fused variant: the transformed filters U [16, K, C]."""
    return 4 * 16 * W_shape[0] * X_shape[1]


@layer_shapes
def nonfused_workspace_bytes(X_shape, W_shape, padding: int = 0, stride: int = 1) -> int:
    """Extra device memory of the non-fused variant: U, and V [16, C, tiles] and M [16, K, tiles]."""
    P, K, C = _tiles(X_shape, padding), W_shape[0], X_shape[1]
    return workspace_bytes(X_shape, W_shape) + 4 * 16 * P * (C + K)


# ------------------------------------------------------------------ F(4x4, 3x3)
BT4 = np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
                [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], np.float64)
G4 = np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
               [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]], np.float64)
AT4 = np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]], np.float64)
# float32 copies the kernels read (Numba compiles a global NumPy array in as a constant)
_BT4, _G4, _AT4 = BT4.astype(np.float32), G4.astype(np.float32), AT4.astype(np.float32)


def _tile_args(d, g, m: int):
    d, g = require_real(d, "d", "[m, m]"), require_real(g, "g", "[3, 3]")
    if d.shape != (m, m) or g.shape != (3, 3):
        raise ValueError(f"d must be a {m}x{m} input tile and g a 3x3 filter, not d {d.shape} and g {g.shape}")
    return d, g


def reference_tile_f4(d: np.ndarray, g: np.ndarray) -> np.ndarray:
    """F(4x4, 3x3) for one 6x6 tile and one 3x3 filter in float64."""
    d, g = _tile_args(d, g, 6)
    return AT4 @ ((G4 @ g @ G4.T) * (BT4 @ d @ BT4.T)) @ AT4.T


@cuda.jit
def filter_transform_f4_kernel(W, U):
    """U[pos, k, c] = (G4 g G4ᵀ)[pos] for g = W[k, c]: one thread per (k, c)."""
    i = cuda.grid(1)
    K, C = W.shape[0], W.shape[1]
    if i < K * C:
        k, c = i // C, i % C
        t = cuda.local.array(18, float32)  # G4 g: 6 rows of 3
        for r in range(6):
            for j in range(3):
                acc = float32(0.0)
                for q in range(3):
                    acc += _G4[r, q] * W[k, c, q, j]
                t[r * 3 + j] = acc
        for r in range(6):  # (G4 g) G4ᵀ
            for j in range(6):
                acc = float32(0.0)
                for q in range(3):
                    acc += t[r * 3 + q] * _G4[j, q]
                U[r * 6 + j, k, c] = acc


@cuda.jit
def input_transform_f4_kernel(X, V, padding, tiles_y, tiles_x):
    """V[pos, c, p] = (BT4 d BT4ᵀ)[pos] for the 6x6 tile d of X[n, c] under 4x4 output tile p:
    one thread per (c, p), neighbouring threads on neighbouring tiles (coalesced writes of V)."""
    i = cuda.grid(1)
    C, P = V.shape[1], V.shape[2]
    if i < C * P:
        c, p = i // P, i % P
        n, ty, tx = tile_position(p, tiles_y, tiles_x)
        y0, x0 = 4 * ty - padding, 4 * tx - padding
        H, W = X.shape[2], X.shape[3]
        d = cuda.local.array(36, float32)
        for r in range(6):
            for j in range(6):
                y, x = y0 + r, x0 + j
                d[r * 6 + j] = X[n, c, y, x] if 0 <= y < H and 0 <= x < W else float32(0.0)
        t = cuda.local.array(36, float32)  # BT4 d
        for r in range(6):
            for j in range(6):
                acc = float32(0.0)
                for q in range(6):
                    acc += _BT4[r, q] * d[q * 6 + j]
                t[r * 6 + j] = acc
        for r in range(6):  # (BT4 d) BT4ᵀ
            for j in range(6):
                acc = float32(0.0)
                for q in range(6):
                    acc += t[r * 6 + q] * _BT4[j, q]
                V[r * 6 + j, c, p] = acc


@cuda.jit
def output_transform_f4_kernel(M, b, Y, tiles_y, tiles_x):
    """Y[n, k, 4x4 tile p] = AT4 m AT4ᵀ + b[k] from m = M[:, k, p]: one thread per (k, p)."""
    i = cuda.grid(1)
    K, P = M.shape[1], M.shape[2]
    if i < K * P:
        k, p = i // P, i % P
        n, ty, tx = tile_position(p, tiles_y, tiles_x)
        t = cuda.local.array(24, float32)  # AT4 m: 4 rows of 6
        for r in range(4):
            for j in range(6):
                acc = float32(0.0)
                for q in range(6):
                    acc += _AT4[r, q] * M[q * 6 + j, k, p]
                t[r * 6 + j] = acc
        Ho, Wo = Y.shape[2], Y.shape[3]
        bias = b[k]
        for r in range(4):  # (AT4 m) AT4ᵀ, where it lies inside Y
            y = 4 * ty + r
            for j in range(4):
                x = 4 * tx + j
                if y < Ho and x < Wo:
                    acc = bias
                    for q in range(6):
                        acc += t[r * 6 + q] * _AT4[j, q]
                    Y[n, k, y, x] = acc


F4_PRODUCTS = dict(BM=64, BN=128, BK=8, TM=4, TN=8)  # GEMM v5's tile for 36 products of K ≤ 64 rows, one of the
# candidates of gpulib.gemm.autotune, which picks the products' tile on a GPU


class F4Plan:
    """F(4x4, 3x3) for one layer shape: the workspace (U, V, M) and the four launches, bound."""

    def __init__(self, X_shape, W_shape, padding: int):
        _, _, Ho, Wo = output_shape(X_shape, W_shape, padding, 1)  # (checks the shapes and padding)
        reason = supports_f4(W_shape, 1)
        if reason:
            raise ValueError(f"W_shape {tuple(W_shape)}: {reason}")
        N, C, H, W = X_shape
        K = W_shape[0]
        self.shapes = dict(X=tuple(X_shape), W=tuple(W_shape), bias=(K,), Y=(N, K, Ho, Wo))
        self.padding = int(padding)
        self.tiles_y, self.tiles_x = _tile_grid(Ho, Wo, 4)
        P = N * self.tiles_y * self.tiles_x
        self.U = cuda.device_array((36, K, C), np.float32)
        self.V = cuda.device_array((36, C, P), np.float32)
        self.M = cuda.device_array((36, K, P), np.float32)
        if on_gpu():  # the 36 products' version and tile, measured for their shape once (16.4's tuner)
            pick = gemm_autotune.choose(K, P, C, batch=36)
            self.products_tile = (pick.version, pick.tile)
        else:
            self.products_tile = ("v5", gemm_kernels.V5_SIM)
        version, tile = self.products_tile
        self.filters = BoundLaunch(filter_transform_f4_kernel, blocks(K * C, BLOCK), BLOCK)
        self.inputs = BoundLaunch(input_transform_f4_kernel, blocks(C * P, BLOCK), BLOCK)
        self.products = BoundLaunch(gemm_kernels.tiled_kernel(version, tile),
                                    (blocks(P, tile["BN"]), blocks(K, tile["BM"]), 36),
                                    gemm_kernels.block_threads(tile))
        self.outputs = BoundLaunch(output_transform_f4_kernel, blocks(K * P, BLOCK), BLOCK)

    def run(self, X, W, bias, Y, padding: int):
        """The four launches on device float32 X, W, bias and Y of the plan's layer (checked: shapes,
        dtype, device, padding; nothing is copied)."""
        for name, a in (("X", X), ("W", W), ("bias", bias), ("Y", Y)):
            if not is_device_array(a) or np.dtype(a.dtype) != np.float32 or tuple(a.shape) != self.shapes[name]:
                raise ValueError(f"{name} must be a float32 device array of this plan's shape {self.shapes[name]}, "
                                 f"not {type(a).__name__} {getattr(a, 'dtype', '')} {tuple(getattr(a, 'shape', ()))}")
            if not (a.is_c_contiguous() if hasattr(a, "is_c_contiguous") else True):
                raise ValueError(f"{name} must be C-contiguous")
        if require_int(padding, "padding", 0) != self.padding:
            raise ValueError(f"padding must be this plan's {self.padding}, not {padding!r}")
        self.filters(W, self.U)
        self.inputs(X, self.V, padding, self.tiles_y, self.tiles_x)
        self.products(self.U, self.V, self.M)  # M[pos] = U[pos] (K×C) · V[pos] (C×P), all 36 at once
        self.outputs(self.M, bias, Y, self.tiles_y, self.tiles_x)


F4_PLANS: dict = {}  # (X shape, W shape, padding) -> F4Plan: the workspace and launches of each layer shape


def conv2d_winograd_f4(X, W, b=None, padding: int = 0, stride: int = 1, *, out=None):
    """Y = conv(X, W) + b by Winograd F(4x4, 3x3), non-fused: filter and input transforms, the
    36 products as one batched GEMM launch (the version and tile gpulib.gemm.autotune measures
    fastest for them on a GPU, version 5 on the simulator), the output transform (cuDNN's
    WINOGRAD_NONFUSED family). The workspace and the bound launches are kept per layer shape."""
    Y, _, K, _, _ = _checked(X, W, b, padding, stride, out, "F(4x4, 3x3)")
    key = (tuple(X.shape), tuple(W.shape), padding)
    plan = F4_PLANS.get(key)
    if plan is None:
        plan = F4_PLANS[key] = F4Plan(key[0], key[1], padding)
    plan.run(to_device(X), to_device(W), bias_or_zeros(b, K), Y, padding)
    return Y


@filter_shape
def supports_f4(W_shape, stride: int) -> str | None:
    """None when F(4x4, 3x3) applies (a 3x3 filter, stride 1), else the reason it does not."""
    return supports(W_shape, stride, "F(4x4, 3x3)")


@layer_shapes
def f4_multiplications(X_shape, W_shape, padding: int = 0, stride: int = 1) -> int:
    """36 multiplications per 4x4 tile, channel and filter (the direct convolution needs 144)."""
    return _tiles(X_shape, padding, 4) * W_shape[0] * X_shape[1] * 36


@layer_shapes
def f4_workspace_bytes(X_shape, W_shape, padding: int = 0, stride: int = 1) -> int:
    """U [36, K, C], V [36, C, tiles] and M [36, K, tiles], float32 (kept per layer shape)."""
    P, K, C = _tiles(X_shape, padding, 4), W_shape[0], X_shape[1]
    return 4 * 36 * (K * C + P * (C + K))


def reference_tile(d: np.ndarray, g: np.ndarray) -> np.ndarray:
    """F(2x2, 3x3) for one 4x4 tile and one 3x3 filter in float64 (for the book and tests)."""
    d, g = _tile_args(d, g, 4)
    return AT @ ((G @ g @ G.T) * (BT @ d @ BT.T)) @ AT.T
