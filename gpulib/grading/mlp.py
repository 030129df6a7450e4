"""16.1 assignment: the checks of the dense layer's forward and backward kernels and of a
numerically stable softmax cross-entropy (``assignments/source/16_1_mlp``).

Each ``run_*`` function is the launch the notebook's stub uses (grid and block written out),
and each ``check_*`` runs the student's kernel through it: ``hidden=False`` on the shapes the
notebook shows, ``hidden=True`` (at grading) on fresh random shapes and seeds.
"""

from __future__ import annotations

import numpy as np

from gpulib import reference
from gpulib.arrays import blocks
from gpulib.env import sized
from gpulib.grading import core
from gpulib.grading.core import Mistake

BLOCK = (16, 16)
ROW_BLOCK = 32


# -- launches (the stubs' "launch already written")


def run_dense_forward(kernel, X, W, b, trace=False):
    """Y = relu(X·Wᵀ + b): one thread per Y[n, j]; threadIdx.x walks j (the columns of Y)."""
    N, n_out = X.shape[0], W.shape[0]
    grid = (blocks(n_out, BLOCK[0]), blocks(N, BLOCK[1]))
    return core.run(kernel, grid, BLOCK, {"X": X, "W": W, "b": b}, {"Y": (N, n_out)}, (), trace, "dense_forward_kernel")


def run_input_grad(kernel, dZ, W, trace=False):
    """dX = dZ·W: one thread per dX[n, i]; threadIdx.x walks i."""
    N, n_in = dZ.shape[0], W.shape[1]
    grid = (blocks(n_in, BLOCK[0]), blocks(N, BLOCK[1]))
    return core.run(kernel, grid, BLOCK, {"dZ": dZ, "W": W}, {"dX": (N, n_in)}, (), trace, "input_grad_kernel")


def run_weight_grad(kernel, dZ, X, trace=False):
    """dW = dZᵀ·X and db = Σₙ dZ: one thread per dW[j, i]; the threads with i = 0 also write db[j]."""
    n_out, n_in = dZ.shape[1], X.shape[1]
    grid = (blocks(n_in, BLOCK[0]), blocks(n_out, BLOCK[1]))
    return core.run(kernel, grid, BLOCK, {"dZ": dZ, "X": X}, {"dW": (n_out, n_in), "db": (n_out,)}, (), trace,
                "weight_grad_kernel")


def run_softmax_xent(kernel, Z, labels, trace=False):
    """P = softmax(Z) row by row and loss[n] = -log P[n, labels[n]]: one thread per row."""
    N, C = Z.shape
    return core.run(kernel, blocks(N, ROW_BLOCK), ROW_BLOCK, {"Z": Z, "labels": labels},
                {"P": (N, C), "loss": (N,)}, (), trace, "softmax_xent_kernel")


# -- checks


def _shapes(hidden, rng, visible, big):
    """(N, n_in, n_out) triples: the notebook's, or 1s, primes and a GPU-sized one at grading."""
    if not hidden:
        return [visible]
    shapes = [(1, 1, 1), (core.odd_size(rng, 17, 37, 16), core.odd_size(rng, 2, 13), core.odd_size(rng, 17, 31, 16))]
    shapes.append(sized(big, (core.odd_size(rng, 2, 11), core.odd_size(rng, 17, 29, 16), core.odd_size(rng, 2, 7))))
    return shapes


def check_dense_forward(kernel, hidden: bool = False, seed: int | None = None) -> None:
    """Y = relu(X·Wᵀ + b) on shapes not a multiple of the 16×16 block, N ≠ n_out."""
    seed = core.check_seed(hidden, seed, 1)
    rng = np.random.default_rng(seed)
    # traced: every thread's accesses; 21 rows and 5 columns leave idle threads in both axes
    N, n_in, n_out = (core.odd_size(rng, 17, 23, 16), core.odd_size(rng, 3, 7), core.odd_size(rng, 2, 7)) if hidden else (21, 6, 5)
    X, W, b = core.values(rng, (N, n_in)), core.values(rng, (n_out, n_in)), core.values(rng, n_out)
    t, out = run_dense_forward(kernel, X, W, b, trace=True)
    _forward_values(out["Y"], X, W, b, seed)
    core.coalesced_writes(t, "Y", "dense_forward_kernel", share=0.6)
    core.outputs_per_thread(t, "Y", 1, "dense_forward_kernel")
    for N, n_in, n_out in _shapes(hidden, rng, (37, 13, 10), (1000, 777, 301)):
        X, W, b = core.values(rng, (N, n_in)), core.values(rng, (n_out, n_in)), core.values(rng, n_out)
        _forward_values(run_dense_forward(kernel, X, W, b)["Y"], X, W, b, seed)
    core.passed("dense_forward_kernel", seed)


def _forward_values(Y, X, W, b, seed):
    Z = reference.dense_forward(X, W, b, "identity")
    core.compare(Y, reference.activate(Z, "relu"), "Y", seed, scale=float(reference.dense_magnitude(X, W, b).max()), known={
        "no_activation": (Z, "ReLU를 적용하지 않았다 (Z = X·Wᵀ + b 그대로다)."),
        "no_bias": (lambda: reference.dense_forward(X, W, np.zeros_like(b), "relu"), "편향 b를 더하지 않았다."),
        # W read as W[i, j] only stays in bounds when W is square: then it is Wᵀ
        "transposed_weights": (lambda: reference.dense_forward(X, W.T, b, "relu") if W.shape[0] == W.shape[1] else None,
                               "W[i, j]로 읽었다. W는 [n_out, n_in]이므로 W[j, i]다."),
    })


def check_dense_backward(input_grad_kernel, weight_grad_kernel, hidden: bool = False, seed: int | None = None) -> None:
    """dX = dZ·W, dW = dZᵀ·X, db = Σₙ dZ on non-square layers (a transposed index cannot pass)."""
    seed = core.check_seed(hidden, seed, 2)
    rng = np.random.default_rng(seed)
    N, n_in, n_out = (core.odd_size(rng, 17, 23, 16), core.odd_size(rng, 3, 7), core.odd_size(rng, 17, 19, 16)) if hidden else (19, 5, 17)
    dZ, W, X = core.values(rng, (N, n_out)), core.values(rng, (n_out, n_in)), core.values(rng, (N, n_in))
    t, out = run_input_grad(input_grad_kernel, dZ, W, trace=True)
    _backward_values(out, dZ, W, X, seed)
    core.outputs_per_thread(t, "dX", 1, "input_grad_kernel")
    t, out = run_weight_grad(weight_grad_kernel, dZ, X, trace=True)
    _backward_values(out, dZ, W, X, seed)
    core.outputs_per_thread(t, "dW", 1, "weight_grad_kernel")
    for N, n_in, n_out in _shapes(hidden, rng, (37, 13, 10), (1000, 777, 301)):
        dZ, W, X = core.values(rng, (N, n_out)), core.values(rng, (n_out, n_in)), core.values(rng, (N, n_in))
        _backward_values(run_input_grad(input_grad_kernel, dZ, W), dZ, W, X, seed)
        _backward_values(run_weight_grad(weight_grad_kernel, dZ, X), dZ, W, X, seed)
    core.passed("input_grad_kernel, weight_grad_kernel", seed)


def _backward_values(out, dZ, W, X, seed):
    dZ64, W64, X64 = (a.astype(np.float64) for a in (dZ, W, X))
    refs = {"dX": dZ64 @ W64, "dW": dZ64.T @ X64, "db": dZ64.sum(axis=0)}
    scales = {"dX": np.abs(dZ64) @ np.abs(W64), "dW": np.abs(dZ64).T @ np.abs(X64), "db": np.abs(dZ64).sum(axis=0)}
    for name, got in out.items():
        ref = refs[name]
        core.compare(got, ref, name, seed, scale=float(scales[name].max()), known={
            "sign": (-ref, lambda name=name: f"부호가 반대다. 손실 L = Σ dZ ⊙ Z 를 유한 차분으로 재면 "
                                             f"{_finite_difference(dZ64, W64, X64, name)}; 그래디언트는 "
                                             f"L이 커지는 방향이어야 한다 (학습은 그 반대로 간다)."),
            "no_batch_sum": ({"dX": dZ64 @ W64, "dW": np.outer(dZ64[0], X64[0]), "db": dZ64[0]}[name],
                             "배치의 첫 샘플(n = 0)만 썼다. dW와 db는 배치 전체에 대한 합이다."),
        })


def _finite_difference(dZ, W, X, name):
    """The directional derivative of L = Σ dZ ⊙ (X·Wᵀ + b) along a random V in ``name`` ("dW",
    "dX" or "db"), by central differences, as a sentence."""
    args = [W, X, np.zeros(W.shape[0])]
    k = ("dW", "dX", "db").index(name)
    V = np.random.default_rng(0).standard_normal(args[k].shape)
    h = 1e-3

    def loss(shift):
        W_, X_, b_ = (a + shift * V if i == k else a for i, a in enumerate(args))
        return float((dZ * (X_ @ W_.T + b_)).sum())

    fd = (loss(h) - loss(-h)) / (2 * h)
    return f"방향 V로의 미분이 {fd:+.4g}인데, 이 그래디언트와 V의 내적은 그 반대 부호다"


def check_softmax_xent(kernel, hidden: bool = False, seed: int | None = None) -> None:
    """Softmax and cross-entropy stay finite and exact at logits of ±1000."""
    seed = core.check_seed(hidden, seed, 3)
    rng = np.random.default_rng(seed)
    N, C = (core.odd_size(rng, 33, 41, 32), core.odd_size(rng, 2, 13)) if hidden else (37, 10)
    cases = [(N, C, 5.0), (N, C, 1000.0)]
    if hidden:
        cases += [(1, 1, 1000.0), sized((1000, 1000, 1000.0), (core.odd_size(rng, 2, 31), core.odd_size(rng, 2, 7), 1000.0))]
    Z, labels = _logits(rng, N, C, 5.0)
    t, out = run_softmax_xent(kernel, Z, labels, trace=True)
    _softmax_values(out, Z, labels, seed)
    for N, C, spread in cases:
        Z, labels = _logits(rng, N, C, spread)
        _softmax_values(run_softmax_xent(kernel, Z, labels), Z, labels, seed)
    core.passed("softmax_xent_kernel (로짓 ±1000 포함)", seed)


def _logits(rng, N, C, spread):
    Z = core.values(rng, (N, C), -spread, spread)
    labels = rng.integers(0, C, N).astype(np.int32)
    Z[np.arange(N), labels] -= np.float32(spread)  # the true class is often far below the max
    return Z, labels


def _softmax_values(out, Z, labels, seed):
    loss, P = reference.softmax_cross_entropy(Z, labels)
    spread = float(np.abs(Z).max())
    large = spread >= 100  # exp overflows here unless the row maximum is subtracted
    shift = ("exp(z)를 계산하기 전에 행의 최댓값을 빼라: softmax(z) = softmax(z - max z)이고, 그러면 지수는 0 이하라 "
             f"넘치지 않는다 (이 입력의 |z|는 최대 {spread:.0f}).")
    core.compare(out["P"], P, "P", seed, rtol=1e-5, scale=1.0, hint=shift, kind="overflow" if large else "wrong_value",
                 nonfinite=("overflow", f"e^z가 넘쳤다. {shift}") if large else None)
    if not np.isfinite(out["loss"]).all() and np.isfinite(loss).all():
        n = int(np.argmax(~np.isfinite(out["loss"])))
        raise Mistake("log_of_zero", f"loss[{n}] = {out['loss'][n]}: 확률 P가 0으로 언더플로된 뒤 log(P) = -inf를 "
                                     f"계산했다{core.where(seed)}. -log P[y] = log Σ exp(z - m) - (z_y - m)으로, 로그를 "
                                     f"취한 형태 그대로 계산하라 (m = max z).")
    core.compare(out["loss"], loss, "loss", seed, rtol=1e-5, scale=max(1.0, float(np.abs(loss).max())), known={
        "wrong_label": (-np.log(np.maximum(P[:, 0], 1e-300)), "정답 클래스 labels[n]이 아니라 0번 클래스의 손실이다."),
    })
