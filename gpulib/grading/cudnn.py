"""16.5 assignment: the checks of the Winograd F(2×2, 3×3) transforms of one tile, of an
auto-tuner that must never pick a fast wrong algorithm, of a dynamic loss scaler, and of a
tensor-core (WMMA) GEMM whose K is not a multiple of 16 (``assignments/source/16_5_cudnn``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from numba.types import float16, float32

from gpulib import reference
from gpulib.conv import winograd
from gpulib.env import cuda, sized
from gpulib.grading import core
from gpulib.grading.core import Mistake
from gpulib.tensorcore import wmma
from gpulib.tensorcore.wmma import AB_DTYPE, AB_FRAGMENT, ACC_FRAGMENT

# -- Winograd


def correlate_tile(d, g):
    """The 2×2 outputs of a 3×3 filter g over a 4×4 tile d (no flip), in float64."""
    return reference.conv2d(np.asarray(d)[None, None], np.asarray(g)[None, None])[0, 0]


def check_winograd_tile(winograd_tile, hidden: bool = False, seed: int | None = None) -> None:
    """Y = Aᵀ[(G g Gᵀ) ⊙ (Bᵀ d B)]A equals the direct 2×2 correlation on random tiles; when it
    does not, the transform that differs from the chapter's is named."""
    seed = core.check_seed(hidden, seed, 14)
    rng = np.random.default_rng(seed)
    for trial in range(20 if hidden else 5):
        d, g = rng.uniform(-1, 1, (4, 4)), rng.uniform(-1, 1, (3, 3))
        result = core.called(winograd_tile, d, g, what="winograd_tile")
        if not (isinstance(result, tuple) and len(result) == 3):
            raise Mistake("shape", f"winograd_tile은 (U, V, Y) 세 배열을 돌려주어야 한다. {type(result).__name__}을 돌려주었다.")
        U, V, Y = (np.asarray(a, np.float64) for a in result)
        want = correlate_tile(d, g)
        if Y.shape == (2, 2) and np.allclose(Y, want, rtol=0, atol=1e-10):
            continue
        if Y.shape == (2, 2) and np.allclose(Y, correlate_tile(d, g[::-1, ::-1]), rtol=0, atol=1e-10):
            raise Mistake("flipped_filter", f"Y가 필터를 뒤집은 합성곱이다{core.where(seed)}. 딥러닝의 합성곱은 상관(correlation)이다: "
                                            f"Y[i, j] = Σ d[i + r, j + s]·g[r, s].")
        if U.shape != (4, 4) or not np.allclose(U, winograd.G @ g @ winograd.G.T, atol=1e-10):
            raise Mistake("filter_transform", f"필터 변환 U = G g Gᵀ가 틀렸다{core.where(seed)}. G는 4×3이고, 가운데 두 행은 "
                                              f"g의 세 탭을 ±로 더한 것의 절반이다. 예: U[0, 0] = {U.flat[0]:.6g}, "
                                              f"기대값 {(winograd.G @ g @ winograd.G.T)[0, 0]:.6g}.")
        if V.shape != (4, 4) or not np.allclose(V, winograd.BT @ d @ winograd.BT.T, atol=1e-10):
            raise Mistake("input_transform", f"입력 변환 V = Bᵀ d B가 틀렸다{core.where(seed)}. Bᵀ의 원소는 0과 ±1뿐이다 (덧셈만 한다).")
        raise Mistake("output_transform", f"U와 V는 맞는데 Y = Aᵀ (U ⊙ V) A가 틀렸다{core.where(seed)}: Y = {np.round(Y, 6).tolist()}, "
                                          f"기대값 {np.round(want, 6).tolist()}. Aᵀ는 2×4다. 곱은 원소별(⊙)이지 행렬 곱이 아니다.")
    _check_given_transforms(winograd_tile, rng, seed, 10 if hidden else 3)
    core.passed("winograd_tile", seed)


def _check_given_transforms(winograd_tile, rng, seed, trials):
    """The statement's rule: the three formulas with the matrices passed in. Rows of G scaled by
    D and rows of Bᵀ by D⁻¹ leave U ⊙ V as it was, Aᵀ scaled by a makes Y a² times the
    correlation: a Y computed by the definition, or from matrices of its own, cannot pass."""
    for _ in range(trials):
        d, g = rng.uniform(-1, 1, (4, 4)), rng.uniform(-1, 1, (3, 3))
        D = np.diag(rng.choice([-2.0, -0.5, 0.5, 2.0, 4.0], 4))
        a = float(rng.choice([-3.0, 2.0, 3.0]))
        BT, G, AT = np.linalg.inv(D) @ winograd.BT, D @ winograd.G, a * winograd.AT
        result = core.called(winograd_tile, d, g, BT, G, AT, what="winograd_tile(d, g, BT, G, AT)")
        if not (isinstance(result, tuple) and len(result) == 3):
            raise Mistake("shape", "winograd_tile(d, g, BT, G, AT)은 (U, V, Y) 세 배열을 돌려주어야 한다.")
        U, V, Y = (np.asarray(x, np.float64) for x in result)
        U_want, V_want = G @ g @ G.T, BT @ d @ BT.T
        if U.shape != (4, 4) or V.shape != (4, 4) or not (np.allclose(U, U_want, atol=1e-9) and np.allclose(V, V_want, atol=1e-9)):
            raise Mistake("ignores_transforms", f"인자로 준 G와 BT로 U = G g Gᵀ, V = Bᵀ d B를 계산하지 않았다{core.where(seed)}: "
                                                f"검사는 G의 행을 D배, Bᵀ의 행을 D⁻¹배 한 행렬(D = {np.diag(D).tolist()})을 넘겼다. "
                                                f"함수 안에서 받은 인자 BT, G, AT를 써라.")
        Y_want = AT @ (U_want * V_want) @ AT.T
        if Y.shape != (2, 2) or not np.allclose(Y, Y_want, atol=1e-9):
            raise Mistake("not_transforms", f"Y가 Aᵀ (U ⊙ V) A가 아니다{core.where(seed)}: 검사는 Aᵀ에 {a:g}를 곱해 넘겼으므로 세 식의 "
                                            f"Y는 상관의 {a * a:g}배여야 한다 (Y = {np.round(Y, 6).tolist()}, 기대값 "
                                            f"{np.round(Y_want, 6).tolist()}). 상관을 정의대로 계산하거나 다른 행렬을 쓰면 "
                                            f"Winograd가 아니다.")


# -- the auto-tuner


@dataclass
class Candidate:
    """One algorithm offered to the auto-tuner: ``run(X, W, out)`` writes Y into ``out``;
    ``supports(X_shape, W_shape)`` is "" or why not; ``seconds`` is what ``timer`` reports."""

    name: str
    run: Callable
    supports: Callable
    seconds: float


def timer(candidate: Candidate, fn) -> float:
    """The auto-tuner's clock in this exercise: runs ``fn`` once and reports the candidate's
    time (fixed, so the check knows the right answer; tests never depend on real time)."""
    fn()
    return candidate.seconds


def _conv(X, W, out):
    out[...] = reference.conv2d(X, W)


def _wrong(X, W, out):
    """One element off: fast, and wrong."""
    _conv(X, W, out)
    out[0, 0, -1, -1] += 0.5


def _lazy(X, W, out):
    """Leaves the last row unwritten (right if the buffer already held Y)."""
    out[..., :-1, :] = reference.conv2d(X, W)[..., :-1, :]


def _nan(X, W, out):
    out[...] = np.nan


def _unsupported(X, W, out):
    raise ValueError("fft: this layer is not supported")


def _everyone(X_shape, W_shape):
    return ""


def _needs_5x5(X_shape, W_shape):
    return "needs a 5x5 filter or larger"


def candidates(rng) -> dict:
    """Correct, wrong, lazy, NaN-producing and unsupported algorithms with random times, in a
    random order but for the lazy one, which comes right after the slower correct one (so a
    reused output buffer holds the right answer when it runs); the fastest correct one is
    "direct" or "gemm" (random), and every wrong one is faster. Module-level functions, so that
    the clean room can send them to its worker."""
    times = np.sort(rng.uniform(1e-4, 1e-2, 6))
    fast_correct = str(rng.choice(["direct", "gemm"]))
    slow_correct = "gemm" if fast_correct == "direct" else "direct"
    made = [Candidate("winograd", _wrong, _everyone, float(times[0])),
            Candidate("fft", _unsupported, _needs_5x5, float(times[0] / 2)),
            Candidate("implicit_gemm", _lazy, _everyone, float(times[1])),
            Candidate("tensor_core", _nan, _everyone, float(times[2])),
            Candidate(fast_correct, _conv, _everyone, float(times[3])),
            Candidate(slow_correct, _conv, _everyone, float(times[5]))]
    names = [made[i].name for i in rng.permutation(len(made)) if made[i].name != "implicit_gemm"]
    names.insert(names.index(slow_correct) + 1, "implicit_gemm")
    by_name = {c.name: c for c in made}
    return {name: by_name[name] for name in names}


def check_autotuner(choose, hidden: bool = False, seed: int | None = None) -> None:
    """``choose(candidates, X, W, reference, timer)`` returns the name of the fastest candidate
    whose output matches the reference, skipping unsupported ones; never a wrong one."""
    seed = core.check_seed(hidden, seed, 15)
    rng = np.random.default_rng(seed)
    for _ in range(3 if hidden else 1):
        X_shape = (1, 2, core.odd_size(rng, 5, 9), core.odd_size(rng, 5, 9))
        X, W = core.values(rng, X_shape), core.values(rng, (2, 2, 3, 3))
        offered = candidates(rng)
        try:
            picked = core.called(choose, offered, X, W, reference.conv2d(X, W), timer, what="choose")
        except Mistake as m:
            if "not supported" in str(m):
                raise Mistake("unsupported", f"지원하지 않는 알고리즘(fft)을 실행해서 예외가 났다{core.where(seed)}. "
                                             f"supports(X.shape, W.shape)가 빈 문자열이 아니면 건너뛰어라.") from None
            raise
        right = min((c for c in offered.values() if c.run is _conv), key=lambda c: c.seconds).name
        if picked == right:
            continue
        why = {"winograd": ("picked_wrong", "한 원소가 틀린 결과를 내는 가장 빠른 알고리즘을 골랐다. 고르기 전에 모든 후보의 출력을 "
                                            "기준값과 비교(validate)해 틀린 것은 버려라."),
               "implicit_gemm": ("picked_unwritten", "마지막 행을 쓰지 않는 알고리즘을 골랐다. 앞 후보의 정답이 남아 있는 출력 버퍼를 "
                                                     "다시 썼기 때문이다. 후보마다 새 출력을 poisoned로 만들어 검증하라."),
               "tensor_core": ("picked_nan", "NaN만 내는 알고리즘을 골랐다. 비교가 NaN을 통과시키지 않는가? (NaN > tol은 False다)"),
               "fft": ("unsupported", "지원하지 않는 알고리즘을 골랐다.")}
        kind, text = why.get(picked, ("not_fastest", f"맞는 후보 가운데 가장 빠른 '{right}' 대신 '{picked}'를 골랐다."))
        raise Mistake(kind, f"{text}{core.where(seed)}")
    core.passed("choose (틀린 알고리즘을 고르지 않음)", seed)


# -- the loss scaler


class ReferenceScaler:
    """What a dynamic loss scaler does (the rule of torch.amp.GradScaler, growth and backoff
    factors 2 and 1/2): the reference of the exercise."""

    def __init__(self, scale: float = 2.0**15, growth_interval: int = 4):
        self.scale, self.growth_interval, self.clean = scale, growth_interval, 0

    def step(self, grads) -> bool:
        if not all(np.isfinite(g).all() for g in grads):
            self.scale /= 2
            self.clean = 0
            return False
        self.clean += 1
        if self.clean == self.growth_interval:
            self.scale *= 2
            self.clean = 0
        return True


def _gradient_stream(rng, steps):
    """Per step: "ok", "inf" or "nan", with runs of clean steps long enough to grow."""
    events = []
    while len(events) < steps:
        events += ["ok"] * int(rng.integers(1, 9)) + [str(rng.choice(["inf", "nan", "ok"]))]
    return events[:steps]


def check_loss_scaler(LossScaler, hidden: bool = False, seed: int | None = None) -> None:
    """``LossScaler(scale, growth_interval).step(grads)`` over a stream of clean and overflowing
    steps: the same decisions and scales as the reference, step by step."""
    seed = core.check_seed(hidden, seed, 16)
    rng = np.random.default_rng(seed)
    streams = [["ok"] * 5 + ["inf", "ok", "ok", "nan", "ok", "ok", "ok", "inf"] + ["ok"] * 6 + ["nan", "nan", "ok"]]
    if hidden:
        streams += [_gradient_stream(rng, 60) for _ in range(3)]
    for events in streams:
        interval = int(rng.integers(2, 5)) if hidden else 3
        student = core.called(LossScaler, 2.0**10, interval, what="LossScaler")
        ref = ReferenceScaler(2.0**10, interval)
        since_overflow = None
        for i, event in enumerate(events):
            grads = [core.values(rng, (3, 4)), core.values(rng, 5)]
            if event != "ok":
                grads[int(rng.integers(0, 2))].flat[0] = np.inf if event == "inf" else np.nan
            expected = ref.step(grads)  # before the student's step, which may zero the gradients of a skipped step
            applied = core.called(student.step, [g.copy() for g in grads], what="LossScaler.step")
            history = f"{i}번째 단계 ({event}; 그때까지 {events[:i + 1]})"
            if bool(applied) != expected:
                if event == "nan":
                    raise Mistake("nan_missed", f"{history}: NaN 그래디언트를 넘쳐난 것으로 보지 않았다. np.isinf만 보면 NaN을 놓친다: "
                                                f"np.isfinite로 inf와 NaN을 함께 보라{core.where(seed)}.")
                if event == "inf":
                    raise Mistake("applied_overflow", f"{history}: 그래디언트에 inf가 있는데 단계를 적용한다고(True) 했다. 그 단계는 "
                                                      f"건너뛰어야(False) 한다{core.where(seed)}.")
                raise Mistake("skipped_clean", f"{history}: 깨끗한 그래디언트인데 단계를 건너뛰었다{core.where(seed)}.")
            if student.scale != ref.scale:
                if event != "ok":
                    kind, text = "no_backoff", "넘쳐난 단계에서 스케일을 절반으로 줄여야 한다"
                elif since_overflow is not None and since_overflow < interval:
                    kind, text = "counter_not_reset", (f"넘쳐난 뒤 깨끗한 단계가 {since_overflow + 1}번뿐인데 스케일을 키웠다: "
                                                       f"넘칠 때 깨끗한 단계의 수를 0으로 되돌려야 한다 (growth_interval = {interval})")
                else:
                    kind, text = "growth", f"깨끗한 단계가 연속 {interval}번이 될 때마다 스케일을 두 배로 (그리고 세기를 0부터 다시)"
                raise Mistake(kind, f"{history}: scale = {student.scale}, 기대값 {ref.scale}. {text}{core.where(seed)}.")
            since_overflow = 0 if event != "ok" else (None if since_overflow is None else since_overflow + 1)
    core.passed("LossScaler", seed)


# -- WMMA with any K

WMMA_TILE = 16


def run_tc_gemm(kernel, A16, B16):
    """C = A·B on the tensor cores: one warp (32 threads) per block, block (bx, by) computes
    C[16·by : +16, 16·bx : +16]. M and N must be multiples of 16; K is anything.

    A and B are views into larger device arrays whose extra columns (A) and rows (B) hold NaN:
    a kernel that reads past K gets NaN there on a GPU (where nothing checks indices) and an
    IndexError on the simulator."""
    M, K = A16.shape
    N = B16.shape[1]
    if M % WMMA_TILE or N % WMMA_TILE:
        raise ValueError(f"M and N must be multiples of 16 in this exercise, not {M} and {N}")
    A_guarded = np.full((M, K + WMMA_TILE), np.nan, np.float16)
    A_guarded[:, :K] = A16
    B_guarded = np.full((K + WMMA_TILE, N), np.nan, np.float16)
    B_guarded[:K] = B16
    A_view = core.GuardedView(A_guarded, (slice(None), slice(0, K)))
    B_view = core.GuardedView(B_guarded, (slice(0, K),))
    return core.run(kernel, (N // WMMA_TILE, M // WMMA_TILE), 32, {"A": A_view, "B": B_view}, {"C": (M, N)}, (), False,
                    "tc_gemm_kernel")


@core.remembered
def check_tc_gemm(kernel, hidden: bool = False, seed: int | None = None) -> None:
    """The fp16 product summed in fp32, for K = 1, primes and other non-multiples of 16."""
    seed = core.check_seed(hidden, seed, 17)
    rng = np.random.default_rng(seed)
    shapes = [(32, 37, 16), (16, 16, 48)]
    if hidden:
        shapes = [(16, 1, 16), (32, core.odd_size(rng, 17, 31, 16), 32), sized((512, 1000, 768), (16, 53, 32))]
    for M, K, N in shapes:
        A, B = core.values(rng, (M, K)).astype(np.float16), core.values(rng, (K, N)).astype(np.float16)
        C = run_tc_gemm(kernel, A, B)["C"]
        _fragments_from_shared(kernel, seed)
        A64, B64 = A.astype(np.float64), B.astype(np.float64)
        ref = A64 @ B64
        full = K // WMMA_TILE * WMMA_TILE
        core.compare(C, ref, "C", seed, rtol=1e-5, scale=float((np.abs(A64) @ np.abs(B64)).max()), known={
            "k_tail": (A64[:, :full] @ B64[:full] if full < K else None,
                       f"K = {K}의 마지막 {K - full}열(16의 배수가 아닌 꼬리)을 빠뜨렸다. 반복은 ceil(K / 16)번이고, 마지막 타일은 "
                       f"K를 넘는 칸을 0으로 채운다."),
        }, hint="누산기는 fp32여야 한다 (fp16 누산은 K가 크면 오차가 커진다).",
            nonfinite=("out_of_bounds", "K를 넘는 칸을 읽었다: 검사는 A의 K번째 열 뒤와 B의 K번째 행 뒤에 NaN을 두었고, "
                                        "NaN × 0도 NaN이다. 마지막 타일에서 K를 넘는 칸은 읽지 말고 0을 써라."))
    core.passed("tc_gemm_kernel (K가 16의 배수가 아님)", seed)


GLOBAL_LOADS = ("gpulib_wmma_load_a", "gpulib_wmma_load_b")


def _fragments_from_shared(kernel, seed):
    """The statement's rule, read in the kernel's PTX (compiled for compute capability 9.0 by the
    clean room; the emulation's loads are the same function for both memories): the fragments
    come from the shared tiles, never straight from global memory."""
    calls = kernel.ptx_calls() if isinstance(kernel, core.Remote) else []
    direct = sorted(c for c in calls if c in GLOBAL_LOADS)
    if direct:
        raise Mistake("fragments_from_global", f"tc_gemm_kernel의 PTX가 {', '.join(direct)}(전역 메모리에서 fragment를 채우는 "
                                               f"wmma.load)를 부른다{core.where(seed)}. 문제는 A와 B의 조각을 셰어드 메모리 타일에 "
                                               f"옮긴 뒤 wmma.load_a_shared / load_b_shared로 채우는 것이다.")


# -- speed (on a GPU)


@wmma.kernel
def reference_tc_gemm_kernel(A, B, C):
    """The instructor's WMMA GEMM with any K, the speed check's yardstick: per 16-deep step the
    warp moves A's and B's 16×16 tiles (zero past K) into shared memory, then one mma."""
    a_tile = cuda.shared.array((WMMA_TILE, WMMA_TILE), float16)
    b_tile = cuda.shared.array((WMMA_TILE, WMMA_TILE), float16)
    a = cuda.local.array(AB_FRAGMENT, AB_DTYPE)  # bare names: a local array's shape must be a literal for Numba
    b = cuda.local.array(AB_FRAGMENT, AB_DTYPE)
    acc = cuda.local.array(ACC_FRAGMENT, float32)
    wmma.fill(acc, float32(0.0))
    row, col = cuda.blockIdx.y * WMMA_TILE, cuda.blockIdx.x * WMMA_TILE
    K = A.shape[1]
    zero = float16(0.0)
    for k0 in range(0, K, WMMA_TILE):
        for i in range(cuda.threadIdx.x, WMMA_TILE * WMMA_TILE, 32):
            r, c = i // WMMA_TILE, i % WMMA_TILE
            a_tile[r, c] = A[row + r, k0 + c] if k0 + c < K else zero
            b_tile[r, c] = B[k0 + r, col + c] if k0 + r < K else zero
        cuda.syncthreads()
        wmma.load_a_shared(a, a_tile, 0, 0)
        wmma.load_b_shared(b, b_tile, 0, 0)
        wmma.mma(acc, a, b)
        cuda.syncthreads()
    wmma.store(C, row, col, acc)


SPEED_GEMM = (2048, 2040, 2048)  # M, K, N: K not a multiple of 16


def check_tc_gemm_speed(kernel, points: float = 2, seed: int | None = None) -> float:
    """Graded on a GPU: tc_gemm_kernel's time at 2048 × 2040 × 2048 against
    ``reference_tc_gemm_kernel`` in the same run; values checked on fresh inputs afterwards."""
    seed = core.new_seed(seed)
    M, K, N = SPEED_GEMM

    def make_inputs(rng):
        return {"A": core.values(rng, (M, K)).astype(np.float16), "B": core.values(rng, (K, N)).astype(np.float16)}

    def check(out, given):
        A64, B64 = given["A"].astype(np.float64), given["B"].astype(np.float64)
        core.compare(out["C"], A64 @ B64, "C", seed, rtol=1e-4, scale=float((np.abs(A64) @ np.abs(B64)).max()),
                     hint="누산기는 fp32여야 한다.")

    return core.speed_points(kernel, "gpulib.grading.cudnn:reference_tc_gemm_kernel",
                             (N // WMMA_TILE, M // WMMA_TILE), 32, make_inputs, {"C": ((M, N), np.float32)}, (),
                             check, points, seed, "tc_gemm_kernel", correct=check_tc_gemm)
