"""The assignments' checks catch the wrong answers students write, and pass the solutions.

Each mutant is the solution cell of an assignment's source notebook with one edit (a missing
barrier, a swapped index...): the test runs the exercise's checks on it and asserts that they
fail with that mistake's own kind. The solutions themselves pass the visible and the hidden
checks. The notebooks are read, not copied: what is tested is what students get.
"""

from __future__ import annotations

import json
import linecache
import re
from collections import defaultdict
from pathlib import Path

import pytest

from gpulib.grading.core import Mistake

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "assignments" / "source"
NOTEBOOKS = {p.parent.name: p for p in sorted(SOURCE.glob("*/*.ipynb"))}
SEED = 7  # the hidden checks' seed in these tests (at grading they draw a fresh one)


def _cells(assignment):
    return json.loads(NOTEBOOKS[assignment].read_text())["cells"]


def exercises(assignment):
    """{solution grade_id: (solution source, [check sources in order])}; the checks of an
    exercise are the graded cells that follow its solution cell (and the ungraded check cell
    of an optional exercise)."""
    found, current = {}, None
    for cell in _cells(assignment):
        meta = cell["metadata"].get("nbgrader", {})
        src = "".join(cell["source"])
        if meta.get("solution") and cell["cell_type"] == "code":
            current = meta["grade_id"]
            found[current] = (src, [])
        elif current and (meta.get("grade") or meta.get("grade_id", "").startswith("check_")):
            found[current][1].append(src)  # an optional exercise's check is feedback only, but checked all the same
    return found


def setup_code(assignment):
    return next("".join(c["source"]) for c in _cells(assignment) if c["cell_type"] == "code")


def _exec(source, namespace, name):
    filename = f"<assignment {name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # the tracer names shared arrays by line
    exec(compile(source, filename, "exec"), namespace)


def run_exercise(assignment, grade_id, edits=()):
    """Run an exercise's checks (visible, then hidden with SEED) on its solution with ``edits``."""
    namespace = {}
    _exec(setup_code(assignment).replace("gpulib.report()", ""), namespace, "setup")
    for other, (src, _) in exercises(assignment).items():
        if other == grade_id:
            for old, new in edits:
                assert src.count(old) == 1, f"{grade_id}: the mutation's text {old!r} is not in the solution exactly once"
                src = src.replace(old, new)
        _exec(re.sub(r"(?m)^\s*### (BEGIN|END) SOLUTION\n?", "", src), namespace, other)
    for check in exercises(assignment)[grade_id][1]:
        code = re.sub(r"hidden=True\)", f"hidden=True, seed={SEED})", check)
        _exec(code, namespace, f"{grade_id} check")


BOUNDS = "if True:"

# (assignment, solution cell, what the student got wrong, edits, the kind the checks must report;
# a pair where the simulator and a GPU see the same mistake differently)
MUTANTS = [
    # 16.1
    ("16_1_mlp", "dense_forward_kernel", "no bounds check", [("if n < Y.shape[0] and j < Y.shape[1]:", BOUNDS)], "out_of_bounds"),
    ("16_1_mlp", "dense_forward_kernel", "grid axes swapped",
     [("j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x\n    n = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y",
       "n = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x\n    j = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y")], "unwritten"),
    ("16_1_mlp", "dense_forward_kernel", "no ReLU", [("Y[n, j] = max(acc, 0.0)", "Y[n, j] = acc")], "no_activation"),
    ("16_1_mlp", "dense_forward_kernel", "no bias", [("acc = b[j]", "acc = 0.0")], "no_bias"),
    ("16_1_mlp", "dense_backward_kernels", "sign of dW", [("dW[j, i] = acc", "dW[j, i] = -acc")], "sign"),
    ("16_1_mlp", "dense_backward_kernels", "db of the first sample only", [("total += dZ[n, j]", "total = dZ[0, j]")], "no_batch_sum"),
    ("16_1_mlp", "dense_backward_kernels", "W transposed in dX", [("acc += dZ[n, j] * W[j, i]", "acc += dZ[n, j] * W[i, j]")], "out_of_bounds"),
    ("16_1_mlp", "softmax_xent_kernel", "no max subtracted", [("m = max(m, Z[n, c])", "m = 0.0")], "overflow"),
    ("16_1_mlp", "softmax_xent_kernel", "log of the probability",
     [("loss[n] = log_total - (Z[n, labels[n]] - m)", "loss[n] = -math.log(P[n, labels[n]])")],
     ("math_domain", "log_of_zero")),  # Python's math.log(0) raises on the simulator; a GPU gives -inf
    ("16_1_mlp", "softmax_xent_kernel", "no bounds check", [("if n < Z.shape[0]:", BOUNDS)], "out_of_bounds"),
    ("16_1_mlp", "softmax_xent_kernel", "label ignored", [("(Z[n, labels[n]] - m)", "(Z[n, 0] - m)")], "wrong_label"),
    # 16.2
    ("16_2_cnn", "max_pool_kernel", "max starts at 0", [("best = X[n, c, 2 * y, 2 * x]", "best = 0.0")], "max_init_zero"),
    ("16_2_cnn", "max_pool_kernel", "no stride", [("best = X[n, c, 2 * y, 2 * x]", "best = X[n, c, y, x]"),
                                                       ("X[n, c, 2 * y + i, 2 * x + j]", "X[n, c, y + i, x + j]")], "no_stride"),
    ("16_2_cnn", "max_pool_kernel", "no bounds check", [("if y < Y.shape[2] and x < Y.shape[3]:", BOUNDS)], "out_of_bounds"),
    ("16_2_cnn", "max_pool_kernel", "rows on threadIdx.x",
     [("x = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x\n    y = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y",
       "y = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x\n    x = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y")], "coalescing"),
    ("16_2_cnn", "max_pool_backward_kernel", "ties to every maximum",
     [("if 2 * y + best_i == h and 2 * x + best_j == w:", "if X[n, c, h, w] == X[n, c, 2 * y + best_i, 2 * x + best_j]:")], "ties_to_all"),
    ("16_2_cnn", "max_pool_backward_kernel", "last of the ties", [("> X[n, c, 2 * y + best_i", ">= X[n, c, 2 * y + best_i")], "last_tie"),
    ("16_2_cnn", "max_pool_backward_kernel", "leftover row not written",
     [("        dX[n, c, h, w] = grad", "        if y < dY.shape[2] and x < dY.shape[3]:\n            dX[n, c, h, w] = grad")], "unwritten"),
    ("16_2_cnn", "max_pool_backward_kernel", "no bounds check", [("if h < X.shape[2] and w < X.shape[3]:", BOUNDS)], "out_of_bounds"),
    ("16_2_cnn", "conv_input_grad_kernel", "no stride test", [("ty % stride != 0 or ", ""), ("tx % stride != 0 or ", "")], "stride"),
    ("16_2_cnn", "conv_input_grad_kernel", "padding subtracted",
     [("ty = h + padding - r", "ty = h - padding - r"), ("tx = w + padding - s", "tx = w - padding - s")], "padding"),
    ("16_2_cnn", "conv_input_grad_kernel", "no upper range test", [(" or ty // stride >= dY.shape[2]", "")], "out_of_bounds"),
    ("16_2_cnn", "gradient_check", "kinks not skipped",
     [("            if any(((a > 0) != (b > 0)).any() for a, b in zip(z_plus, z_minus)):\n"
       "                continue  # a kink between p - eps and p + eps: the difference is no derivative\n", "")], "kink_trap"),
    ("16_2_cnn", "gradient_check", "one-sided difference",
     [("numeric = (plus - minus) / (2 * eps)", "numeric = (plus - net.loss(params)) / eps")], "false_alarm"),
    ("16_2_cnn", "gradient_check", "no floor under the denominator",
     [("max(abs(analytic) + abs(numeric), 1e-4)", "(abs(analytic) + abs(numeric))")], "tiny_gradients"),
    ("16_2_cnn", "gradient_check", "every coordinate that moves a ReLU input skipped",
     [("((a > 0) != (b > 0)).any()", "(a != b).any()")], "missed_bug"),
    # 16.3
    ("16_3_tiled_conv", "conv_direct_kernel", "z decoded with C instead of K",
     [("n, k = cuda.blockIdx.z // K, cuda.blockIdx.z % K", "n, k = cuda.blockIdx.z // X.shape[1], cuda.blockIdx.z % X.shape[1]")],
     "out_of_bounds"),
    ("16_3_tiled_conv", "conv_direct_kernel", "no padding test", [("if 0 <= h < X.shape[2]:", BOUNDS)], "out_of_bounds"),
    ("16_3_tiled_conv", "conv_direct_kernel", "no stride",
     [("h = y * stride + r - padding", "h = y + r - padding"), ("w = x * stride + s - padding", "w = x + s - padding")], "no_stride"),
    ("16_3_tiled_conv", "conv_direct_kernel", "filter flipped",
     [("acc += W[k, c, r, s] * X", "acc += W[k, c, W.shape[2] - 1 - r, W.shape[3] - 1 - s] * X")], "flipped_filter"),
    ("16_3_tiled_conv", "conv_tiled_kernel", "no barrier after the load",
     [("        cuda.syncthreads()\n        if y < Y.shape[2]", "        if y < Y.shape[2]")], "race"),
    ("16_3_tiled_conv", "conv_tiled_kernel", "no barrier before the next load",
     [("tile[ty + r, tx + s]\n        cuda.syncthreads()", "tile[ty + r, tx + s]")], "race"),
    ("16_3_tiled_conv", "conv_tiled_kernel", "halo one row short",
     [("range(ty * TILE + tx, IN_TILE * IN_TILE", "range(ty * TILE + tx, (IN_TILE - 1) * IN_TILE")], "halo"),
    ("16_3_tiled_conv", "conv_tiled_kernel", "barrier inside the branch",
     [("        cuda.syncthreads()\n        if y < Y.shape[2] and x < Y.shape[3]:\n            for r",
       "        if y < Y.shape[2] and x < Y.shape[3]:\n            cuda.syncthreads()\n            for r")], "divergent_barrier"),
    ("16_3_tiled_conv", "conv_tiled_kernel", "tile loaded but X read from global",
     [("acc += W[k, c, r, s] * tile[ty + r, tx + s]", "acc += W[k, c, r, s] * X[n, c, y + r, x + s]")], "global_reads"),
    ("16_3_tiled_conv", "conv_tiled_kernel", "no bounds check on the load",
     [("if h < X.shape[2] and w < X.shape[3]:\n                tile[", "if True:\n                tile[")], "out_of_bounds"),
    ("16_3_tiled_conv", "conv_tiled_channels_kernel", "W read from global",
     [("acc[kk] += w_tile[kk, r, s]", "acc[kk] += W[k0 + kk, c, r, s]")], "global_reads"),
    ("16_3_tiled_conv", "conv_tiled_channels_kernel", "no channel bounds on the W load",
     [("if k0 + kk < K:\n                w_tile", "if True:\n                w_tile")], "out_of_bounds"),
    ("16_3_tiled_conv", "conv_tiled_channels_kernel", "group not multiplied by KB",
     [("(cuda.blockIdx.z % groups) * KB", "(cuda.blockIdx.z % groups)")], "unwritten"),
    # 16.4
    ("16_4_im2col", "im2col_kernel", "threads walk the rows",
     [("q, j = t // X_col.shape[1], t % X_col.shape[1]", "q, j = t % X_col.shape[0], t // X_col.shape[0]")], "coalescing"),
    ("16_4_im2col", "im2col_kernel", "padding read, not zeroed", [("if 0 <= h < X.shape[2] and 0 <= w < X.shape[3]:", BOUNDS)],
     "out_of_bounds"),
    ("16_4_im2col", "im2col_kernel", "batch index dropped",
     [("n, y, x = j // (Ho * Wo), (j // Wo) % Ho, j % Wo", "n, y, x = 0, (j // Wo) % Ho, j % Wo")], "batch"),
    ("16_4_im2col", "im2col_kernel", "no bounds check", [("if t < X_col.shape[0] * X_col.shape[1]:", BOUNDS)], "out_of_bounds"),
    ("16_4_im2col", "gemm_rowmajor", "the row-major formula passed as it is",
     [("NP, K, CRS, 1.0, X_buf, ld_x, W_buf, ld_w", "K, NP, CRS, 1.0, W_buf, ld_w, X_buf, ld_x")], "sgemm_arguments"),
    ("16_4_im2col", "gemm_rowmajor", "lda without the padding", [("1.0, X_buf, ld_x", "1.0, X_buf, NP")], "leading_dimension"),
    ("16_4_im2col", "gemm_rowmajor", "m and n swapped", [("NP, K, CRS, 1.0, X_buf", "K, NP, CRS, 1.0, X_buf")], "sgemm_arguments"),
    ("16_4_im2col", "gemm_rowmajor", "beta 1 on an output that holds old values", [("0.0, Y_buf", "1.0, Y_buf")], "beta"),
    ("16_4_im2col", "col2im_kernel", "scattered with atomics",
     [("        dX[n, c, h, w] = acc", "        dX[n, c, h, w] = 0.0\n        cuda.atomic.add(dX, (n, c, h, w), acc)")], "atomics"),
    ("16_4_im2col", "col2im_kernel", "no stride test", [("ty % stride != 0 or ", ""), ("tx % stride != 0 or ", "")], "adjoint"),
    ("16_4_im2col", "col2im_kernel", "row index in the wrong order", [("[(c * R + r) * S + s,", "[(r * S + s) * C + c,")], "adjoint"),
    ("16_4_im2col", "col2im_kernel", "no bounds check", [("if t < N * C * H * W:", BOUNDS)], "out_of_bounds"),
    ("16_4_im2col", "implicit_gemm", "X_col built after all",
     [("    Y = cuda.device_array((N, K, Ho, Wo), np.float32)",
       "    X_col = reference.im2col(X, R, S, padding, stride)\n    Y = cuda.device_array((N, K, Ho, Wo), np.float32)")], "allocation"),
    ("16_4_im2col", "implicit_gemm", "channel decoded with %",
     [("c, r, s = q // (R * S), (q // S) % R, q % S", "c, r, s = q % C, (q // S) % R, q % S")], "wrong_value"),
    ("16_4_im2col", "implicit_gemm", "no padding test", [("if 0 <= h < H and 0 <= w < Wd:", BOUNDS)], "out_of_bounds"),
    ("16_4_im2col", "implicit_gemm", "no barrier before the next tile",
     [("            acc += Ws[ty, t] * Xs[t, tx]\n        cuda.syncthreads()\n", "            acc += Ws[ty, t] * Xs[t, tx]\n")], "race"),
    ("16_4_im2col", "implicit_gemm", "X read in the product instead of the gathered tile",
     [("            acc += Ws[ty, t] * Xs[t, tx]",
       "            qq = q0 + t\n            hh, ww = y * stride + (qq // S) % R - padding, x * stride + qq % S - padding\n"
       "            if qq < CRS and j < NP and 0 <= hh < H and 0 <= ww < Wd:\n"
       "                acc += Ws[ty, t] * X[n, qq // (R * S), hh, ww]")], "global_reads"),
    ("16_4_im2col", "sgemm_kernel", "K rounded down to the tile", [("for k0 in range(0, K, BK):", "for k0 in range(0, K - BK + 1, BK):")],
     "k_edge"),
    ("16_4_im2col", "sgemm_kernel", "no barrier before the next tile",
     [("                    acc[i, j] += a[i] * b[j]\n        cuda.syncthreads()\n", "                    acc[i, j] += a[i] * b[j]\n")], "race"),
    ("16_4_im2col", "sgemm_kernel", "A's edge not zero-filled",
     [("As[kk, i] = A[row0 + i, k0 + kk] if row0 + i < M and k0 + kk < K else float32(0.0)", "As[kk, i] = A[row0 + i, k0 + kk]")],
     "out_of_bounds"),
    ("16_4_im2col", "sgemm_kernel", "no register blocking: every product reads shared memory twice",
     [("acc[i, j] += a[i] * b[j]", "acc[i, j] += As[kk, ty + 16 * i] * Bs[kk, tx + 16 * j]")], "shared_reads"),
    ("16_4_im2col", "sgemm_kernel", "A's values read from global memory",
     [("a[i] = As[kk, ty + 16 * i]", "a[i] = A[row0 + ty + 16 * i, k0 + kk] if row0 + ty + 16 * i < M and k0 + kk < K else float32(0.0)")],
     "global_reads"),
    # 16.5
    ("16_5_cudnn", "winograd_tile", "G's middle rows not halved", [("[0.5, 0.5, 0.5]", "[1, 1, 1]")], "filter_transform"),
    ("16_5_cudnn", "winograd_tile", "a sign in Bᵀ", [("[0, 1, 0, -1]]", "[0, 1, 0, 1]]")], "input_transform"),
    ("16_5_cudnn", "winograd_tile", "matrix product instead of ⊙", [("AT @ (U * V) @ AT.T", "AT @ (U @ V) @ AT.T")], "output_transform"),
    ("16_5_cudnn", "winograd_tile", "filter flipped", [("U = G @ g @ G.T", "U = G @ g[::-1, ::-1] @ G.T")], "flipped_filter"),
    ("16_5_cudnn", "choose", "no validation",
     [("        try:\n            validate(out, Y_ref)\n        except ValidationError:\n            continue\n", "")], "picked_wrong"),
    ("16_5_cudnn", "choose", "one output buffer for every candidate",
     [("        out = poisoned(Y_ref.shape, device=False)\n", ""),
      ("    best, best_time = None, float(\"inf\")", "    best, best_time = None, float(\"inf\")\n    out = poisoned(Y_ref.shape, device=False)")],
     "picked_unwritten"),
    ("16_5_cudnn", "choose", "supports() ignored", [("        if c.supports(X.shape, W.shape):\n            continue\n", "")], "unsupported"),
    ("16_5_cudnn", "loss_scaler", "counter kept after an overflow",
     [("            self.clean_steps = 0\n            return False", "            return False")], "counter_not_reset"),
    ("16_5_cudnn", "loss_scaler", "NaN not seen", [("if not all(np.isfinite(g).all() for g in grads):", "if any(np.isinf(g).any() for g in grads):")],
     "nan_missed"),
    ("16_5_cudnn", "loss_scaler", "overflowing step applied", [("            return False", "            return True")], "applied_overflow"),
    ("16_5_cudnn", "loss_scaler", "grows every step", [("if self.clean_steps == self.growth_interval:", "if True:")], "growth"),
    ("16_5_cudnn", "tc_gemm_kernel", "K's tail dropped", [("for k0 in range(0, K, 16):", "for k0 in range(0, K - 15, 16):")], "k_tail"),
    ("16_5_cudnn", "tc_gemm_kernel", "tail not zero-padded", [("A[row + r, k0 + c] if k0 + c < K else float16(0.0)", "A[row + r, k0 + c]")],
     "out_of_bounds"),
    ("16_5_cudnn", "tc_gemm_kernel", "B's tile transposed", [("b_tile[r, c] = B[k0 + r, col + c]", "b_tile[c, r] = B[k0 + r, col + c]")],
     "wrong_value"),
]


@pytest.mark.parametrize("assignment, grade_id, mistake, edits, kind", MUTANTS,
                         ids=[f"{m[1]}: {m[2]}" for m in MUTANTS])
def test_the_checks_catch_each_planted_mistake(assignment, grade_id, mistake, edits, kind):
    with pytest.raises(Mistake) as caught:
        run_exercise(assignment, grade_id, edits)
    kinds = kind if isinstance(kind, tuple) else (kind,)
    assert caught.value.kind in kinds, f"{mistake}: reported as {caught.value.kind}: {caught.value}"


SOLUTIONS = [(a, g) for a in NOTEBOOKS for g in exercises(a)]


@pytest.mark.parametrize("assignment, grade_id", SOLUTIONS, ids=[g for _, g in SOLUTIONS])
def test_each_solution_passes_its_visible_and_hidden_checks(assignment, grade_id):
    run_exercise(assignment, grade_id)


def test_the_speed_check_reuses_the_visible_checks_verdict_on_the_same_kernel_only():
    """A speed check first runs the exercise's visible check (core.speed_points); where that check
    has already judged this very kernel, its verdict is reused, a Mistake raised again; another
    kernel, a hidden check or a rerun of the visible one is judged afresh."""
    from gpulib.grading import core

    judged = []

    @core.remembered
    def check(kernel, hidden=False, seed=None):
        judged.append((kernel, hidden))
        if kernel.name == "cheat":
            raise Mistake("global_reads", "read from global memory")

    class Kernel:
        def __init__(self, name):
            self.name = name

    right, cheat, other = Kernel("right"), Kernel("cheat"), Kernel("right")
    check(right)
    with pytest.raises(Mistake, match="global_reads"):
        check(cheat)
    check.again(right)
    with pytest.raises(Mistake, match="global_reads"):
        check.again(cheat)
    assert judged == [(right, False), (cheat, False)]
    check.again(other)  # equal, not the same kernel
    check(right, hidden=True)
    check(right)
    assert judged[2:] == [(other, False), (right, True), (right, False)]
    with pytest.raises(Mistake, match="global_reads"):  # through a speed check (on the simulator: no timing)
        core.speed_points(cheat, "", (1,), (1,), None, {}, (), None, 3, 0, "kernel", correct=check)
    if not core.on_gpu():
        assert core.speed_points(right, "", (1,), (1,), None, {}, (), None, 3, 0, "kernel", correct=check) == 3
    assert len(judged) == 5


def test_every_exercise_has_three_planted_mistakes_with_their_own_messages():
    kinds = defaultdict(set)
    for assignment, grade_id, _, _, kind in MUTANTS:
        kinds[(assignment, grade_id)].add(kind if isinstance(kind, str) else kind[0])
    for assignment, grade_id in SOLUTIONS:
        assert len(kinds[(assignment, grade_id)]) >= 3, f"{grade_id}: mistakes planted {sorted(kinds[(assignment, grade_id)])}"


def test_an_endless_kernel_is_stopped_reported_and_leaves_no_thread_behind(monkeypatch):
    import threading
    import time

    import numpy as np
    from numba.cuda.simulator.kernel import BlockThread

    from gpulib.env import cuda
    from gpulib.grading import core, mlp

    monkeypatch.setattr(core, "TIMEOUT_S", 1.0)

    def endless(X, W, b, Y):
        i = 0
        while i < 1:
            i = i * 1

    rng = np.random.default_rng(0)
    X, W, b = core.values(rng, (20, 3)), core.values(rng, (5, 3)), core.values(rng, 5)
    with pytest.raises(Mistake) as caught:
        mlp.run_dense_forward(cuda.jit(endless), X, W, b, trace=True)
    assert caught.value.kind == "timeout" and "1초" in str(caught.value)
    # the watchdog leaves none spinning (threads of an earlier test that raised may take a moment to
    # end, several seconds when the other worker keeps the cores busy; an endless one never ends)
    alive = lambda: [t for t in threading.enumerate() if isinstance(t, BlockThread) and t.is_alive()]  # noqa: E731
    for _ in range(300):
        if not alive():
            break
        time.sleep(0.05)
    assert not alive()


def test_the_points_each_notebook_announces_are_the_points_it_grades():
    for assignment, path in NOTEBOOKS.items():
        cells = _cells(assignment)
        intro = "".join(cells[0]["source"])
        announced = [int(p) for p in re.findall(r"문제 \d+ \((\d+)점\)", intro)]
        per_exercise = []
        for cell in cells:
            meta = cell["metadata"].get("nbgrader", {})
            if meta.get("solution") and cell["cell_type"] == "code":
                per_exercise.append(0)
            elif meta.get("grade"):
                per_exercise[-1] += meta["points"]
        graded = [p for p in per_exercise if p]  # an optional exercise (선택 문제) has its check as feedback only
        assert announced == graded, (assignment, announced, per_exercise)
        assert len(per_exercise) >= 3


def test_the_cell_helper_writes_what_nbgrader_reads(tmp_path):
    import sys

    import nbformat

    sys.path.insert(0, str(ROOT / "tools"))
    from nbgrader_cells import code, md, solution, tests, write

    path = tmp_path / "a" / "a.ipynb"
    write([md("# 제목"), code("x = 1"), solution("def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION", "f"),
           tests("assert f() == 1", "check_f", points=2)], path)
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    graded = [c.metadata.nbgrader for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert graded == [{"grade": True, "grade_id": "check_f", "locked": True, "points": 2, "schema_version": 3,
                       "solution": False, "task": False}]
    assert [c.metadata.nbgrader["solution"] for c in nb.cells] == [False, False, True, False]
