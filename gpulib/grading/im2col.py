"""16.4 assignment: the checks of the im2col kernel (padding, a batch, coalesced writes), of
cublasSgemm's argument order through the column-major stand-in, of a tiled SGEMM with register
blocking (each operand read once per block, a thread's shared reads TM + TN per k, graded on
speed on a GPU), of an implicit GEMM that gathers its B tile from X into shared memory and
never allocates X_col, and of col2im as a gather (optional: the adjoint test, no atomics)
(``assignments/source/16_4_im2col``).
"""

from __future__ import annotations

import numpy as np
from numba import float32

from gpulib import reference
from gpulib.arrays import blocks
from gpulib.env import cuda, sized
from gpulib.gemm import colmajor
from gpulib.grading import core
from gpulib.grading.core import Mistake
from gpulib.shapes import conv_output_size, output_shape

THREADS = 256
GEMM_BLOCK = (16, 16)  # (T, T)
T = 16  # the implicit GEMM's tile: a block computes a T×T tile of Y_mat, q taken T at a time
# The tiled SGEMM: a block computes a BM×BN tile of C, K taken BK at a time; each of its
# (BN/TN)×(BM/TM) = 16×16 threads computes TM×TN outputs.
BM, BN, BK, TM, TN = 64, 64, 8, 4, 4


def _out_size(X_shape, R, S, padding, stride):
    return conv_output_size(X_shape[2], R, padding, stride), conv_output_size(X_shape[3], S, padding, stride)


# -- launches


def run_im2col(kernel, X, R, S, padding, stride, trace=False):
    """One thread per X_col element, a 1-D grid of 256-thread blocks over all C·R·S·N·H'·W' of them."""
    N, C = X.shape[:2]
    Ho, Wo = _out_size(X.shape, R, S, padding, stride)
    shape = (C * R * S, N * Ho * Wo)
    return core.run(kernel, blocks(shape[0] * shape[1], THREADS), THREADS, {"X": X}, {"X_col": shape},
                    (R, S, padding, stride, Ho, Wo), trace, "im2col_kernel")


def run_col2im(kernel, X_col, X_shape, R, S, padding, stride, trace=False):
    """One thread per dX element, a 1-D grid of 256-thread blocks over N·C·H·W."""
    Ho, Wo = _out_size(X_shape, R, S, padding, stride)
    return core.run(kernel, blocks(int(np.prod(X_shape)), THREADS), THREADS, {"X_col": X_col}, {"dX": tuple(X_shape)},
                    (R, S, padding, stride, Ho, Wo), trace, "col2im_kernel")


def implicit_gemm_grid(K: int, columns: int):
    """The launch of the implicit GEMM: one thread per Y_mat[k, j], threadIdx.x walking j."""
    return (blocks(columns, GEMM_BLOCK[0]), blocks(K, GEMM_BLOCK[1])), GEMM_BLOCK


# -- im2col


def check_im2col(kernel, hidden: bool = False, seed: int | None = None) -> None:
    """X_col with padding, stride and a batch; neighbouring threads write neighbouring columns."""
    seed = core.check_seed(hidden, seed, 10)
    rng = np.random.default_rng(seed)
    cases = [((2, 2, 5, 7), 3, 2, 1, 1), ((3, 2, 9, 11), 3, 3, 1, 2)]
    if hidden:
        cases = [((core.odd_size(rng, 2, 3), core.odd_size(rng, 1, 3), core.odd_size(rng, 3, 7), core.odd_size(rng, 5, 11)),
                  3, 2, 1, 1), ((1, 1, 1, 1), 1, 1, 0, 1),
                 (sized((8, 32, 57, 61), (3, 2, 9, 11)), 3, 3, 1, 2)]
    for i, (shape, R, S, padding, stride) in enumerate(cases):
        X = core.values(rng, shape)
        if i == 0:
            t, out = run_im2col(kernel, X, R, S, padding, stride, trace=True)
            core.coalesced_writes(t, "X_col", "im2col_kernel")
            core.outputs_per_thread(t, "X_col", 1, "im2col_kernel")
        else:
            out = run_im2col(kernel, X, R, S, padding, stride)
        core.compare(out["X_col"], reference.im2col(X, R, S, padding, stride), "X_col", seed, rtol=1e-7, scale=1.0, known={
            "batch": (lambda: reference.im2col(np.repeat(X[:1], shape[0], axis=0), R, S, padding, stride),
                      "모든 열이 첫 이미지(n = 0)에서 왔다: 열 번호 j = (n·H' + y)·W' + x에서 n을 풀지 않았다."),
        }, hint="패딩 칸(이미지 밖)은 0이다.")
    core.passed("im2col_kernel", seed)


# -- cublasSgemm's argument order


def padded(rng, rows, cols, extra):
    """A row-major rows×cols matrix inside a flat buffer whose rows are cols + extra long (the
    rest is NaN, so reading it shows); returns (buffer, leading dimension)."""
    ld = cols + extra
    buf = np.full(rows * ld, np.nan, np.float32)
    buf.reshape(rows, ld)[:, :cols] = core.values(rng, (rows, cols))
    return buf, ld


def check_gemm_call(gemm_rowmajor, hidden: bool = False, seed: int | None = None) -> None:
    """Y_mat = W_mat · X_col (row-major, padded leading dimensions) by one column-major sgemm."""
    seed = core.check_seed(hidden, seed, 11)
    rng = np.random.default_rng(seed)
    shapes = [(3, 5, 7, 2, 3, 1)] if not hidden else [
        (core.odd_size(rng, 2, 7), core.odd_size(rng, 11, 17), core.odd_size(rng, 19, 29), 1, 2, 3), (1, 1, 1, 1, 1, 1)]
    for K, CRS, NP, ew, ex, ey in shapes:
        W_buf, ld_w = padded(rng, K, CRS, ew)
        X_buf, ld_x = padded(rng, CRS, NP, ex)
        Y_buf = np.full(K * (NP + ey), 7.0, np.float32)  # the padding of Y must be left as it is
        ld_y = NP + ey
        try:
            core.called(gemm_rowmajor, W_buf, ld_w, X_buf, ld_x, Y_buf, ld_y, K, CRS, NP, what="gemm_rowmajor", out_args=(4,))
        except Mistake as m:
            if m.kind != "error":
                raise
            raise Mistake("sgemm_arguments", f"sgemm이 인자를 거부했다: {m}. cuBLAS의 눈에 행 우선 X_col [C·R·S, N·H'·W']는 "
                                             f"열 우선 X_colᵀ [N·H'·W', C·R·S]이고 그 leading dimension은 행 우선 행의 길이다.") from None
        _one_call_on_the_buffers((W_buf, ld_w, X_buf, ld_x, Y_buf, ld_y), K, NP, seed)
        W = W_buf.reshape(K, ld_w)[:, :CRS].astype(np.float64)
        X = X_buf.reshape(CRS, ld_x)[:, :NP].astype(np.float64)
        Y = Y_buf.reshape(K, ld_y)
        if not np.all(Y[:, NP:] == 7.0):
            raise Mistake("leading_dimension", f"Y의 패딩 칸(각 행의 {NP}번째 열 뒤)을 덮어썼다{core.where(seed)}: ldc가 "
                                               f"행 우선 Y의 행 길이 {ld_y}가 아니다.")
        core.compare(Y[:, :NP], W @ X, "Y_mat", seed, scale=float((np.abs(W) @ np.abs(X)).max()), known={
            "operand_order": (lambda: _sgemm_result(("N", "N", K, NP, CRS, 1.0, W_buf, ld_w, X_buf, ld_x, 0.0), K, NP, ld_y),
                              "행 우선의 식 Y = W·X를 그대로 넘겼다 (첫 피연산자 W, m = K). cuBLAS는 버퍼를 열 우선으로 "
                                       "읽으므로 그 호출은 다른 곱을 계산한다."),
            "beta": (W @ X + 7.0, "Y_buf에 원래 있던 값이 더해졌다: beta = 0이어야 한다 (C ← α·A·B + β·C)."),
        }, hint="열 우선으로 보면 Y_matᵀ = X_colᵀ · W_matᵀ다: 첫 피연산자가 X_col, m = N·H'·W', n = K, k = C·R·S.",
            nonfinite=("leading_dimension", "NaN이 나왔다: 행렬 사이의 패딩 칸(NaN)을 읽었다. lda/ldb가 버퍼의 행 길이(패딩 포함)와 "
                                            "다르다. 패딩된 행렬의 leading dimension은 열 수가 아니라 행의 실제 길이다."))
    core.passed("gemm_rowmajor", seed)


def _one_call_on_the_buffers(given, K, NP, seed):
    """The statement: one sgemm call, on the buffers as they were given, the answer coming from
    its arguments alone. The call the function made is made again here, on fresh copies of the
    buffers: it must write the Y the function left (copies, transposes or a product computed
    by hand and passed through sgemm get no points)."""
    calls = core.OBSERVED["sgemm"]
    if len(calls) != 1:
        raise Mistake("sgemm_calls", f"sgemm을 {len(calls)}번 불렀다{core.where(seed)}. 행 우선 곱 하나는 열 우선 sgemm 한 번이다: "
                                     f"인자의 순서와 leading dimension만 고르면 된다.")
    call = calls[0]
    buffers = [i for i, a in enumerate(call) if isinstance(a, tuple) and a and a[0] in ("arg", "array")]
    if len(call) != 13 or buffers != [6, 8, 11] or any(call[i][0] != "arg" for i in buffers):
        raise Mistake("copied_operands", f"sgemm에 넘긴 A, B, C가 gemm_rowmajor가 받은 버퍼 그대로가 아니다{core.where(seed)}: "
                                         f"복사하거나 전치한 배열을 만들었다. 이 문제는 복사 없이 인자(m, n, k, 피연산자의 순서, "
                                         f"lda/ldb/ldc)를 골라 같은 곱을 얻는 것이다.")
    W_buf, ld_w, X_buf, ld_x, Y_buf, ld_y = given
    fresh = {0: W_buf, 2: X_buf, 4: np.full_like(Y_buf, 7.0)}
    args = [fresh[a[1]].copy() if isinstance(a, tuple) and a[1] in fresh else a for a in call]
    if any(isinstance(a, tuple) for a in args):
        raise Mistake("copied_operands", f"sgemm의 피연산자가 받은 버퍼가 아니다 (스칼라 인자의 자리에 배열이 있다){core.where(seed)}.")
    replay = args[11]
    try:
        colmajor.sgemm(*args)
    except ValueError as exc:
        raise Mistake("sgemm_arguments", f"sgemm이 인자를 거부했다: {exc}") from None
    if not np.array_equal(replay, Y_buf, equal_nan=True):
        raise Mistake("not_from_sgemm", f"Y_buf가 sgemm 호출이 쓴 값과 다르다{core.where(seed)}: 답을 sgemm 밖에서 만들거나 고쳤다. "
                                        f"Y_mat은 sgemm 호출 한 번이 써야 한다.")


def _sgemm_result(args, K, NP, ld_y):
    """Y_mat as a student would read it after sgemm(*args, Y, ld_y) (None where the call is refused)."""
    Y = np.zeros(K * ld_y, np.float32)
    try:
        colmajor.sgemm(*args, Y, ld_y)
    except ValueError:
        return None
    return Y.reshape(K, ld_y)[:, :NP]


# -- a tiled SGEMM with register blocking


def sgemm_grid(M: int, N: int):
    """The launch of the tiled SGEMM: a block per BM×BN tile of C (x walking its columns),
    (BN/TN, BM/TM) = (16, 16) threads."""
    return (blocks(N, BN), blocks(M, BM)), (BN // TN, BM // TM)


def run_sgemm(kernel, A, B, trace=False):
    """C = A·B through ``kernel(A, B, C)`` on ``sgemm_grid``."""
    grid, block = sgemm_grid(A.shape[0], B.shape[1])
    return core.run(kernel, grid, block, {"A": A, "B": B}, {"C": (A.shape[0], B.shape[1])}, (), trace, "sgemm_kernel")


def _sgemm_values(C, A, B, seed):
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    M, K = A.shape
    core.compare(C, A64 @ B64, "C", seed, scale=float((np.abs(A64) @ np.abs(B64)).max()), known={
        "k_edge": (lambda: A64[:, :K // BK * BK] @ B64[:K // BK * BK] if K % BK else None,
                   f"K = {K}의 마지막 조각(BK = {BK}의 배수를 넘는 {K % BK}칸)이 빠졌다: 타일 루프가 K를 BK로 내림해 나누었다. "
                   f"타일 수는 올림 나눗셈이고, 범위 밖 칸은 0으로 올린다."),
    }, hint="타일에 올릴 때 행렬 밖의 칸은 0이다 (M, N, K가 타일의 배수가 아니다).")


def _sgemm_shapes(hidden, rng):
    """(M, N, K): none a multiple of its tile edge, so every edge is tried."""
    if not hidden:
        return [(70, 100, 20), (67, 65, 13)]
    return [(core.odd_size(rng, 65, 89), core.odd_size(rng, 65, 89), core.odd_size(rng, 9, 23, BK)), (1, 1, 1),
            sized((1000, 1200, 700), (core.odd_size(rng, 129, 200), core.odd_size(rng, 65, 70), core.odd_size(rng, 17, 23)))]


@core.remembered
def check_sgemm(kernel, hidden: bool = False, seed: int | None = None) -> None:
    """The tiled SGEMM: values on edges in M, N and K; traced: no race, every thread TM·TN
    outputs, tiles loaded by the block together, each element of A and B read once per block,
    and a thread's shared-memory reads TM + TN per k (register blocking)."""
    seed = core.check_seed(hidden, seed, 14)
    rng = np.random.default_rng(seed)
    for i, (M, N, K) in enumerate(_sgemm_shapes(hidden, rng)):
        A, B = core.values(rng, (M, K)), core.values(rng, (K, N))
        if i == 0:  # traced: the structure (the hidden check too: a cheat must not pass it)
            t, out = run_sgemm(kernel, A, B, trace=True)
            core.barriers_and_races(t, "sgemm_kernel")
            _sgemm_values(out["C"], A, B, seed)
            core.outputs_per_thread(t, "C", TM * TN, "sgemm_kernel")
            core.shared_loads_spread(t, "sgemm_kernel")
            for name in ("A", "B"):
                core.global_reads_per_block(t, name, 1, "sgemm_kernel", f"블록은 {name}의 타일을 셰어드 메모리에 한 번 올리고 "
                                            f"계산은 타일에서 읽는다. 스레드가 전역 {name}에서 바로 읽는 곳이 남아 있다.")
            steps = -(-K // BK) * BK
            core.shared_reads_per_thread(t, (TM + TN) * steps * 3 // 2, "sgemm_kernel",
                                         f"K의 한 칸(k)마다 스레드는 A 타일에서 자기 행 {TM}개, B 타일에서 자기 열 {TN}개를 "
                                         f"레지스터로 읽고(모두 {TM + TN}개, 여기서는 k {steps}칸에 {(TM + TN) * steps}번), 그 "
                                         f"{TM}×{TN}개 곱을 레지스터에서 더한다. 곱마다 셰어드를 두 번 읽으면 "
                                         f"{2 * TM * TN * steps}번이다: 그것이 레지스터 블로킹이 없애는 읽기다.")
        else:
            _sgemm_values(run_sgemm(kernel, A, B)["C"], A, B, seed)
    core.passed("sgemm_kernel", seed)


@cuda.jit
def reference_sgemm_kernel(A, B, C):
    """The instructor's tiled SGEMM, the speed check's yardstick: per BK-slice of K the block's
    256 threads load the A tile (transposed) and the B tile two elements each, then each thread
    multiplies TM values of A by TN values of B held in registers; thread (tx, ty) owns the
    rows ty + 16·i and the columns tx + 16·j of the block's tile (conflict-free, coalesced)."""
    As = cuda.shared.array((BK, BM), float32)
    Bs = cuda.shared.array((BK, BN), float32)
    acc = cuda.local.array((TM, TN), float32)
    a = cuda.local.array(TM, float32)
    b = cuda.local.array(TN, float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    tid = ty * (BN // TN) + tx
    row0, col0 = cuda.blockIdx.y * BM, cuda.blockIdx.x * BN
    M, K = A.shape
    N = B.shape[1]
    for i in range(TM):
        for j in range(TN):
            acc[i, j] = 0.0
    for k0 in range(0, K, BK):
        for e in range(tid, BM * BK, 256):
            i, kk = e // BK, e % BK
            As[kk, i] = A[row0 + i, k0 + kk] if row0 + i < M and k0 + kk < K else float32(0.0)
        for e in range(tid, BK * BN, 256):
            kk, j = e // BN, e % BN
            Bs[kk, j] = B[k0 + kk, col0 + j] if k0 + kk < K and col0 + j < N else float32(0.0)
        cuda.syncthreads()
        for kk in range(BK):
            for i in range(TM):
                a[i] = As[kk, ty + 16 * i]
            for j in range(TN):
                b[j] = Bs[kk, tx + 16 * j]
            for i in range(TM):
                for j in range(TN):
                    acc[i, j] += a[i] * b[j]
        cuda.syncthreads()
    for i in range(TM):
        for j in range(TN):
            if row0 + ty + 16 * i < M and col0 + tx + 16 * j < N:
                C[row0 + ty + 16 * i, col0 + tx + 16 * j] = acc[i, j]


SPEED_GEMM = (2048, 2048, 2048)  # M, N, K: 17 GFLOP, a few milliseconds for a Numba kernel on one GPU


def check_sgemm_speed(kernel, points: float = 3, seed: int | None = None) -> float:
    """Graded on a GPU: the tiled SGEMM's time on a 2048³ product against ``reference_sgemm_kernel``
    in the same run (``core.speed_points``); its values are checked on fresh inputs after the
    timed runs. On the simulator: skipped, no points lost."""
    seed = core.new_seed(seed)
    M, N, K = SPEED_GEMM

    def make_inputs(rng):
        return {"A": core.values(rng, (M, K)), "B": core.values(rng, (K, N))}

    def check(out, given):
        _sgemm_values(out["C"], given["A"], given["B"], seed)

    grid, block = sgemm_grid(M, N)
    return core.speed_points(kernel, "gpulib.grading.im2col:reference_sgemm_kernel", grid, block, make_inputs,
                             {"C": ((M, N), np.float32)}, (), check, points, seed, "sgemm_kernel", correct=check_sgemm)


# -- col2im


def check_col2im(kernel, hidden: bool = False, seed: int | None = None) -> None:
    """col2im as a gather: the adjoint of im2col (⟨im2col x, y⟩ = ⟨x, col2im y⟩), each dX element
    written once by one thread, no atomics."""
    seed = core.check_seed(hidden, seed, 12)
    rng = np.random.default_rng(seed)
    cases = [((2, 2, 5, 7), 3, 2, 1, 2), ((1, 3, 8, 9), 3, 3, 1, 1)]
    if hidden:
        cases = [((core.odd_size(rng, 1, 3), core.odd_size(rng, 1, 3), core.odd_size(rng, 5, 7), core.odd_size(rng, 5, 11)),
                  3, int(rng.choice([2, 3])), 1, 2), ((1, 1, 1, 1), 1, 1, 0, 1),
                 (sized((8, 32, 57, 61), (2, 3, 9, 11)), 3, 3, 1, 2)]
    for i, (shape, R, S, padding, stride) in enumerate(cases):
        Ho, Wo = _out_size(shape, R, S, padding, stride)
        Y_col = core.values(rng, (shape[1] * R * S, shape[0] * Ho * Wo))
        if i == 0:
            t, out = run_col2im(kernel, Y_col, shape, R, S, padding, stride, trace=True)
            core.no_atomics(t, "dX", "col2im_kernel")
            core.written_once(t, "dX", "col2im_kernel")
            core.outputs_per_thread(t, "dX", 1, "col2im_kernel")
        else:
            out = run_col2im(kernel, Y_col, shape, R, S, padding, stride)
        dX = out["dX"]
        core.compare(dX, dX, "dX", seed)  # every element written, finite where it should be
        x = core.values(rng, shape).astype(np.float64)
        lhs = float((reference.im2col(x, R, S, padding, stride) * Y_col).sum())
        rhs = float((x * dX.astype(np.float64)).sum())
        size = float((np.abs(reference.im2col(x, R, S, padding, stride)) * np.abs(Y_col)).sum())
        if abs(lhs - rhs) > 1e-5 * size:
            ref = reference.col2im(Y_col, shape, R, S, padding, stride)
            worst = tuple(int(j) for j in np.unravel_index(int(np.argmax(np.abs(dX - ref))), ref.shape))
            raise Mistake("adjoint", f"⟨im2col(x), y⟩ = {lhs:.6g}인데 ⟨x, col2im(y)⟩ = {rhs:.6g}다{core.where(seed)}. col2im은 "
                                     f"im2col의 수반(adjoint)이어야 한다: X_col의 칸마다 그 칸이 복사해 온 X 원소로 더해져야 "
                                     f"한다. 예: dX{list(worst)} = {dX[worst]:.6g}, 기준값 {ref[worst]:.6g} (padding {padding}, "
                                     f"stride {stride}). (h + padding - r)가 stride로 나누어떨어지는지, 몫이 범위 안인지 보라.")
        core.compare(dX, reference.col2im(Y_col, shape, R, S, padding, stride), "dX", seed,
                     scale=float(reference.col2im(np.abs(Y_col), shape, R, S, padding, stride).max()))
    core.passed("col2im_kernel (수반 검사)", seed)


# -- implicit GEMM


def run_implicit_gemm(kernel, X, W, padding, stride, trace=False):
    """The kernel alone (as conv2d_implicit launches it): one thread per Y_mat[k, j]."""
    N, K, Ho, Wo = output_shape(X.shape, W.shape, padding, stride)
    grid, block = implicit_gemm_grid(K, N * Ho * Wo)
    return core.run(kernel, grid, block, {"X": X, "W": W}, {"Y": (N, K, Ho, Wo)}, (padding, stride), trace,
                    "implicit_gemm_kernel")


def check_implicit_gemm(kernel, conv2d_implicit, hidden: bool = False, seed: int | None = None) -> None:
    """The convolution as Y_mat = W_mat · X_col with X_col never in memory: the kernel traced on
    a small layer (no race, the W and X_col tiles loaded by the block together, each X_col entry
    of the block's tile gathered from X once: at most R·S reads of an X element per block, one
    of a W element), then conv2d_implicit with no allocation as large as half of X_col."""
    seed = core.check_seed(hidden, seed, 13)
    rng = np.random.default_rng(seed)
    X, W = core.values(rng, (2, 3, 5, 7)), core.values(rng, (20, 3, 3, 2))
    t, out = run_implicit_gemm(kernel, X, W, 1, 2, trace=True)
    core.barriers_and_races(t, "implicit_gemm_kernel")
    core.compare(out["Y"], reference.conv2d(X, W, None, 1, 2), "Y", seed,
                 scale=float(reference.conv2d_magnitude(X, W, None, 1, 2).max()),
                 hint="q의 조각이 CRS의 끝을 넘는 칸은 W 타일과 X_col 타일 모두 0으로 올린다.")
    core.coalesced_writes(t, "Y", "implicit_gemm_kernel", share=0.6)
    core.outputs_per_thread(t, "Y", 1, "implicit_gemm_kernel")
    core.shared_loads_spread(t, "implicit_gemm_kernel")
    R, S = W.shape[2:]
    core.global_reads_per_block(t, "W", 1, "implicit_gemm_kernel",
                                f"블록은 W_mat의 {T}×{T} 타일을 셰어드 메모리에 한 번 올리고, 곱은 타일에서 읽는다.")
    core.global_reads_per_block(t, "X", R * S, "implicit_gemm_kernel",
                                f"블록은 X_col 타일의 칸 [q, j]를 X에서 한 번씩 모아(gather) 셰어드 메모리에 올린다. X의 한 원소는 "
                                f"블록의 타일에서 많아야 R·S = {R * S}칸에 나타난다. 더 많이 읽었다면 스레드가 타일 대신 X에서 "
                                f"바로 읽는다 (같은 X_col 칸을 블록의 {T}개 k 행이 저마다 읽는다).")
    cases = [((2, 8, 9, 11), (3, 8, 3, 3), 1, 1), ((1, 8, 13, 12), (5, 8, 3, 2), 1, 2)]
    if hidden:
        cases = [((core.odd_size(rng, 1, 3), 8, core.odd_size(rng, 7, 13), core.odd_size(rng, 7, 13)),
                  (core.odd_size(rng, 2, 5), 8, 3, int(rng.choice([2, 3]))), 1, int(rng.choice([1, 2]))),
                 ((1, 1, 1, 1), (1, 1, 1, 1), 0, 1),
                 (sized((8, 64, 57, 61), (2, 8, 9, 11)), (sized(64, 3), sized(64, 8), 3, 3), 1, 1)]
    for shape, w_shape, padding, stride in cases:
        X, W = core.values(rng, shape), core.values(rng, w_shape)
        Ho, Wo = output_shape(shape, w_shape, padding, stride)[2:]
        x_col_bytes = 4 * shape[1] * w_shape[2] * w_shape[3] * shape[0] * Ho * Wo
        with core.allocations() as seen:
            Y = core.called(conv2d_implicit, X, W, padding, stride, what="conv2d_implicit")
        largest = seen["largest"]
        legit = 4 * max(np.prod(shape), np.prod(w_shape), shape[0] * w_shape[0] * Ho * Wo)  # X, W or Y
        meaningful = x_col_bytes >= max(2 * legit, 4096)  # X_col much larger than X, W, Y and the simulator's own arrays
        total_legit = 3 * 4 * int(np.prod(shape) + np.prod(w_shape) + shape[0] * w_shape[0] * Ho * Wo)  # copies of X, W, Y
        if meaningful and seen["total"] > total_legit and seen["total"] >= x_col_bytes // 2:
            raise Mistake("allocation", f"conv2d_implicit가 모두 {seen['total']} 바이트를 할당했다 (가장 큰 것: {seen['where']}). "
                                        f"X, W, Y를 합한 것의 두 배보다 많고, X_col({x_col_bytes} 바이트)의 절반이 넘는다"
                                        f"{core.where(seed)}: X_col을 조각조각(채널마다, 행마다) 만들어도 X_col이다. "
                                        f"X_col[q, j]는 커널 안에서 X에서 바로 읽어라.")
        if meaningful and largest > legit and largest >= x_col_bytes // 2:
            raise Mistake("allocation", f"conv2d_implicit가 {seen['where']}로 {largest} 바이트를 할당했다. X_col은 "
                                        f"{x_col_bytes} 바이트다{core.where(seed)}. "
                                        f"implicit GEMM의 요점은 X_col을 메모리에 만들지 않는 것이다: X_col[q, j]는 필요할 때 "
                                        f"X에서 바로 읽어라 (q → (c, r, s), j → (n, y, x)).")
        core.compare(Y, reference.conv2d(X, W, None, padding, stride), "Y", seed,
                     scale=float(reference.conv2d_magnitude(X, W, None, padding, stride).max()))
    core.passed("conv2d_implicit (X_col 없이)", seed)
