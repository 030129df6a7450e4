"""16.2 wrappers: check inputs, then launch the kernels of gpulib/cnn/kernels.py.

Every function takes NumPy or device float32 arrays in [N, C, H, W] layout and returns
device arrays; a wrong shape, dtype or layout raises ValueError before any launch. Outputs
may be passed as ``out=`` (a tuple, one entry per result, where there are several).
"""

from __future__ import annotations

import numpy as np

from gpulib.arrays import MAX_GRID_Z, block_edge, blocks, output, outputs, require, require_bool, require_int, to_device, to_host
from gpulib.cnn import kernels
from gpulib.conv import front
from gpulib.env import cuda, sized
from gpulib.reductions import staged as staged_sums
from gpulib.reductions import tree as trees
from gpulib.shapes import check_conv_inputs, require_shape

BLOCK_1D = 128
TILE = 16


def grid_nchw(N, C, H, W):
    """A 2-D block over (x, y) of one image plane; blockIdx.z walks the N·C planes (a grid has at
    most 65,535 blocks along z, so beyond that each block loops over every gridDim.z-th plane)."""
    bx, by = block_edge(W, TILE), block_edge(H, TILE)
    return (blocks(W, bx), blocks(H, by), min(N * C, MAX_GRID_Z)), (bx, by)


def conv2d_forward(X, W, b=None, padding: int = 0, stride: int = 1, *, out=None, algorithm: str = "direct"):
    """The convolution layer's forward pass by any algorithm of gpulib/conv/algorithms.py
    ("direct" of 16.3, 16.4's "gemm", "implicit_gemm", "implicit_precomp_gemm", 16.5's "fft",
    "winograd", ..., or "auto": the auto-tuner's cached pick for this layer shape)."""
    return front.conv2d(X, W, b, padding, stride, algorithm=algorithm, out=out)


REDUCTIONS = ("thread", "tree", "staged")
INPUT_GRADS = ("gather", "flipped")


def default_reduction() -> str:
    """How dW and db are summed unless asked: a block-wide tree per sum on a GPU (16.6 found the
    one-thread-per-sum kernels taking most of a training step), one thread per sum on the
    simulator, where every barrier of the tree makes each thread of the block take a turn."""
    return sized(gpu="tree", sim="thread")


def conv2d_backward(X, W, dY, padding: int = 0, stride: int = 1, *, need_dX: bool = True, out=None,
                    algorithm: str = "direct", reduction: str | None = None, input_grad: str = "gather",
                    relu_output=None):
    """(dX, dW, db) of Y = conv2d(X, W) + b given dY; dX is None when ``need_dX`` is False.
    ``out`` may hold (dX, dW, db) output arrays.

    An algorithm with a backward pass of its own ("gemm": dW and dX as GEMMs, dX folded back by
    col2im) uses it; the others take the direct one, one thread per element of dX and of dW
    (gpulib/cnn/kernels.py), as cuDNN's forward and backward algorithms are chosen apart.
    ``reduction`` says how those direct kernels sum dW and db: "thread" (one thread per sum,
    16.2), "tree" (a block per sum, gpulib/reductions/tree.py) or "staged" (a block per group of
    images, each image staged in shared memory, gpulib/reductions/staged.py; stride 1, an image
    that fits ``staged.STAGED_BYTES`` and an algorithm without a backward pass of its own, else
    "tree"); ``default_reduction()`` when None.
    ``input_grad`` says how they find dX: "gather" (one thread per element, 16.2) or "flipped"
    (stride 1, padding below the filter's size: dY convolved, padding R - 1 - p, with W turned
    180° and its channels swapped, by the forward algorithm ``algorithm`` names; else "gather").
    ``relu_output``: H = ReLU(this layer's output), when dY is the gradient of H rather than of the
    output: the pass then takes dY ⊙ [H > 0], ReLU's backward, folded into the staged kernel where
    it runs with ``need_dX`` False, else as one relu_backward launch first.
    """
    need_dX = require_bool(need_dX, "need_dX")
    reduction = reduction or default_reduction()
    if reduction not in REDUCTIONS:
        raise ValueError(f"unknown reduction {reduction!r}; choose one of {REDUCTIONS}")
    if input_grad not in INPUT_GRADS:
        raise ValueError(f"unknown input_grad {input_grad!r}; choose one of {INPUT_GRADS}")
    N, Kc, Ho, Wo = check_conv_inputs(X, W, None, padding, stride)
    require(dY, "dY", 4, layout="[N, K, H', W']")
    if tuple(dY.shape) != (N, Kc, Ho, Wo):
        raise ValueError(f"dY must have the output's shape {(N, Kc, Ho, Wo)} (X's images, W's filters), "
                         f"not {tuple(dY.shape)}")
    if relu_output is not None:
        require(relu_output, "relu_output", 4, layout="[N, K, H', W']")
        if tuple(relu_output.shape) != tuple(dY.shape):
            raise ValueError(f"relu_output must have dY's shape {tuple(dY.shape)} (the ReLU of this layer's "
                             f"output), not {tuple(relu_output.shape)}")
    out_dX, out_dW, out_db = outputs(out, ("dX", "dW", "db"))
    forward = front.get(algorithm, X, W, None, padding, stride)
    dX = output(out_dX, tuple(X.shape), "dX") if need_dX else None
    dW = output(out_dW, tuple(W.shape), "dW")
    db = output(out_db, (Kc,), "db")
    X, W, dY = map(to_device, (X, W, dY))
    shared = None
    if reduction == "staged" and forward.backward is None:
        shared = _staged_shared_bytes(X.shape, dY.shape, padding, stride)
    if reduction == "staged" and shared is None:
        reduction = "tree"  # (what "staged" does where it cannot run: db by the tree)
    relu_output = None if relu_output is None else to_device(relu_output)
    if relu_output is not None and (need_dX or reduction != "staged"):
        dY = relu_backward(relu_output, dY)  # not folded: ReLU's backward as a launch of its own
        relu_output = None
    if forward.backward is not None:
        forward.backward(X, W, dY, padding, stride, need_dX=need_dX, out=(dX, dW))
    else:
        if need_dX:
            _input_grad(X, W, dY, dX, padding, stride, forward, input_grad)
        if reduction == "staged":
            _staged_weight_and_bias_grad(X, dY, relu_output, dW, db, padding, shared)
            return dX, dW, db
        if reduction == "tree":
            trees.weight_grad_tree_kernel[W.size, trees.BLOCK](X, dY, dW, padding, stride)
        else:
            kernels.conv2d_weight_grad_kernel[blocks(W.size, BLOCK_1D), BLOCK_1D](X, dY, dW, padding, stride)
    if reduction == "tree":
        trees.bias_grad_tree_kernel[Kc, trees.BLOCK](dY, db)
    else:
        kernels.conv2d_bias_grad_kernel[blocks(Kc, BLOCK_1D), BLOCK_1D](dY, db)
    return dX, dW, db


def _staged_shared_bytes(X_shape, dY_shape, padding: int, stride: int) -> int | None:
    """The shared memory reduction="staged" stages one image of X and dY in, or None where it cannot
    take the layer (stride other than 1, or more than STAGED_BYTES)."""
    _, C, H, W = X_shape
    _, K, Ho, Wo = dY_shape
    shared = 4 * staged_sums.staged_floats(C, H, W, K, Ho, Wo, padding)
    return shared if stride == 1 and shared <= staged_sums.STAGED_BYTES else None


def _staged_weight_and_bias_grad(X, dY, H, dW, db, padding: int, shared: int) -> None:
    """dW and db by gpulib/reductions/staged.py: one launch for the blocks' partial sums, one to add
    them; where H (a ReLU's output) is given, dY counts only where H > 0."""
    K, R, S = dW.shape[0], dW.shape[2], dW.shape[3]
    rows = min(X.shape[0], staged_sums.GROUPS)
    sums = dW.size + K
    partial = cuda.device_array((rows, sums), np.float32)
    mask = dY if H is None else H  # (read only where H is given)
    staged_sums.weight_grad_staged_kernel[rows, staged_sums.block_threads(), 0, shared](X, dY, mask, H is not None,
                                                                                        partial, R, S, padding)
    staged_sums.sum_rows_kernel[blocks(sums, BLOCK_1D), BLOCK_1D](partial, rows, _flat(dW), db)


def _input_grad(X, W, dY, dX, padding: int, stride: int, forward, how: str) -> None:
    """dX into ``dX``: 16.2's gather kernel, or (``how`` "flipped", where it applies) the forward
    convolution of dY with W turned 180° and its in- and out-channels swapped."""
    K, C, R, S = W.shape
    if how == "flipped" and stride == 1 and R == S and padding <= R - 1:
        Wf_shape = (C, K, R, S)
        if forward.precision != "fp32" or forward.supports(Wf_shape, 1) is not None:
            forward = front.get("direct")  # (dX in float32, as the gather kernel gives it)
        Wf = cuda.device_array(Wf_shape, np.float32)
        zeros = cuda.device_array(C, np.float32)
        kernels.flip_filters_kernel[blocks(W.size, BLOCK_1D), BLOCK_1D](W, Wf, zeros)
        forward.run(dY, Wf, zeros, R - 1 - padding, 1, out=dX)
        return
    grid, block = grid_nchw(*X.shape)
    kernels.conv2d_input_grad_kernel[grid, block](dY, W, dX, padding, stride)


def _flat(a):
    return a.reshape(a.size) if hasattr(a, "reshape") else a


def relu(Z, *, out=None):
    """H = max(0, Z) for a float32 array of any shape."""
    require(Z, "Z", None)
    H = output(out, tuple(Z.shape), "out")
    Z = to_device(Z)
    kernels.relu_kernel[blocks(Z.size, BLOCK_1D), BLOCK_1D](_flat(Z), _flat(H))
    return H


def relu_backward(H, dH, *, out=None):
    """dZ = dH ⊙ [H > 0] for arrays of any shape."""
    require(H, "H", None)
    require(dH, "dH", None)
    if tuple(H.shape) != tuple(dH.shape):
        raise ValueError(f"H has shape {tuple(H.shape)} but dH has {tuple(dH.shape)}")
    dZ = output(out, tuple(H.shape), "out")
    H, dH = to_device(H), to_device(dH)
    kernels.relu_backward_kernel[blocks(H.size, BLOCK_1D), BLOCK_1D](_flat(H), _flat(dH), _flat(dZ))
    return dZ


def _check_pool(X, size):
    require(X, "X", 4, layout="[N, C, H, W]")
    require_int(size, "size", 1)
    N, C, H, W = X.shape
    if size > H or size > W:
        raise ValueError(f"size {size}: the {size}x{size} pooling window is larger than the {H}x{W} image")
    return N, C, H // size, W // size


def max_pool2d(X, size: int = 2, *, out=None):
    """(Y, argmax): the maximum of each size×size window, and its position inside the window.
    ``out`` may hold (Y, argmax) output arrays (float32 and int32)."""
    N, C, Ho, Wo = _check_pool(X, size)
    out_Y, out_argmax = outputs(out, ("Y", "argmax"))
    Y = output(out_Y, (N, C, Ho, Wo), "Y")
    argmax = output(out_argmax, (N, C, Ho, Wo), "argmax", dtype=np.int32)
    grid, block = grid_nchw(N, C, Ho, Wo)
    kernels.max_pool_kernel[grid, block](to_device(X), size, Y, argmax)
    return Y, argmax


def avg_pool2d(X, size: int = 2, *, out=None):
    """The mean of each size×size window."""
    N, C, Ho, Wo = _check_pool(X, size)
    Y = output(out, (N, C, Ho, Wo), "out")
    grid, block = grid_nchw(N, C, Ho, Wo)
    kernels.avg_pool_kernel[grid, block](to_device(X), size, Y)
    return Y


def _check_pool_backward(input_shape, dY, size):
    require_shape(input_shape, "input_shape", "[N, C, H, W]")
    require_int(size, "size", 1)
    require(dY, "dY", 4, layout="[N, C, H/size, W/size]")
    N, C, H, W = input_shape
    if tuple(dY.shape) != (N, C, H // size, W // size):
        raise ValueError(f"dY must have shape {(N, C, H // size, W // size)}, not {tuple(dY.shape)}")


def max_pool2d_backward(dY, argmax, input_shape, size: int = 2, *, out=None, check_argmax: bool = True):
    """dX: each window's gradient goes to the element that was its maximum.

    ``check_argmax`` reads argmax back to the host to check that every position lies inside
    its window; that copy waits for the GPU, so a caller passing max_pool2d's own argmax (the
    16.6 model in its training loop) may switch it off."""
    check_argmax = require_bool(check_argmax, "check_argmax")
    _check_pool_backward(input_shape, dY, size)
    require(argmax, "argmax", 4, np.int32, "[N, C, H/size, W/size]")
    if tuple(argmax.shape) != tuple(dY.shape):
        raise ValueError(f"argmax must have dY's shape {tuple(dY.shape)}, not {tuple(argmax.shape)}")
    where = to_host(argmax) if check_argmax else None  # a position outside the window would send the gradient nowhere
    if where is not None and (where.min() < 0 or where.max() >= size * size):
        raise ValueError(f"argmax must hold positions inside a {size}x{size} window, 0..{size * size - 1}, "
                         f"found {where.min()}..{where.max()} (is it max_pool2d's argmax for this size?)")
    dX = output(out, tuple(input_shape), "out")
    grid, block = grid_nchw(*input_shape)
    kernels.max_pool_backward_kernel[grid, block](to_device(dY), to_device(argmax), size, dX)
    return dX


def avg_pool2d_backward(dY, input_shape, size: int = 2, *, out=None):
    """dX: each window's gradient shared equally by its size² elements."""
    _check_pool_backward(input_shape, dY, size)
    dX = output(out, tuple(input_shape), "out")
    grid, block = grid_nchw(*input_shape)
    kernels.avg_pool_backward_kernel[grid, block](to_device(dY), size, dX)
    return dX
