"""16.3 assignment: the checks of the direct convolution, one thread per output (version 1), and
of the shared-memory tiled convolution, with one and with several output channels per block
(``assignments/source/16_3_tiled_conv``).

The tiled kernels are checked on what the output cannot show: the tracer runs them on the
simulator with shared memory filled with NaN (a halo that was never loaded shows up as NaN in
Y), and its record is checked for races (a missing barrier), divergent barriers (a barrier
inside a branch), and for the number of times a block reads one element of X or W from
global memory: once, if the tile is used for every read.
"""

from __future__ import annotations

import numpy as np
from numba import float32

from gpulib import reference
from gpulib.arrays import blocks
from gpulib.env import cuda, sized
from gpulib.grading import core
from gpulib.shapes import output_shape

BLOCK = (16, 16)  # version 1
TILE = 8          # the tiled kernels: a block computes a TILE×TILE patch of one output image
R = S = 3         # their filter size (a compile-time constant: it sizes the shared tile)
IN_TILE = TILE + R - 1  # the input tile's edge, halo included; a plain constant, as a shared array's shape must be
KB = 4            # output channels per block in the last exercise


# -- launches


def run_direct(kernel, X, W, padding, stride, trace=False):
    """Version 1: one thread per Y[n, k, y, x]; blockIdx.z = n·K + k."""
    N, K, Ho, Wo = output_shape(X.shape, W.shape, padding, stride)
    grid = (blocks(Wo, BLOCK[0]), blocks(Ho, BLOCK[1]), N * K)
    return core.run(kernel, grid, BLOCK, {"X": X, "W": W}, {"Y": (N, K, Ho, Wo)}, (padding, stride), trace, "conv_direct_kernel")


def run_tiled(kernel, X, W, trace=False):
    """Tiled, padding 0, stride 1: block (TILE, TILE) computes Y[n, k, TILE·by:, TILE·bx:]; blockIdx.z = n·K + k."""
    N, K = X.shape[0], W.shape[0]
    Ho, Wo = X.shape[2] - R + 1, X.shape[3] - S + 1
    grid = (blocks(Wo, TILE), blocks(Ho, TILE), N * K)
    return core.run(kernel, grid, (TILE, TILE), {"X": X, "W": W}, {"Y": (N, K, Ho, Wo)}, (), trace, "conv_tiled_kernel")


def run_tiled_channels(kernel, X, W, trace=False):
    """Tiled with KB output channels per block: blockIdx.z = n·ceil(K / KB) + group."""
    N, K = X.shape[0], W.shape[0]
    Ho, Wo = X.shape[2] - R + 1, X.shape[3] - S + 1
    grid = (blocks(Wo, TILE), blocks(Ho, TILE), N * blocks(K, KB))
    return core.run(kernel, grid, (TILE, TILE), {"X": X, "W": W}, {"Y": (N, K, Ho, Wo)}, (), trace,
                    "conv_tiled_channels_kernel")


# -- checks


def _conv_values(Y, X, W, padding, stride, seed, nonfinite=None):
    ref = reference.conv2d(X, W, None, padding, stride)
    scale = float(reference.conv2d_magnitude(X, W, None, padding, stride).max())
    Ho, Wo = ref.shape[2:]
    known = {
        "flipped_filter": (lambda: reference.conv2d(X, W[:, :, ::-1, ::-1], None, padding, stride),
                           "필터를 뒤집어 곱했다 (W[k, c, R-1-r, S-1-s]): 딥러닝의 '합성곱'은 뒤집지 않는 상관(correlation)이다."),
    }
    if stride > 1:
        known["no_stride"] = (lambda: reference.conv2d(X, W, None, padding, 1)[:, :, :Ho, :Wo],
                              "입력 위치를 y·stride + r이 아니라 y + r로 잡았다: 스트라이드를 곱하지 않았다.")
    core.compare(Y, ref, "Y", seed, scale=scale, known=known, nonfinite=nonfinite)


def check_direct(kernel, hidden: bool = False, seed: int | None = None) -> None:
    """Version 1 with padding and stride on non-square images, N ≠ K."""
    seed = core.check_seed(hidden, seed, 7)
    rng = np.random.default_rng(seed)
    cases = [((1, 2, 7, 19), (3, 2, 3, 2), 1, 2, True), ((2, 3, 9, 13), (5, 3, 3, 3), 1, 1, False),
             ((2, 2, 11, 17), (3, 2, 2, 3), 0, 2, False)]
    if hidden:
        cases = [((1, core.odd_size(rng, 1, 3), core.odd_size(rng, 5, 11), core.odd_size(rng, 17, 19, 16)),
                  (core.odd_size(rng, 2, 5), None, 3, 3), 1, 2, True),
                 ((1, 1, 1, 1), (1, 1, 1, 1), 0, 1, False),
                 (sized((8, 32, 57, 61), (core.odd_size(rng, 2, 3), 2, core.odd_size(rng, 7, 13), 17)),
                  (sized(48, 3), None, 3, 3), 1, 2, False)]
    for x_shape, w_shape, padding, stride, traced in cases:
        w_shape = (w_shape[0], x_shape[1]) + tuple(w_shape[2:])
        X, W = core.values(rng, x_shape), core.values(rng, w_shape)
        out = run_direct(kernel, X, W, padding, stride, trace=traced)
        if traced:
            core.coalesced_writes(out[0], "Y", "conv_direct_kernel", share=0.6)
            core.outputs_per_thread(out[0], "Y", 1, "conv_direct_kernel")
        _conv_values(out[1]["Y"] if traced else out["Y"], X, W, padding, stride, seed)
    core.passed("conv_direct_kernel", seed)


HALO = ("셰어드 타일에서 아무도 쓰지 않은 칸을 읽었다: 추적기는 셰어드 메모리를 NaN으로 채워 두므로 그 값이 Y로 번졌다. "
        "블록의 출력 타일이 TILE×TILE이면 입력 타일은 (TILE + R - 1)×(TILE + S - 1)이다. 가장자리(halo)를 한 칸 덜 올리지 "
        "않았는지, 이미지 밖의 칸을 건너뛰고도 그 칸을 읽지 않는지 보라.")


def _tiled_shapes(hidden, rng, channels):
    """(N, C, H, W, K): images that are not a multiple of the tile, K not a multiple of KB."""
    if not hidden:
        return [(1, 2, 13, 11, 5 if channels else 2), (2, 3, 19, 12, 6 if channels else 3)]
    return [(1, 1, 3, 3, 1),
            (core.odd_size(rng, 1, 2), core.odd_size(rng, 1, 3), core.odd_size(rng, 11, 13), core.odd_size(rng, 11, 19, 8),
             core.odd_size(rng, 5, 7, KB) if channels else core.odd_size(rng, 1, 3)),
            sized((8, 32, 59, 67, 61), (1, 2, core.odd_size(rng, 5, 13, 8), core.odd_size(rng, 17, 23, 8), 7 if channels else 2))]


def _check_tiled(kernel, runner, name, hidden, seed, channels):
    rng = np.random.default_rng(seed)
    for i, (N, C, H, Wd, K) in enumerate(_tiled_shapes(hidden, rng, channels)):
        X, W = core.values(rng, (N, C, H, Wd)), core.values(rng, (K, C, R, S))
        if i == 0:  # traced: the structure
            t, out = runner(kernel, X, W, trace=True)
            core.barriers_and_races(t, name)
            core.outputs_per_thread(t, "Y", KB if channels else 1, name)
            core.shared_loads_spread(t, name)
            _conv_values(out["Y"], X, W, 0, 1, seed, nonfinite=("halo", HALO))
            core.global_reads_per_block(t, "X", 1, name, "입력 타일을 셰어드 메모리에 한 번 올렸으면 계산은 타일에서 읽어야 "
                                        "한다. 셰어드 배열을 만들고도 전역 X에서 읽는 곳이 남아 있거나, 같은 타일을 여러 번 올린다.")
            if channels:
                core.global_reads_per_block(t, "W", 1, name, f"블록이 맡은 출력 채널 {KB}개의 필터 조각 W[k, c, :, :]을 채널 c마다 "
                                            "셰어드 메모리에 한 번 올리고, 곱셈은 거기서 읽어야 한다.")
        else:
            _conv_values(runner(kernel, X, W)["Y"], X, W, 0, 1, seed)
    core.passed(name, seed)


@core.remembered
def check_tiled(kernel, hidden: bool = False, seed: int | None = None) -> None:
    """The tiled convolution: values, no race, no divergent barrier, X read once per block."""
    seed = core.check_seed(hidden, seed, 8)
    _check_tiled(kernel, run_tiled, "conv_tiled_kernel", hidden, seed, channels=False)


def check_tiled_channels(kernel, hidden: bool = False, seed: int | None = None) -> None:
    """KB output channels per block: X and W each read at most once per block."""
    seed = core.check_seed(hidden, seed, 9)
    _check_tiled(kernel, run_tiled_channels, "conv_tiled_channels_kernel", hidden, seed, channels=True)


# -- speed (on a GPU)


@cuda.jit
def reference_tiled_kernel(X, W, Y):
    """The instructor's tiled convolution, the speed check's yardstick: per input channel the
    block loads its (TILE + 2)² tile together, then each thread sums its 3×3 from shared memory."""
    tile = cuda.shared.array((IN_TILE, IN_TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x0, y0 = cuda.blockIdx.x * TILE, cuda.blockIdx.y * TILE
    K = W.shape[0]
    n, k = cuda.blockIdx.z // K, cuda.blockIdx.z % K
    acc = float32(0.0)
    for c in range(X.shape[1]):
        for i in range(ty * TILE + tx, IN_TILE * IN_TILE, TILE * TILE):
            h, w = y0 + i // IN_TILE, x0 + i % IN_TILE
            if h < X.shape[2] and w < X.shape[3]:
                tile[i // IN_TILE, i % IN_TILE] = X[n, c, h, w]
        cuda.syncthreads()
        if y0 + ty < Y.shape[2] and x0 + tx < Y.shape[3]:
            for r in range(R):
                for s in range(S):
                    acc += W[k, c, r, s] * tile[ty + r, tx + s]
        cuda.syncthreads()
    if y0 + ty < Y.shape[2] and x0 + tx < Y.shape[3]:
        Y[n, k, y0 + ty, x0 + tx] = acc


SPEED_LAYER = (8, 64, 58, 58, 64)  # N, C, H, W, K: Y is 8x64x56x56, about a millisecond on one GPU


def check_tiled_speed(kernel, points: float = 2, seed: int | None = None) -> float:
    """Graded on a GPU: the tiled convolution's time on a 16.3-sized layer against
    ``reference_tiled_kernel`` in the same run (``core.speed_points``); its values are checked on
    fresh inputs after the timed runs. On the simulator: skipped, no points lost."""
    seed = core.new_seed(seed)
    N, C, H, Wd, K = SPEED_LAYER
    Ho, Wo = H - R + 1, Wd - S + 1

    def make_inputs(rng):
        return {"X": core.values(rng, (N, C, H, Wd)), "W": core.values(rng, (K, C, R, S))}

    def check(out, given):
        _conv_values(out["Y"], given["X"], given["W"], 0, 1, seed)

    return core.speed_points(kernel, "gpulib.grading.direct_conv:reference_tiled_kernel",
                             (blocks(Wo, TILE), blocks(Ho, TILE), N * K), (TILE, TILE), make_inputs,
                             {"Y": ((N, K, Ho, Wo), np.float32)}, (), check, points, seed, "conv_tiled_kernel",
                             correct=check_tiled)
