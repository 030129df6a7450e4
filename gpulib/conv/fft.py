"""16.5: FFT convolution (cuDNN's FFT algorithm).

A CNN's "convolution" is a cross-correlation, and cross-correlation becomes a point-wise
product in the frequency domain: with X and W zero-padded to the same Hf×Wf grid,

    Y[n, k] = IFFT( Σ_c FFT(X[n, c]) · conj(FFT(W[k, c])) ),  cropped to H'×W' (every stride-th)

The FFTs run in a library (CuPy's cuFFT on a GPU, NumPy without one); the point-wise
product summed over channels, the part that is a CUDA kernel in cuDNN too, is the Numba
kernel below. Its cost barely depends on the filter size: an R×S filter costs R·S
multiplications per output directly, but only C complex products per frequency here, so FFT
pays for large filters (cuDNN picks it for 5x5 and up), while the padded grids and complex
spectra cost memory (``workspace_bytes``).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from gpulib.arrays import MAX_GRID_Z, integer_arguments, output, require_finite, to_device
from gpulib.env import on_gpu
from gpulib.shapes import check_conv_inputs, layer_shapes


@cuda.jit
def spectral_product_kernel(Xf, Wf, Yf):
    """Yf[n, k, u, v] = Σ_c Xf[n, c, u, v]·conj(Wf[k, c, u, v]): one thread per (n, k, u, v)."""
    v, u, _ = cuda.grid(3)
    N, C, Hf, Wh = Xf.shape
    K = Wf.shape[0]
    for nk in range(cuda.blockIdx.z, N * K, cuda.gridDim.z):  # (image, channel) planes
        if u < Hf and v < Wh:
            n, k = nk // K, nk % K
            acc = Xf[n, 0, u, v] * Wf[k, 0, u, v].conjugate()
            for c in range(1, C):
                acc += Xf[n, c, u, v] * Wf[k, c, u, v].conjugate()
            Yf[n, k, u, v] = acc


def _array_module():
    """CuPy on a GPU (its FFTs are cuFFT), NumPy otherwise."""
    if on_gpu():
        try:
            import cupy

            return cupy
        except ImportError:
            pass
    return np


def _to(xp, a):
    """``a`` (NumPy, Numba device or CuPy array) as an array of module ``xp``."""
    if xp is np and hasattr(a, "copy_to_host"):
        return a.copy_to_host()
    return xp.asarray(a)


@integer_arguments(H=1, W=1, padding=0)
def grid_size(H, W, padding):
    """The FFT grid: the padded image (a correlation with an R-wide filter needs no more)."""
    return H + 2 * padding, W + 2 * padding


@layer_shapes
def workspace_bytes(X_shape, W_shape, padding: int = 0, stride: int = 1) -> int:
    """Complex64 spectra of X, W and Y on the padded grid (rfft keeps Wf//2 + 1 columns)."""
    N, C, H, W = X_shape
    K = W_shape[0]
    Hf, Wf = grid_size(H, W, padding)
    return 8 * Hf * (Wf // 2 + 1) * (N * C + K * C + N * K)


@layer_shapes
def multiplications(X_shape, W_shape, padding: int = 0, stride: int = 1) -> int:
    """Real multiplications, roughly: the channel-summed complex products (4 real ones each) on
    the rfft grid, plus about Hf·Wf·log2(Hf·Wf) for each of the N·C + K·C + N·K transforms (a
    radix-2 estimate; cuFFT's own count differs). The filter size R×S does not appear, nor the
    stride: every position is computed and the stride keeps one in stride²."""
    N, C, H, W = X_shape
    K = W_shape[0]
    Hf, Wf = grid_size(H, W, padding)
    products = 4 * N * K * C * Hf * (Wf // 2 + 1)
    transforms = (N * C + K * C + N * K) * Hf * Wf * np.log2(Hf * Wf)
    return int(products + transforms)


def conv2d_fft(X, W, b=None, padding: int = 0, stride: int = 1, *, out=None):
    """Y = conv(X, W) + b through FFTs of the zero-padded input and filters."""
    N, K, Ho, Wo = check_conv_inputs(X, W, b, padding, stride)
    result = output(out, (N, K, Ho, Wo), "out")
    for name, a in (("X", X), ("W", W)):  # a NaN or inf would reach every output through the transforms
        require_finite(a, name, "the FFT would spread to every output of its image; use another algorithm")
    _, C, R, S = W.shape
    H, Wd = X.shape[2], X.shape[3]
    Hf, Wf = grid_size(H, Wd, padding)
    xp = _array_module()
    Xp = xp.zeros((N, C, Hf, Wf), np.float32)
    Xp[:, :, padding:padding + H, padding:padding + Wd] = _to(xp, X)
    Wp = xp.zeros((K, C, Hf, Wf), np.float32)
    Wp[:, :, :R, :S] = _to(xp, W)
    Xf = xp.fft.rfft2(Xp).astype(np.complex64)
    Wfreq = xp.fft.rfft2(Wp).astype(np.complex64)
    Yf = to_device(xp.zeros((N, K, Hf, Wf // 2 + 1), np.complex64))  # CuPy arrays pass through
    threads = (16, 16, 1)
    grid = ((Yf.shape[3] + 15) // 16, (Hf + 15) // 16, min(N * K, MAX_GRID_Z))
    spectral_product_kernel[grid, threads](to_device(Xf), to_device(Wfreq), Yf)
    full = xp.fft.irfft2(_to(xp, Yf), s=(Hf, Wf))
    Y = full[:, :, 0:(Ho - 1) * stride + 1:stride, 0:(Wo - 1) * stride + 1:stride].astype(np.float32)
    if b is not None:
        Y = Y + _to(xp, b).reshape(1, K, 1, 1).astype(np.float32)
    if xp is np:
        result.copy_to_device(np.ascontiguousarray(Y))
    else:  # write through a CuPy view of the Numba array: a device-to-device copy
        xp.asarray(result)[...] = Y
    return result
