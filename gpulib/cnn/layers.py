"""16.2 wrappers: check inputs, then launch the kernels of gpulib/cnn/kernels.py.

Every function takes NumPy or device float32 arrays in [N, C, H, W] layout and returns
device arrays; a wrong shape, dtype or layout raises ValueError before any launch.
"""

from __future__ import annotations

import numpy as np

from gpulib.arrays import block_edge, blocks, output, require, to_device
from gpulib.cnn import kernels as K
from gpulib.conv.direct import check_conv_inputs, conv2d

BLOCK_1D = 128
TILE = 16


def _grid_nchw(N, C, H, W):
    """A 2-D block over (x, y) of one image plane; blockIdx.z walks the N·C planes."""
    bx, by = block_edge(W, TILE), block_edge(H, TILE)
    return (blocks(W, bx), blocks(H, by), N * C), (bx, by)


ALGORITHMS = ("direct", "im2col", "implicit_gemm", "implicit_precomp_gemm")


def conv2d_forward(X, W, b=None, padding: int = 0, stride: int = 1, out=None, version=None,
                   algorithm: str = "direct"):
    """The convolution layer's forward pass; every algorithm gives the same Y.

    "direct" (16.3): version 2 (the fastest) on a GPU and version 1 on the simulator, where
    every barrier of version 2 costs Python threads a rendezvous (3x slower there), unless
    ``version`` says otherwise. "im2col": im2col + GEMM (cuBLAS on a GPU). "implicit_gemm" and
    "implicit_precomp_gemm": 16.4's GEMM without X_col.
    """
    import gpulib
    from gpulib.conv import im2col, implicit_gemm

    if algorithm == "direct":
        version = version or gpulib.sized(gpu="v2", sim="v1")
        return conv2d(X, W, b, padding, stride, version=version, out=out)
    if algorithm == "im2col":
        return im2col.conv2d_im2col(X, W, b, padding, stride, out=out)
    if algorithm in ("implicit_gemm", "implicit_precomp_gemm"):
        return implicit_gemm.conv2d_implicit_gemm(X, W, b, padding, stride, algorithm == "implicit_precomp_gemm",
                                                  out=out)
    raise ValueError(f"unknown algorithm {algorithm!r}; choose one of {ALGORITHMS}")


def conv2d_backward(X, W, dY, padding: int = 0, stride: int = 1, need_dX: bool = True, outs=None,
                    algorithm: str = "direct"):
    """(dX, dW, db) of Y = conv2d(X, W) + b given dY; dX is None when ``need_dX`` is False.

    "direct": one thread per element of dX and of dW (gpulib/cnn/kernels.py). "im2col": dW and
    dX as GEMMs, dX folded back by col2im (gpulib/conv/im2col.py); ``outs`` is ignored there.
    The implicit algorithms are forward-only, so they take the direct backward.
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; choose one of {ALGORITHMS}")
    N, Kc, Ho, Wo = check_conv_inputs(X, W, None, padding, stride)
    require(dY, "dY", 4, layout="[N, K, H', W']")
    if tuple(dY.shape) != (N, Kc, Ho, Wo):
        raise ValueError(f"dY must have the output's shape {(N, Kc, Ho, Wo)}, not {tuple(dY.shape)}")
    out_dX, out_dW, out_db = outs if outs is not None else (None, None, None)
    X, W, dY = map(to_device, (X, W, dY))
    if algorithm == "im2col":
        from gpulib.conv.im2col import conv2d_im2col_backward

        dX, dW = conv2d_im2col_backward(X, W, dY, padding, stride, need_dX)
        db = output(out_db, (Kc,), "db")
        K.conv2d_bias_grad_kernel[blocks(Kc, BLOCK_1D), BLOCK_1D](dY, db)
        return dX, dW, db
    dX = None
    if need_dX:
        dX = output(out_dX, tuple(X.shape), "dX")
        grid, block = _grid_nchw(*X.shape)
        K.conv2d_input_grad_kernel[grid, block](dY, W, dX, padding, stride)
    dW = output(out_dW, tuple(W.shape), "dW")
    K.conv2d_weight_grad_kernel[blocks(W.size, BLOCK_1D), BLOCK_1D](X, dY, dW, padding, stride)
    db = output(out_db, (Kc,), "db")
    K.conv2d_bias_grad_kernel[blocks(Kc, BLOCK_1D), BLOCK_1D](dY, db)
    return dX, dW, db


def _flat(a):
    return a.reshape(a.size) if hasattr(a, "reshape") else a


def relu(Z, out=None):
    """H = max(0, Z) for a float32 array of any shape."""
    require(Z, "Z", len(Z.shape))
    H = output(out, tuple(Z.shape), "out")
    Z = to_device(Z)
    K.relu_kernel[blocks(Z.size, BLOCK_1D), BLOCK_1D](_flat(Z), _flat(H))
    return H


def relu_backward(H, dH, out=None):
    """dZ = dH ⊙ [H > 0] for arrays of any shape."""
    require(H, "H", len(H.shape))
    require(dH, "dH", len(H.shape))
    if tuple(H.shape) != tuple(dH.shape):
        raise ValueError(f"H has shape {tuple(H.shape)} but dH has {tuple(dH.shape)}")
    dZ = output(out, tuple(H.shape), "out")
    H, dH = to_device(H), to_device(dH)
    K.relu_backward_kernel[blocks(H.size, BLOCK_1D), BLOCK_1D](_flat(H), _flat(dH), _flat(dZ))
    return dZ


def _check_pool(X, size):
    require(X, "X", 4, layout="[N, C, H, W]")
    if int(size) != size or size < 1:
        raise ValueError(f"size must be a positive integer, not {size}")
    N, C, H, W = X.shape
    if size > H or size > W:
        raise ValueError(f"the {size}x{size} pooling window is larger than the {H}x{W} image")
    return N, C, H // size, W // size


def max_pool2d(X, size: int = 2, out=None, out_argmax=None):
    """(Y, argmax): the maximum of each size×size window, and its position inside the window."""
    N, C, Ho, Wo = _check_pool(X, size)
    Y = output(out, (N, C, Ho, Wo), "out")
    argmax = output(out_argmax, (N, C, Ho, Wo), "out_argmax", dtype=np.int32)
    grid, block = _grid_nchw(N, C, Ho, Wo)
    K.max_pool_kernel[grid, block](to_device(X), size, Y, argmax)
    return Y, argmax


def avg_pool2d(X, size: int = 2, out=None):
    """The mean of each size×size window."""
    N, C, Ho, Wo = _check_pool(X, size)
    Y = output(out, (N, C, Ho, Wo), "out")
    grid, block = _grid_nchw(N, C, Ho, Wo)
    K.avg_pool_kernel[grid, block](to_device(X), size, Y)
    return Y


def _check_pool_backward(input_shape, dY, size):
    if len(input_shape) != 4:
        raise ValueError(f"input_shape must be [N, C, H, W], not {tuple(input_shape)}")
    require(dY, "dY", 4, layout="[N, C, H/size, W/size]")
    N, C, H, W = input_shape
    if tuple(dY.shape) != (N, C, H // size, W // size):
        raise ValueError(f"dY must have shape {(N, C, H // size, W // size)}, not {tuple(dY.shape)}")


def max_pool2d_backward(dY, argmax, input_shape, size: int = 2, out=None):
    """dX: each window's gradient goes to the element that was its maximum."""
    _check_pool_backward(input_shape, dY, size)
    require(argmax, "argmax", 4, np.int32)
    dX = output(out, tuple(input_shape), "out")
    grid, block = _grid_nchw(*input_shape)
    K.max_pool_backward_kernel[grid, block](to_device(dY), to_device(argmax), size, dX)
    return dX


def avg_pool2d_backward(dY, input_shape, size: int = 2, out=None):
    """dX: each window's gradient shared equally by its size² elements."""
    _check_pool_backward(input_shape, dY, size)
    dX = output(out, tuple(input_shape), "out")
    grid, block = _grid_nchw(*input_shape)
    K.avg_pool_backward_kernel[grid, block](to_device(dY), size, dX)
    return dX
