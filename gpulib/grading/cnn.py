"""16.2 assignment: the checks of max pooling (forward, and backward with ties), of the
convolution's input gradient at stride 2 with padding, and of a whole-CNN gradient check that
does not fall into the ReLU-kink trap (``assignments/source/16_2_cnn``).

Every kernel here maps one thread to one element of its output image: threadIdx.x walks the
columns, threadIdx.y the rows, and blockIdx.z the (image, channel) pairs, z = n·C + c.
"""

from __future__ import annotations

import numpy as np

from gpulib import reference
from gpulib.arrays import blocks
from gpulib.env import sized
from gpulib.grading import core
from gpulib.grading.core import Mistake
from gpulib.shapes import conv_output_size

BLOCK = (16, 16)


def _grid(shape4):
    N, C, H, W = shape4
    return (blocks(W, BLOCK[0]), blocks(H, BLOCK[1]), N * C)


# -- launches


def run_max_pool(kernel, X, trace=False):
    """Y = 2×2 max pooling with stride 2 (rows and columns left over are dropped)."""
    N, C, H, W = X.shape
    Y = (N, C, H // 2, W // 2)
    return core.run(kernel, _grid(Y), BLOCK, {"X": X}, {"Y": Y}, (), trace, "max_pool_kernel")


def run_max_pool_backward(kernel, X, dY, trace=False):
    """dX: one thread per element of X."""
    return core.run(kernel, _grid(X.shape), BLOCK, {"X": X, "dY": dY}, {"dX": X.shape}, (), trace,
                    "max_pool_backward_kernel")


def run_input_grad(kernel, dY, W, image, padding, stride, trace=False):
    """dX of a convolution with filters W [K, C, R, S], for an input image of shape (H, W)."""
    N, K = dY.shape[:2]
    C = W.shape[1]
    shape = (N, C) + tuple(image)
    return core.run(kernel, _grid(shape), BLOCK, {"dY": dY, "W": W}, {"dX": shape}, (padding, stride), trace,
                    "conv_input_grad_kernel")


# -- checks


def _image_shapes(hidden, rng, visible):
    """(N, C, H, W): the notebook's, or odd, prime and 1-wide images at grading."""
    if not hidden:
        return [visible]
    odd = lambda lo, hi: core.odd_size(rng, lo, hi, 2)  # noqa: E731
    return [(1, 1, 3, 2), (odd(1, 3), odd(1, 3), core.odd_size(rng, 17, 23, 16), odd(5, 13)),
            sized((8, 16, 113, 97), (1, 2, odd(5, 11), core.odd_size(rng, 17, 19, 16)))]


def check_max_pool(kernel, hidden: bool = False, seed: int | None = None) -> None:
    """2×2 max pooling on odd sizes, with windows that are all negative."""
    seed = core.check_seed(hidden, seed, 4)
    rng = np.random.default_rng(seed)
    X = core.values(rng, (1, 2, 5, 19) if not hidden else (1, 2, core.odd_size(rng, 3, 7, 2), core.odd_size(rng, 17, 19, 16)))
    t, out = run_max_pool(kernel, X, trace=True)
    _pool_values(out["Y"], X, seed)
    core.coalesced_writes(t, "Y", "max_pool_kernel", share=0.6)
    core.outputs_per_thread(t, "Y", 1, "max_pool_kernel")
    for shape in _image_shapes(hidden, rng, (2, 3, 9, 35)):
        X = core.values(rng, shape)
        X[..., :2, :2] = -np.abs(X[..., :2, :2]) - 0.5  # a window with no positive value
        _pool_values(run_max_pool(kernel, X)["Y"], X, seed)
    core.passed("max_pool_kernel", seed)


def _pool_values(Y, X, seed):
    ref = reference.max_pool2d(X)
    core.compare(Y, ref, "Y", seed, rtol=1e-7, scale=1.0, known={
        "max_init_zero": (np.maximum(ref, 0.0), "모든 값이 음수인 창에서 0을 냈다: 최댓값의 초깃값을 0으로 두었는가? "
                                                "창의 첫 원소(또는 -inf)로 시작하라."),
        "no_stride": (lambda: _unstrided_pool(X)[:, :, :ref.shape[2], :ref.shape[3]],
                      "창의 시작이 (2·oy, 2·ox)가 아니라 (oy, ox)다: 스트라이드 2를 곱하지 않았다."),
    })


def _unstrided_pool(X):
    """The 2×2 maximum starting at every (y, x): what a pooling kernel without its stride computes."""
    X = np.asarray(X, np.float64)
    return np.maximum(np.maximum(X[:, :, :-1, :-1], X[:, :, 1:, :-1]), np.maximum(X[:, :, :-1, 1:], X[:, :, 1:, 1:]))


def _tied(rng, shape):
    """Values from {-1, 0, 1, 2}: most windows have ties, some have all four equal."""
    return rng.integers(-1, 3, size=shape).astype(np.float32)


def pool_backward_candidates(X, dY):
    """What the usual wrong answers produce: every tied position gets the gradient, or the last one."""
    win = reference.max_pool2d(X)
    N, C, Ho, Wo = win.shape
    up = np.repeat(np.repeat(win, 2, axis=2), 2, axis=3)
    g = np.repeat(np.repeat(np.asarray(dY, np.float64), 2, axis=2), 2, axis=3)
    all_ties = np.zeros(X.shape)
    all_ties[:, :, :2 * Ho, :2 * Wo] = np.where(X[:, :, :2 * Ho, :2 * Wo] == up, g, 0.0)
    last = np.zeros(X.shape)  # reversed, the first maximum of each window is the last one
    crop = X[:, :, :2 * Ho, :2 * Wo]
    last[:, :, :2 * Ho, :2 * Wo] = reference.max_pool2d_backward(crop[..., ::-1, ::-1], dY[..., ::-1, ::-1])[..., ::-1, ::-1]
    return all_ties, last


def check_max_pool_backward(kernel, hidden: bool = False, seed: int | None = None) -> None:
    """Each dY element goes to exactly one input: the first maximum of its window (row-major),
    even when several are equal; rows and columns outside every window get 0."""
    seed = core.check_seed(hidden, seed, 5)
    rng = np.random.default_rng(seed)
    small = (1, 2, 5, 19) if not hidden else (1, 2, core.odd_size(rng, 3, 7, 2), core.odd_size(rng, 17, 19, 16))
    shapes = [small] + _image_shapes(hidden, rng, (2, 3, 8, 34)) + ([(1, 1, 6, 18)] if hidden else [(2, 1, 9, 35)])
    for i, shape in enumerate(shapes):
        X = _tied(rng, shape)
        dY = core.values(rng, (shape[0], shape[1], shape[2] // 2, shape[3] // 2))
        out = run_max_pool_backward(kernel, X, dY, trace=i == 0)
        dX = out[1]["dX"] if i == 0 else out["dX"]
        if i == 0:
            core.outputs_per_thread(out[0], "dX", 1, "max_pool_backward_kernel")
        core.compare(dX, reference.max_pool2d_backward(X, dY), "dX", seed, rtol=1e-7, scale=1.0, known={
            "ties_to_all": (lambda: pool_backward_candidates(X, dY)[0], "최댓값이 같은 원소가 여럿인 창에서 그래디언트를 모두에게 보냈다. 순전파의 출력은 "
                                      "그중 하나에서 왔으므로 그래디언트도 하나(행 우선으로 첫 번째)에만 가야 한다. "
                                      "그렇지 않으면 그래디언트의 합이 dY보다 커진다."),
            "last_tie": (lambda: pool_backward_candidates(X, dY)[1], "같은 최댓값 가운데 마지막 것에 보냈다 (>= 비교). 순전파와 같은 규칙, 첫 번째여야 한다."),
        }, hint="창 밖에 남는 행/열(H, W가 홀수일 때)의 dX도 0으로 써야 한다.")
    core.passed("max_pool_backward_kernel (같은 최댓값 포함)", seed)


def check_conv_input_grad(kernel, hidden: bool = False, seed: int | None = None) -> None:
    """dX of a convolution, in three stages (padding 0 stride 1, padding 1 stride 1, padding 1
    stride 2) on non-square images, so that each missing piece is named."""
    seed = core.check_seed(hidden, seed, 6)
    rng = np.random.default_rng(seed)
    stages = [(0, 1, "wrong_value", ""),
              (1, 1, "padding", "패딩 1에서 틀렸다 (패딩 0에서는 맞았다): 입력 위치 h는 패딩한 좌표로 h + padding이다. "
                                "출력 y는 y·stride + r = h + padding을 만족해야 한다."),
              (1, 2, "stride", "스트라이드 2에서 틀렸다 (스트라이드 1에서는 맞았다): (h + padding - r)가 stride로 나누어떨어질 "
                               "때만 그 출력이 이 입력을 썼다. 정수 나눗셈만 하면 쓰지 않은 출력의 그래디언트까지 더해진다.")]
    for i, (padding, stride, kind, hint) in enumerate(stages):
        if hidden:
            N, C, K = core.odd_size(rng, 1, 2), core.odd_size(rng, 1, 3), core.odd_size(rng, 1, 3)
            H, W = core.odd_size(rng, 5, 11, 2), core.odd_size(rng, 17, 19, 16)
            R, S = int(rng.choice([1, 3])), int(rng.choice([2, 3]))
        else:
            N, C, K, H, W, R, S = 1, 2, 3, 7, 17, 3, 2
        for traced in (True, False):
            if not traced and hidden:
                N, C, K, H, W = sized((8, 64, 32, 57, 61), (N, C, K, H, W))
            dY = core.values(rng, (N, K, conv_output_size(H, R, padding, stride), conv_output_size(W, S, padding, stride)))
            Wt = core.values(rng, (K, C, R, S))
            out = run_input_grad(kernel, dY, Wt, (H, W), padding, stride, trace=traced)
            dX = out[1]["dX"] if traced else out["dX"]
            X = np.zeros((N, C, H, W))
            ref = reference.conv2d_backward(X, Wt, dY, padding, stride)[0]
            scale = float(reference.conv2d_backward(X, np.abs(Wt), np.abs(dY), padding, stride)[0].max())
            core.compare(dX, ref, "dX", seed, scale=scale or 1.0, kind=kind, hint=hint)
            if traced:
                core.outputs_per_thread(out[0], "dX", 1, "conv_input_grad_kernel")
    core.passed("conv_input_grad_kernel (padding 0/1, stride 1/2)", seed)


# -- a gradient check that does not fall into the ReLU-kink trap


class TinyCNN:
    """conv 3×3 (C=1 → K=2, padding 1) → ReLU → fully connected → softmax cross-entropy, in
    float64, on two 5×5 images (so some units are off for both, and some gradients exactly 0).
    ``grads`` is backpropagation, with one planted mistake if
    ``bug`` names one ("conv_sign": dW1 negated; "fc_bias": db2 left at zero). ``kinks`` puts
    a ReLU input 1e-8 from 0; ``tiny`` makes the conv layer's gradients about 1e-9."""

    def __init__(self, seed: int, kinks: bool = False, bug: str | None = None, images: int = 2, tiny: bool = False):
        rng = np.random.default_rng(seed)
        while True:  # without kinks: every pre-activation at least 1e-3 from 0 (ε = 1e-5 never crosses)
            self.X = rng.uniform(-1, 1, (images, 1, 5, 5))
            self.labels = rng.integers(0, 3, images)
            W1, b1 = rng.uniform(-1, 1, (2, 1, 3, 3)), rng.uniform(-0.2, 0.2, 2)
            W2, b2 = rng.uniform(-0.5, 0.5, (3, 2 * 5 * 5)), rng.uniform(-0.2, 0.2, 3)
            Z = reference.conv2d(self.X, W1, b1, 1)
            if np.abs(Z).min() > 1e-3:
                break
        if kinks:  # move b1 so that one pre-activation of each channel sits 1e-8 above the kink
            for k in range(2):
                b1[k] -= Z[0, k, 2, 2] - 1e-8
        if tiny:  # W2 near zero: the gradients of W1 and b1 are ~1e-9, as small as rounding noise allows
            W2 = W2 * 1e-8
        self.params = [W1, b1, W2, b2]
        self.bug = bug

    def relu_inputs(self, params):
        """The pre-activations Z = conv(X, W1) + b1 that go into the ReLU."""
        W1, b1, _, _ = params
        return [reference.conv2d(self.X, W1, b1, 1)]

    def _forward(self, params):
        """(Z, H, logits): the ReLU's input, its output flattened per image, the logits."""
        _, _, W2, b2 = params
        Z = self.relu_inputs(params)[0]
        H = np.maximum(Z, 0.0).reshape(len(self.X), -1)
        return Z, H, H @ W2.T + b2

    def loss(self, params) -> float:
        logits = self._forward(params)[2]
        return float(reference.softmax_cross_entropy(logits, self.labels)[0].mean())

    def grads(self, params):
        W1, _, W2, _ = params
        Z, H, logits = self._forward(params)
        dlogits = reference.softmax_cross_entropy_grad(logits, self.labels)
        dW2, db2 = dlogits.T @ H, dlogits.sum(axis=0)
        dZ = (dlogits @ W2).reshape(Z.shape) * (Z > 0)
        _, dW1, db1 = reference.conv2d_backward(self.X, W1, dZ, 1)
        if self.bug == "conv_sign":
            dW1 = -dW1
        if self.bug == "fc_bias":
            db2 = np.zeros_like(db2)
        return [dW1, db1, dW2, db2]


def check_gradient_check(gradient_check, hidden: bool = False, seed: int | None = None) -> None:
    """``gradient_check(net, eps)`` returns the largest relative error between backpropagation
    and central differences: tiny on a correct net, kinks included; large on a wrong one."""
    seed = core.check_seed(hidden, seed, 18)
    rng = np.random.default_rng(seed)
    for trial in range(3 if hidden else 1):
        s = int(rng.integers(0, 2**31))
        err = core.called(gradient_check, TinyCNN(s), 1e-5, what="gradient_check")
        if not np.isfinite(err):
            raise Mistake("nan", f"올바른 네트워크에서 오차가 {err}이다{core.where(seed)}. 죽은 ReLU 뒤의 파라미터는 그래디언트가 "
                                 f"정확히 0이라 |a| + |n| = 0이 된다: 분모를 max(|a| + |n|, 1e-4)로 두어라.")
        if err > 1e-6:
            raise Mistake("false_alarm", f"꺾임이 없는 올바른 네트워크에서 오차가 {err:.2e}이다 (1e-6 이하여야 한다){core.where(seed)}. "
                                         f"중앙 차분 (L(p + ε) - L(p - ε)) / 2ε을 써라: 한쪽 차분의 오차는 ε에 비례한다.")
        err = core.called(gradient_check, TinyCNN(s, tiny=True), 1e-5, what="gradient_check")
        if not np.isfinite(err) or err > 1e-6:
            raise Mistake("tiny_gradients", f"그래디언트가 1e-9쯤인 좌표가 있는 올바른 네트워크에서 오차가 {err:.2e}이다{core.where(seed)}. "
                                            f"그런 좌표에서는 차분의 반올림 잡음(1e-11쯤)이 상대 오차를 키운다: 분모를 "
                                            f"max(|a| + |n|, 1e-4)로 두어 아주 작은 그래디언트는 절대 오차로 재라.")
        err = core.called(gradient_check, TinyCNN(s, kinks=True), 1e-5, what="gradient_check")
        if not np.isfinite(err) or err > 1e-6:
            raise Mistake("kink_trap", f"ReLU 입력이 0에서 1e-8 떨어진 곳이 있는 올바른 네트워크에서 오차가 {err:.2e}이다"
                                       f"{core.where(seed)}. p ± ε가 ReLU의 꺾임을 넘으면 유한 차분은 그래디언트가 아니다. 그 좌표에서 "
                                       f"ReLU 입력(net.relu_inputs)의 부호가 p + ε와 p - ε에서 다르면 그 좌표는 건너뛰어라.")
        for bug, where_ in (("conv_sign", "합성곱 필터 W1의 그래디언트 부호"), ("fc_bias", "완전 연결층 편향 b2의 그래디언트")):
            err = core.called(gradient_check, TinyCNN(s, bug=bug), 1e-5, what="gradient_check")
            if not (np.isfinite(err) and err > 1e-3):
                raise Mistake("missed_bug", f"역전파에 버그({where_})를 심은 네트워크에서 오차가 {err:.2e}이다{core.where(seed)}: "
                                            f"버그를 놓쳤다. 모든 파라미터의 모든 좌표를 보았는가? 건너뛰는 것은 꺾임을 넘는 좌표뿐이어야 한다.")
    core.passed("gradient_check (ReLU 꺾임 함정 없이)", seed)
