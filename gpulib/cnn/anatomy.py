"""16.2: the convolution's rules, each as a few lines of NumPy that the notebook draws and the
tests hold against the kernels.

    receptive_field     how many input pixels one output of a stack of layers sees, per layer
    per_channel_terms   Y[n, k] as the sum over channels c of one 2-D correlation each
    conv1x1_as_matmul   a 1x1 convolution is a matrix product over channels at every pixel
    dilate              dY with stride - 1 zeros between its elements
    transposed_conv     dX from dY as an ordinary convolution: dY dilated, padded by R - 1 - p,
                        correlated with the filters flipped by 180° and with K and C swapped
    strides_in          the byte distance between neighbours along each axis, NCHW or NHWC
"""

from __future__ import annotations

import numpy as np

from gpulib import reference as ref
from gpulib.arrays import require_int, require_real
from gpulib.shapes import conv_output_size, output_shape, require_shape


def receptive_field(layers) -> list[dict]:
    """For layers given as (name, filter size, stride), the receptive field after each: its
    ``size`` (input pixels along one axis that one output depends on) and ``jump`` (input pixels
    between neighbouring outputs). size' = size + (R - 1)·jump, jump' = jump·stride."""
    if not isinstance(layers, (list, tuple)) or not layers:
        raise ValueError(f"layers must be a non-empty list of (name, filter size, stride), not {layers!r:.60}")
    size, jump, out = 1, 1, []
    for layer in layers:
        if not isinstance(layer, (list, tuple)) or len(layer) != 3:
            raise ValueError(f"layers must hold (name, filter size, stride) triples, not {layer!r}")
        name, R, stride = layer
        R, stride = require_int(R, f"layers: {name!r}'s filter size", 1), require_int(stride, f"layers: {name!r}'s stride", 1)
        size, jump = size + (R - 1) * jump, jump * stride
        out.append(dict(name=name, R=R, stride=stride, size=size, jump=jump))
    return out


def per_channel_terms(X, W, padding: int = 0, stride: int = 1, n: int = 0, k: int = 0) -> np.ndarray:
    """[C, H', W']: the 2-D correlation of channel c of image n with slice c of filter k, for each c.
    Their sum over c (plus the bias) is Y[n, k]."""
    X, W = require_real(X, "X", "[N, C, H, W]"), require_real(W, "W", "[K, C, R, S]")
    output_shape(X.shape, W.shape, padding, stride)
    n, k = require_int(n, "n", 0), require_int(k, "k", 0)
    if n >= X.shape[0] or k >= W.shape[0]:
        raise ValueError(f"n must be below X's {X.shape[0]} images and k below W's {W.shape[0]} filters, not n={n}, k={k}")
    return np.stack([ref.conv2d(X[n:n + 1, c:c + 1], W[k:k + 1, c:c + 1], None, padding, stride)[0, 0]
                     for c in range(X.shape[1])])


def conv1x1_as_matmul(X, W, b=None) -> np.ndarray:
    """Y [N, K, H, W] of a 1x1 convolution, computed as W[:, :, 0, 0] (K x C) times the C channels
    of every pixel: a fully connected layer applied at each position."""
    X, W = require_real(X, "X", "[N, C, H, W]"), require_real(W, "W", "[K, C, 1, 1]")
    if W.shape[2:] != (1, 1):
        raise ValueError(f"W must be [K, C, 1, 1] for a 1x1 convolution, not {list(W.shape)}")
    output_shape(X.shape, W.shape, 0, 1)  # the channels agree
    Y = np.einsum("kc,nchw->nkhw", W[:, :, 0, 0], X)
    if b is None:
        return Y
    b = require_real(b, "b", "[K]")
    if len(b) != W.shape[0]:
        raise ValueError(f"b has {len(b)} entries but W has {W.shape[0]} filters")
    return Y + b[None, :, None, None]


def dilate(dY, stride: int) -> np.ndarray:
    """dY [N, K, H', W'] with stride - 1 zeros between neighbouring elements along H and W."""
    dY = require_real(dY, "dY", "[N, K, H', W']")
    stride = require_int(stride, "stride", 1)
    N, K, Ho, Wo = dY.shape
    out = np.zeros((N, K, (Ho - 1) * stride + 1, (Wo - 1) * stride + 1))
    out[:, :, ::stride, ::stride] = dY
    return out


def _pad_or_crop(A, before: int, after_h: int, after_w: int) -> np.ndarray:
    """Zeros added (or rows and columns removed, for negative amounts) around the last two axes."""
    grow = [(0, 0), (0, 0), (max(before, 0), max(after_h, 0)), (max(before, 0), max(after_w, 0))]
    A = np.pad(A, grow)
    h0, w0 = max(-before, 0), max(-before, 0)
    h1 = A.shape[2] - max(-after_h, 0)
    w1 = A.shape[3] - max(-after_w, 0)
    return A[:, :, h0:h1, w0:w1]


def transposed_conv(dY, W, input_shape, padding: int = 0, stride: int = 1) -> np.ndarray:
    """dX [N, C, H, W] of Y = conv2d(X, W, padding, stride) given dY, as a plain stride-1
    convolution: dilate dY by the stride, pad it by R - 1 - padding (plus the rows and columns
    the forward pass's floor left over at the bottom and right), and correlate it with
    W flipped by 180° in (r, s) and transposed to [C, K, R, S]."""
    W = require_real(W, "W", "[K, C, R, S]")
    N, C, H, Wd = require_shape(input_shape, "input_shape", "[N, C, H, W]")
    K, _, R, S = W.shape
    if R != S:
        raise ValueError(f"transposed_conv draws square filters only, got {R}x{S}")
    want = output_shape((N, C, H, Wd), W.shape, padding, stride)  # (input_shape's channels against W's)
    dY = require_real(dY, "dY", "[N, K, H', W']")
    if dY.shape != want:
        raise ValueError(f"dY must have the forward output's shape {want} (input_shape and W's filters), "
                         f"not {dY.shape}")
    left_h = (H + 2 * padding - R) - stride * (conv_output_size(H, R, padding, stride) - 1)
    left_w = (Wd + 2 * padding - S) - stride * (conv_output_size(Wd, S, padding, stride) - 1)
    edge = R - 1 - padding
    D = _pad_or_crop(dilate(dY, stride), edge, edge + left_h, edge + left_w)
    flipped = W[:, :, ::-1, ::-1].transpose(1, 0, 2, 3)
    return ref.conv2d(D, flipped, None, 0, 1)


def strides_in(layout: str, shape, itemsize: int = 4) -> dict:
    """Bytes between neighbours along n, c, h and w for a tensor of logical shape [N, C, H, W]
    stored as ``layout`` ('NCHW' or 'NHWC')."""
    if layout not in ("NCHW", "NHWC"):
        raise ValueError(f"layout must be 'NCHW' or 'NHWC', not {layout!r}")
    N, C, H, W = require_shape(shape, "shape", "[N, C, H, W]")
    itemsize = require_int(itemsize, "itemsize", 1)
    stored = np.empty((N, C, H, W) if layout == "NCHW" else (N, H, W, C), np.float32)
    steps = dict(zip(layout, (s * itemsize // stored.itemsize for s in stored.strides)))
    return {axis: steps[axis.upper()] for axis in "nchw"}
