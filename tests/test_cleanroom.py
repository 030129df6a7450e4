"""The clean room gives points only for solutions: cheats and non-solutions get none, correct
alternatives get all.

The banks below (CHEATS, ALTERNATIVES) are submissions: the solution notebook of an assignment
with some solution cells replaced (several exercises at once, so that one grading covers
several cheats). ``tests/test_cheat_bank_nbgrader.py`` submits each of them to nbgrader and
autogrades it in the clean room: every test cell of a replaced exercise must score zero with
the expected kind, or full points for an alternative. Here: the screen, the unpickler, the
sandbox and the compiler, alone.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from gpulib.grading.cleanroom import channel, sandbox, screen

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "assignments" / "source"


def _notebook(assignment):
    return json.loads((SOURCE / assignment / f"{assignment}.ipynb").read_text())


def solution_source(assignment, grade_id):
    """The instructor's solution of one exercise as a student would write it (no markers)."""
    import re

    for cell in _notebook(assignment)["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == grade_id:
            return re.sub(r"(?m)^\s*### (BEGIN|END) SOLUTION\n?", "", "".join(cell["source"]))
    raise KeyError(grade_id)


def submission(assignment, replaced: dict) -> dict:
    """The solution notebook with ``replaced`` {grade_id: source} solution cells."""
    submitted = _notebook(assignment)
    for cell in submitted["cells"]:
        gid = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if gid in replaced:
            cell["source"] = replaced[gid]
    return submitted


def exercise_tests(assignment):
    """{solution grade_id: [its test cells' grade_ids]}."""
    found, current = {}, None
    for cell in _notebook(assignment)["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if meta.get("solution"):
            current = meta["grade_id"]
            found[current] = []
        elif meta.get("grade") and current:
            found[current].append(meta["grade_id"])
    return found


# -- cheats and non-solutions: (assignment, {solution cell: source}, {solution cell: expected kinds})

HOST_NUMPY = '''
def dense_forward_kernel(X, W, b, Y):
    """A 'kernel' that is plain Python on the host."""
    Y[...] = np.maximum(X @ W.T + b, 0.0)
'''
NUMPY_IN_KERNEL = '''
@cuda.jit
def input_grad_kernel(dZ, W, dX):
    if cuda.threadIdx.x == 0 and cuda.threadIdx.y == 0 and cuda.blockIdx.x == 0 and cuda.blockIdx.y == 0:
        dX[:, :] = np.dot(dZ, W)


@cuda.jit
def weight_grad_kernel(dZ, X, dW, db):
    if cuda.threadIdx.x == 0 and cuda.threadIdx.y == 0 and cuda.blockIdx.x == 0 and cuda.blockIdx.y == 0:
        dW[:, :] = np.dot(dZ.T, X)
        db[:] = dZ.sum(axis=0)
'''
PATCH_THE_CHECK = '''
grade.check_softmax_xent = lambda *args, **kwargs: print("통과")

@cuda.jit
def softmax_xent_kernel(Z, labels, P, loss):
    pass
'''
ONE_THREAD_PER_BLOCK = '''
@cuda.jit
def dense_forward_kernel(X, W, b, Y):
    """Thread (0, 0) of each block computes the block's whole 16x16 patch."""
    if cuda.threadIdx.x == 0 and cuda.threadIdx.y == 0:
        for dn in range(cuda.blockDim.y):
            for dj in range(cuda.blockDim.x):
                n = cuda.blockIdx.y * cuda.blockDim.y + dn
                j = cuda.blockIdx.x * cuda.blockDim.x + dj
                if n < Y.shape[0] and j < Y.shape[1]:
                    acc = b[j]
                    for i in range(X.shape[1]):
                        acc += X[n, i] * W[j, i]
                    Y[n, j] = max(acc, 0.0)
'''
ENVIRONMENT = '''
import os
GRADING = os.environ.get("NBGRADER_EXECUTION")  # tell the hidden run from the student's
''' + solution_source("16_1_mlp", "dense_backward_kernels")
REFERENCE = '''
from gpulib import reference

def softmax_xent_kernel(Z, labels, P, loss):
    P[...], loss[...] = reference.softmax_cross_entropy(Z, labels)[::-1]
'''
WINOGRAD_BY_DEFINITION = solution_source("16_5_cudnn", "winograd_tile").replace(
    "    Y = AT @ (U * V) @ AT.T\n",
    "    Y = np.array([[(d[i:i + 3, j:j + 3] * g).sum() for j in range(2)] for i in range(2)])\n")
CHOOSE_BY_NAME = '''
def choose(candidates, X, W, Y_ref, timer):
    right = [name for name, c in candidates.items() if c.run.__name__ == "_conv"]
    return min(right, key=lambda name: candidates[name].seconds)
'''
GLOBAL_FRAGMENTS = solution_source("16_5_cudnn", "tc_gemm_kernel").replace(
    "        wmma.load_a_shared(a, a_tile, 0, 0)\n", "        wmma.load_a_shared(a, a_tile, 0, 0)\n"
    "        if k0 + 16 <= K:\n            wmma.load_a(a, A, row, k0)\n")
ONE_THREAD_LOADS_THE_TILE = solution_source("16_3_tiled_conv", "conv_tiled_kernel").replace(
    "        for i in range(ty * TILE + tx, IN_TILE * IN_TILE, TILE * TILE):",
    "        for i in range(0, IN_TILE * IN_TILE if ty * TILE + tx == 0 else 0):")
DIRECT_ONE_THREAD = '''
@cuda.jit
def conv_direct_kernel(X, W, Y, padding, stride):
    """Thread 0 of block (0, 0, z) computes the whole image z."""
    if cuda.threadIdx.x == 0 and cuda.threadIdx.y == 0 and cuda.blockIdx.x == 0 and cuda.blockIdx.y == 0:
        K = W.shape[0]
        n, k = cuda.blockIdx.z // K, cuda.blockIdx.z % K
        for y in range(Y.shape[2]):
            for x in range(Y.shape[3]):
                acc = 0.0
                for c in range(X.shape[1]):
                    for r in range(W.shape[2]):
                        for s in range(W.shape[3]):
                            h, w = y * stride + r - padding, x * stride + s - padding
                            if 0 <= h < X.shape[2] and 0 <= w < X.shape[3]:
                                acc += W[k, c, r, s] * X[n, c, h, w]
                Y[n, k, y, x] = acc
'''
IM2COL_IN_NUMPY = '''
@cuda.jit
def im2col_kernel(X, X_col, R, S, padding, stride, Ho, Wo):
    t = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if t == 0:
        N, C, H, Wd = X.shape
        Xp = np.zeros((N, C, H + 2 * padding, Wd + 2 * padding), np.float32)
        Xp[:, :, padding:padding + H, padding:padding + Wd] = X
        for c in range(C):
            for r in range(R):
                for s in range(S):
                    rows = Xp[:, c, r:r + stride * Ho:stride, s:s + stride * Wo:stride]
                    X_col[(c * R + r) * S + s, :] = rows.reshape(-1)
'''
TRANSPOSED_COPIES = '''
def gemm_rowmajor(W_buf, ld_w, X_buf, ld_x, Y_buf, ld_y, K, CRS, NP):
    W_t = np.ascontiguousarray(W_buf.reshape(K, ld_w)[:, :CRS].T).ravel()
    X_t = np.ascontiguousarray(X_buf.reshape(CRS, ld_x)[:, :NP].T).ravel()
    Y_t = np.zeros(K * NP, np.float32)
    sgemm("N", "N", K, NP, CRS, 1.0, W_t, K, X_t, CRS, 0.0, Y_t, K)
    Y_buf.reshape(K, ld_y)[:, :NP] = Y_t.reshape(NP, K).T
'''
PRODUCT_BY_HAND = '''
def gemm_rowmajor(W_buf, ld_w, X_buf, ld_x, Y_buf, ld_y, K, CRS, NP):
    W = W_buf.reshape(K, ld_w)[:, :CRS]
    X = X_buf.reshape(CRS, ld_x)[:, :NP]
    Y_buf.reshape(K, ld_y)[:, :NP] = W @ X
    sgemm("N", "N", NP, K, CRS, 0.0, X_buf, ld_x, W_buf, ld_w, 1.0, Y_buf, ld_y)
'''
X_COL_PER_CHANNEL = solution_source("16_4_im2col", "implicit_gemm").replace(
    "    grid, block = grade.implicit_gemm_grid(K, N * Ho * Wo)\n",
    "    pieces = [np.zeros((R * S, N * Ho * Wo), np.float32) for c in range(C)]\n"
    "    grid, block = grade.implicit_gemm_grid(K, N * Ho * Wo)\n")
SGEMM = solution_source("16_4_im2col", "sgemm_kernel")
SGEMM_ONE_THREAD_LOADS = SGEMM.replace(
    "        for e in range(tid, BM * BK, 256):", "        for e in range(0, BM * BK if tid == 0 else 0):").replace(
    "        for e in range(tid, BK * BN, 256):", "        for e in range(0, BK * BN if tid == 0 else 0):")
SGEMM_FROM_GLOBAL = SGEMM.replace(
    "                a[i] = As[kk, ty + 16 * i]",
    "                a[i] = A[row0 + ty + 16 * i, k0 + kk] if row0 + ty + 16 * i < M and k0 + kk < K else 0.0",
).replace(
    "                b[j] = Bs[kk, tx + 16 * j]",
    "                b[j] = B[k0 + kk, col0 + tx + 16 * j] if k0 + kk < K and col0 + tx + 16 * j < N else 0.0",
)
UNTILED_IMPLICIT = (
    solution_source("16_4_im2col", "implicit_gemm").split("    # 대략 25줄")[0]
    + """    CRS = C * R * S
    if k < K and j < N * Ho * Wo:
        n, y, x = j // (Ho * Wo), (j // Wo) % Ho, j % Wo
        acc = 0.0
        for q in range(CRS):
            c, r, s = q // (R * S), (q // S) % R, q % S
            h, w = y * stride + r - padding, x * stride + s - padding
            if 0 <= h < H and 0 <= w < Wd:
                acc += W[k, c, r, s] * X[n, c, h, w]
        Y[n, k, y, x] = acc
"""
    + "\n\ndef conv2d_implicit"
    + solution_source("16_4_im2col", "implicit_gemm").split("\n\ndef conv2d_implicit")[1]
)

CHEATS = [
    (
        "16_1_mlp",
        {"dense_forward_kernel": HOST_NUMPY, "dense_backward_kernels": NUMPY_IN_KERNEL, "softmax_xent_kernel": PATCH_THE_CHECK},
        {
            "dense_forward_kernel": {"not_a_kernel"},
            "dense_backward_kernels": {"not_compilable"},
            "softmax_xent_kernel": {"refused"},
        },
    ),
    (
        "16_1_mlp",
        {"dense_forward_kernel": ONE_THREAD_PER_BLOCK, "dense_backward_kernels": ENVIRONMENT, "softmax_xent_kernel": REFERENCE},
        {"dense_forward_kernel": {"thread_mapping"}, "dense_backward_kernels": {"refused"}, "softmax_xent_kernel": {"refused"}},
    ),
    (
        "16_5_cudnn",
        {"winograd_tile": WINOGRAD_BY_DEFINITION, "choose": CHOOSE_BY_NAME, "tc_gemm_kernel": GLOBAL_FRAGMENTS},
        {"winograd_tile": {"not_transforms"}, "choose": {"refused"}, "tc_gemm_kernel": {"fragments_from_global"}},
    ),
    (
        "16_3_tiled_conv",
        {"conv_direct_kernel": DIRECT_ONE_THREAD, "conv_tiled_kernel": ONE_THREAD_LOADS_THE_TILE},
        {"conv_direct_kernel": {"thread_mapping"}, "conv_tiled_kernel": {"cooperative_load"}},
    ),
    (  # (every exercise of the assignment cheats: a correct exercise beside them would cost a full grading)
        "16_4_im2col",
        {"im2col_kernel": IM2COL_IN_NUMPY, "gemm_rowmajor": TRANSPOSED_COPIES, "implicit_gemm": X_COL_PER_CHANNEL,
         "sgemm_kernel": SGEMM_FROM_GLOBAL},
        {"im2col_kernel": {"not_compilable"}, "gemm_rowmajor": {"copied_operands"}, "implicit_gemm": {"allocation"},
         "sgemm_kernel": {"global_reads"}},
    ),
    (
        "16_4_im2col",
        {"gemm_rowmajor": PRODUCT_BY_HAND, "sgemm_kernel": SGEMM_ONE_THREAD_LOADS, "implicit_gemm": UNTILED_IMPLICIT},
        {"gemm_rowmajor": {"not_from_sgemm"}, "sgemm_kernel": {"cooperative_load"}, "implicit_gemm": {"global_reads"}},
    ),
]


# -- correct alternatives: other loop orders, grid-stride loops, warnings, what the statement leaves free

ONLINE_SOFTMAX = '''
import math


@cuda.jit
def softmax_xent_kernel(Z, labels, P, loss):
    """One pass for the maximum and the sum together (online softmax), a second for P."""
    n = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if n < Z.shape[0]:
        m = Z[n, 0]
        total = 1.0
        for c in range(1, Z.shape[1]):
            z = Z[n, c]
            if z > m:
                total = total * math.exp(m - z) + 1.0
                m = z
            else:
                total += math.exp(z - m)
        for c in range(Z.shape[1]):
            P[n, c] = math.exp(Z[n, c] - m) / total
        loss[n] = math.log(total) - (Z[n, labels[n]] - m)
'''
GRID_STRIDE_FORWARD = '''
@cuda.jit
def dense_forward_kernel(X, W, b, Y):
    """A grid-stride loop over the columns, the reduction in the other order."""
    n = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    start = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    for j in range(start, Y.shape[1], cuda.gridDim.x * cuda.blockDim.x):
        if n < Y.shape[0]:
            acc = 0.0
            for i in range(X.shape[1] - 1, -1, -1):
                acc += W[j, i] * X[n, i]
            Y[n, j] = max(acc + b[j], 0.0)
'''
TILE_BY_ROWS = solution_source("16_3_tiled_conv", "conv_tiled_kernel").replace(
    "        for i in range(ty * TILE + tx, IN_TILE * IN_TILE, TILE * TILE):\n"
    "            h, w = y0 + i // IN_TILE, x0 + i % IN_TILE\n"
    "            if h < X.shape[2] and w < X.shape[3]:\n"
    "                tile[i // IN_TILE, i % IN_TILE] = X[n, c, h, w]\n",
    "        for dy in range(ty, IN_TILE, TILE):\n"
    "            for dx in range(tx, IN_TILE, TILE):\n"
    "                if y0 + dy < X.shape[2] and x0 + dx < X.shape[3]:\n"
    "                    tile[dy, dx] = X[n, c, y0 + dy, x0 + dx]\n",
)
WARNING_TUNER = (
    solution_source("16_5_cudnn", "choose")
    .replace(
        "        if c.supports(X.shape, W.shape):\n            continue\n",
        "        if c.supports(X.shape, W.shape):\n            warnings.warn(f'{name}: ' + c.supports(X.shape, W.shape))\n"
        "            continue\n",
    )
    .replace("def choose(", "import warnings\n\n\ndef choose(")
)
ZEROING_SCALER = solution_source("16_5_cudnn", "loss_scaler").replace(
    "            self.scale /= 2\n",
    "            for g in grads:\n                g[...] = 0.0  # as some frameworks do\n            self.scale /= 2\n",
)
SGEMM_CONTIGUOUS = (
    SGEMM.replace("As = cuda.shared.array((BK, BM), float32)", "As = cuda.shared.array((BM, BK), float32)")
    .replace("As[kk, i] = A[", "As[i, kk] = A[")
    .replace("a[i] = As[kk, ty + 16 * i]", "a[i] = As[ty * TM + i, kk]")
    .replace("b[j] = Bs[kk, tx + 16 * j]", "b[j] = Bs[kk, tx * TN + j]")
    .replace(
        "            if row0 + ty + 16 * i < M and col0 + tx + 16 * j < N:\n"
        "                C[row0 + ty + 16 * i, col0 + tx + 16 * j] = acc[i, j]",
        "            if row0 + ty * TM + i < M and col0 + tx * TN + j < N:\n"
        "                C[row0 + ty * TM + i, col0 + tx * TN + j] = acc[i, j]",
    )
)
IMPLICIT_BY_TAPS = solution_source("16_4_im2col", "implicit_gemm").replace(
    "        for t in range(T):\n            acc += Ws[ty, t] * Xs[t, tx]\n",
    "        for t in range(T - 1, -1, -1):\n            acc += Xs[t, tx] * Ws[ty, t]\n",
)

ALTERNATIVES = [
    ("16_1_mlp", {"dense_forward_kernel": GRID_STRIDE_FORWARD, "softmax_xent_kernel": ONLINE_SOFTMAX}),
    ("16_3_tiled_conv", {"conv_tiled_kernel": TILE_BY_ROWS}),
    ("16_4_im2col", {"sgemm_kernel": SGEMM_CONTIGUOUS, "implicit_gemm": IMPLICIT_BY_TAPS}),
    ("16_5_cudnn", {"choose": WARNING_TUNER, "loss_scaler": ZEROING_SCALER}),
]


# -- the pieces


def test_the_screen_passes_every_solution_and_names_the_line_it_refuses():
    for path in sorted(SOURCE.glob("*/*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["metadata"].get("nbgrader", {}).get("solution"):
                assert screen.screen("".join(cell["source"])) == [], path.name
    refused = {
        "import os": 1,
        "x = 1\nfrom gpulib.grading import core": 2,
        "np.abs = abs": 1,
        "f.__globals__": 1,
        "getattr(np, 'abs')": 1,
        "open('gradebook.db', 'w')": 1,
        "import gc": 1,
        "a = t._tracer": 1,
        "exec('1')": 1,
        "x = 1\n\ny = np.ctypeslib": 3,
        "'{0.__class__}'.format(1)": 1,
        "global q": 1,
        "reference.conv2d": 1,
    }
    for source, line in refused.items():
        found = screen.screen(source)
        assert found and found[0].line == line, (source, found)
    assert screen.screen("class A:\n    def f(self):\n        self.x = 1") == []


def test_the_judge_rebuilds_data_and_refuses_anything_else():
    import numpy as np

    data = {"a": np.arange(3.0), "b": ("tuple", (1, "x")), "c": {1, 2}, "d": np.float32(2)}
    assert channel.safe_loads(pickle.dumps(data, protocol=4))["a"].tolist() == [0.0, 1.0, 2.0]

    class Evil:
        def __reduce__(self):
            return (subprocess.call, (["true"],))

    with pytest.raises(pickle.UnpicklingError, match="subprocess.call"):
        channel.safe_loads(pickle.dumps(Evil()))


@pytest.mark.skipif(not sandbox.landlock_abi(), reason="this kernel has no Landlock")
def test_the_sandbox_writes_only_in_its_own_folder(tmp_path):
    folder, outside = tmp_path / "room", tmp_path / "outside.txt"
    code = (
        f"import os\nopen('inside.txt', 'w').write('x')\n"
        f"try:\n    open({str(outside)!r}, 'w')\n    print('outside written')\nexcept OSError:\n    print('refused')\n"
        f"print(sorted(k for k in os.environ if k.startswith('NBGRADER')))"
    )
    result = subprocess.run(
        sandbox.command(str(folder), [sys.executable, "-c", code]),
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "NBGRADER_EXECUTION": "autograde"},
        timeout=60,
    )
    assert result.stdout.split() == ["refused", "[]"], result.stdout + result.stderr
    assert (folder / "inside.txt").exists() and not outside.exists()


REFERENCE_KERNELS = {  # the yardsticks of the speed checks, with the argument types of their timed launch
    "gpulib.grading.direct_conv:reference_tiled_kernel": [("float32", 4)] * 3,
    "gpulib.grading.im2col:reference_sgemm_kernel": [("float32", 2)] * 3,
    "gpulib.grading.cudnn:reference_tc_gemm_kernel": [("float16", 2), ("float16", 2), ("float32", 2)],
}


def test_the_speed_checks_reference_kernels_compile_for_a_gpu():
    """A reference kernel runs only on a GPU (the speed checks skip the simulator): NVVM compiles
    each for compute capability 9.0 here, as the clean room compiles a student's."""
    script = (
        "import importlib, sys\nimport gpulib.env\nfrom numba import cuda, from_dtype, types\nimport numpy as np\n"
        "from gpulib.grading.cleanroom import compile as c\nc.prepare_numba()\n"
        f"for name, args in {REFERENCE_KERNELS!r}.items():\n"
        "    module, attr = name.split(':')\n"
        "    fn = getattr(importlib.import_module(module), attr).py_func\n"
        "    sig = tuple(types.Array(from_dtype(np.dtype(d)), n, 'C') for d, n in args)\n"
        "    ptx, _ = cuda.compile_ptx(fn, sig, cc=c.CC)\n"
        "    print(name, len(ptx))\n"
    )
    import os

    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, GPULIB_BACKEND="ptx"),
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(result.stdout.split("\n")) > len(REFERENCE_KERNELS), result.stdout
