"""The memory tracer: exact counts on a case worked out by hand, races, and untiled kernels."""

import numpy as np
import pytest
from numba import cuda, float32

from gpulib import reference as ref
from gpulib.conv import direct
from gpulib.trace import trace


def conv_v1_trace(X, W, padding=0):
    K = W.shape[0]
    Ho = X.shape[2] + 2 * padding - W.shape[2] + 1
    Wo = X.shape[3] + 2 * padding - W.shape[3] + 1
    Y = np.full((X.shape[0], K, Ho, Wo), np.nan, np.float32)
    b = np.zeros(K, np.float32)
    t = trace(direct.conv2d_v1_kernel, (1, 1, X.shape[0] * K), (Wo, Ho), X, W, b, Y, padding, 1,
              names=("X", "W", "b", "Y"))
    return t, Y


def test_hand_worked_counts_of_version_1(rng):
    # X 4x4, one 3x3 filter, no padding: 2x2 outputs, one thread each.
    X = rng.standard_normal((1, 1, 4, 4)).astype(np.float32)
    W = rng.standard_normal((1, 1, 3, 3)).astype(np.float32)
    t, Y = conv_v1_trace(X, W)
    np.testing.assert_allclose(Y, ref.conv2d(X, W), rtol=1e-5)
    # every thread reads C·R·S = 9 inputs and 9 weights: the chapter's first problem
    assert t.reads_per_thread("X").tolist() == [9, 9, 9, 9]
    assert t.reads_per_thread("W").tolist() == [9, 9, 9, 9]
    # an input element is read by as many threads as windows cover it: the second problem
    covering = [[1, 2, 2, 1], [2, 4, 4, 2], [2, 4, 4, 2], [1, 2, 2, 1]]
    np.testing.assert_array_equal(t.element_reads("X")[0, 0], covering)
    np.testing.assert_array_equal(t.distinct_readers("X")[0, 0], covering)
    np.testing.assert_array_equal(t.element_reads("W")[0, 0], np.full((3, 3), 4))
    np.testing.assert_array_equal(t.element_writes("Y")[0, 0], np.ones((2, 2)))
    assert t.global_reads() == 36 + 36 + 4 and t.shared_reads() == 0
    assert t.tiling_problems() == ["no shared memory is allocated: the kernel is not tiled"]


def test_version_2_reads_each_input_once_per_block_and_has_no_races(rng):
    X = rng.standard_normal((1, 2, 10, 10)).astype(np.float32)
    W = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    Y = np.full((1, 4, 10, 10), np.nan, np.float32)
    t2 = trace(direct.conv2d_v2_kernel(3, 3, 1, 4), (1, 1, 1), (16, 16), X, W, b, Y, 1,
               names=("X", "W", "b", "Y"))
    np.testing.assert_allclose(Y, ref.conv2d(X, W, b, 1), atol=1e-5)
    assert t2.race_count == 0 and t2.tiling_problems() == []
    # one block covers the whole 10x10 image: every input element leaves global memory once
    np.testing.assert_array_equal(t2.element_reads("X"), np.ones_like(X))
    np.testing.assert_array_equal(t2.element_reads("W"), np.ones_like(W))
    t1, _ = conv_v1_trace(X, W, padding=1)
    assert t1.arrays["X"].reads_by_element.sum() > 30 * t2.arrays["X"].reads_by_element.sum()
    assert t2.shared_reads() > 0


TILE = 32


@cuda.jit
def neighbour_sum(x, y, rounds, first_barrier, second_barrier):
    """y[i] = Σ_rounds (x[i+1] + round), neighbour read through a shared tile."""
    tile = cuda.shared.array(TILE, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TILE + t
    acc = float32(0.0)
    for rep in range(rounds):
        tile[t] = x[i] + rep
        if first_barrier:
            cuda.syncthreads()
        acc += tile[(t + 1) % TILE]
        if second_barrier:
            cuda.syncthreads()
    y[i] = acc


def run_neighbour_sum(first, second, rounds=2):
    x = np.arange(2 * TILE, dtype=np.float32)
    y = np.full_like(x, np.nan)
    t = trace(neighbour_sum, 2, TILE, x, y, rounds, first, second, names=("x", "y"))
    return t, y


def test_barriers_in_place_no_race():
    t, y = run_neighbour_sum(True, True)
    assert t.race_count == 0 and t.tiling_problems() == []
    block_start = np.repeat([0, TILE], TILE)
    neighbour = block_start + (np.arange(2 * TILE) + 1) % TILE
    np.testing.assert_array_equal(y, 2 * neighbour + 1)


def test_missing_first_barrier_is_a_read_after_write_race():
    t, _ = run_neighbour_sum(False, True, rounds=1)
    assert t.race_count > 0
    assert {r.kind for r in t.races} <= {"read after write", "write after read"}
    assert "race" in t.tiling_problems()[0]
    assert "tile" in str(t.races[0]) and "no syncthreads" in str(t.races[0])


def test_missing_second_barrier_is_a_write_after_read_race():
    t, _ = run_neighbour_sum(True, False, rounds=2)
    assert t.race_count > 0


@cuda.jit
def untiled_copy(x, y):
    tile = cuda.shared.array(TILE, float32)
    i = cuda.grid(1)
    tile[cuda.threadIdx.x] = x[i]
    cuda.syncthreads()
    y[i] = x[i]  # reads global memory again instead of the tile


def test_a_kernel_that_never_reads_its_tile_is_reported():
    x = np.arange(TILE, dtype=np.float32)
    t = trace(untiled_copy, 1, TILE, x, np.zeros_like(x), names=("x", "y"))
    assert any("never read" in p for p in t.tiling_problems())


@cuda.jit
def off_by_one(x, y):
    i = cuda.grid(1)
    y[i] = x[i + 1]


def test_out_of_bounds_access_is_an_error():
    x = np.arange(8, dtype=np.float32)
    with pytest.raises(IndexError, match=r"x\[8\]: index 8 is out of bounds"):
        trace(off_by_one, 1, 8, x, np.zeros_like(x), names=("x", "y"))


def test_tile_explorer_counts_come_from_the_trace(monkeypatch):
    import matplotlib
    matplotlib.use("Agg")
    from gpulib.figures.tiling_explorer import TileExplorer, traced_layer
    from gpulib.style import use_korean_font
    use_korean_font()

    t1, layer = traced_layer("v1", 4)
    t2, _ = traced_layer("v2", 4)
    # version 2 reads each input of a block's tile (halo included) once: 6x6 for a 4x4 tile
    assert t2.block_reads("X", (1, 1, 0)) == 36
    assert t1.block_reads("X", (1, 1, 0)) == 16 * 9  # 16 outputs x 3x3 taps, all inside
    assert t2.global_reads() < t1.global_reads() and t2.race_count == 0
    explorer = TileExplorer()
    explorer.version.value = "v2"
    assert "X 전역 읽기 36회" in explorer.text.value and "출력 32개" in explorer.text.value
    assert bytes(explorer.image.value).startswith(b"\x89PNG")


def test_version_2_without_a_barrier_races(rng):
    X = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    W = rng.standard_normal((2, 2, 3, 3)).astype(np.float32)
    b = np.zeros(2, np.float32)
    for flags in ((False, True), (True, False)):
        Y = np.full((1, 2, 6, 6), np.nan, np.float32)
        kernel = direct.conv2d_v2_kernel(3, 3, 1, 2, 4, *flags)
        t = trace(kernel, (2, 2, 1), (4, 4), X, W, b, Y, 1, names=("X", "W", "b", "Y"))
        assert t.race_count > 0, flags


def test_the_tracer_also_runs_in_a_process_on_the_real_cuda_target():
    """On a GPU machine the kernels are CUDA dispatchers; the tracer still runs them (and the
    device functions they call) on the simulator. The real target imports without a GPU."""
    import os
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import warnings
        import numpy as np
        from numba import cuda
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import gpulib
        from gpulib import reference as ref
        from gpulib.mlp import kernels
        from gpulib.trace import trace
        assert "simulator" not in type(kernels.dense_forward_kernel).__module__
        rng = np.random.default_rng(0)
        X, W = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((2, 4)).astype(np.float32)
        b, H = np.zeros(2, np.float32), np.full((3, 2), np.nan, np.float32)
        t = trace(kernels.dense_forward_kernel, (1, 1), (2, 3), X, W, b, H, 1, names=("X", "W", "b", "H"))
        assert np.allclose(H, ref.dense_forward(X, W, b, "relu"), atol=1e-6)
        print("reads of X:", int(t.element_reads("X").sum()))
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("GPULIB_BACKEND", "NUMBA_ENABLE_CUDASIM")}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "reads of X: 24" in proc.stdout


# ---- the blind spots: a planted mistake of each kind, and a correct twin that must stay clean
N_THREADS = 16


@cuda.jit
def count_into_shared(out, atomic):
    """Every thread adds 1 to a shared counter (atomically, or with a plain += when not)."""
    counter = cuda.shared.array(1, float32)
    t = cuda.threadIdx.x
    if t == 0:
        counter[0] = 0.0
    cuda.syncthreads()
    if atomic:
        cuda.atomic.add(counter, 0, 1.0)
    else:
        counter[0] += 1.0
    cuda.syncthreads()
    if t == 0:
        out[0] = counter[0]


@pytest.mark.parametrize("atomic", [True, False])
def test_atomics_on_shared_memory_are_not_races_but_plain_updates_are(atomic):
    out = np.zeros(1, np.float32)
    t = trace(count_into_shared, 1, N_THREADS, out, atomic, names=("out",))
    if atomic:
        assert out[0] == N_THREADS and t.race_count == 0 and t.arrays["counter"].atomics == N_THREADS
    else:
        assert t.race_count > 0 and {r.kind for r in t.races} & {"read after write", "write after write"}


@cuda.jit
def stage(x, y, slot_per_two_threads):
    """Stage x in a shared tile and write it back; with slot_per_two_threads, two threads write
    the same slot in one barrier interval."""
    tile = cuda.shared.array(N_THREADS, float32)
    t = cuda.threadIdx.x
    slot = t // 2 if slot_per_two_threads else t
    tile[slot] = x[t]
    cuda.syncthreads()
    y[t] = tile[slot]


@pytest.mark.parametrize("clash", [True, False])
def test_two_threads_writing_one_shared_slot_is_a_write_after_write_race(clash):
    x = np.arange(N_THREADS, dtype=np.float32) + 1
    t = trace(stage, 1, N_THREADS, x, np.zeros_like(x), clash, names=("x", "y"))
    if clash:
        assert t.race_count == N_THREADS // 2 and {r.kind for r in t.races} == {"write after write"}
        assert "tile" in t.tiling_problems()[0]
    else:
        assert t.race_count == 0 and t.tiling_problems() == []


@cuda.jit
def tiled_double(x, y, partial):
    """y = 2·x through a shared tile; with ``partial``, the second term is read from global memory again."""
    tile = cuda.shared.array(N_THREADS, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * N_THREADS + t
    tile[t] = x[i]
    cuda.syncthreads()
    y[i] = tile[t] + (x[i] if partial else tile[t])


@pytest.mark.parametrize("partial", [True, False])
def test_a_tile_staged_but_bypassed_is_partial_tiling(partial, rng):
    x = rng.standard_normal(2 * N_THREADS).astype(np.float32)
    y = np.zeros_like(x)
    t = trace(tiled_double, 2, N_THREADS, x, y, partial, names=("x", "y"))
    np.testing.assert_array_equal(y, 2 * x)  # the answer is right either way: only the trace tells
    if partial:
        assert t.direct_reads("x") == 2 * N_THREADS
        assert t.tiling_problems() == [f"partial tiling: 'x' is staged in shared memory, but {2 * N_THREADS} of its "
                                       f"{4 * N_THREADS} reads still come from global memory"]
    else:
        assert t.direct_reads("x") == 0 and t.tiling_problems() == []


@cuda.jit
def reverse_in_block(x, y, diverge):
    """y = x reversed within the block; with ``diverge``, only the first half of the threads
    reach the barrier."""
    tile = cuda.shared.array(N_THREADS, float32)
    t = cuda.threadIdx.x
    tile[t] = x[t]
    if not diverge or t < N_THREADS // 2:
        cuda.syncthreads()
    y[t] = tile[N_THREADS - 1 - t]


@pytest.mark.parametrize("diverge", [True, False])
def test_a_barrier_some_threads_skip_is_reported_as_divergent(diverge):
    x = np.arange(N_THREADS, dtype=np.float32)
    t = trace(reverse_in_block, 1, N_THREADS, x, np.zeros_like(x), diverge, names=("x", "y"))
    if diverge:
        [d] = t.divergent_barriers
        assert d.block == (0, 0, 0) and sorted(d.counts) == [0, 1]
        assert d.counts[0][0] == (N_THREADS // 2, 0, 0)  # the first thread that skipped it, named
        assert t.race_count == 0  # not mistaken for a race
        assert t.tiling_problems()[0].startswith("divergent barrier in block (0, 0, 0): 8 thread(s) passed 0")
    else:
        assert t.divergent_barriers == [] and t.race_count == 0 and t.tiling_problems() == []


def test_the_books_tiled_kernels_are_clean(rng):
    from gpulib.conv import implicit_gemm
    from gpulib.gemm import kernels as gemm_kernels

    A = rng.standard_normal((20, 11)).astype(np.float32)
    B = rng.standard_normal((11, 18)).astype(np.float32)
    for kernel, grid, block in ((gemm_kernels.gemm_v2_kernel, (2, 2), (16, 16)),
                                (gemm_kernels.gemm_v3_kernel(**gemm_kernels.V3_SIM), (2, 2), (8, 8))):
        C = np.zeros((20, 18), np.float32)
        t = trace(kernel, grid, block, A, B, C, names=("A", "B", "C"))
        np.testing.assert_allclose(C, A @ B, rtol=1e-5, atol=1e-5)
        assert t.tiling_problems() == [], t.tiling_problems()
    X = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    W = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    Y = np.zeros((1, 3, 5, 5), np.float32)
    tile = implicit_gemm.TILE_SIM
    kernel = implicit_gemm.implicit_gemm_kernel(3, 3, True, **tile)
    t = trace(kernel, (2, 1), (tile["BN"] // tile["TN"], tile["BM"] // tile["TM"]), X, W.reshape(3, -1), np.zeros(3, np.float32),
              Y, 1, 1, implicit_gemm.row_table(2, 3, 3), names=("X", "W_mat", "b", "Y", "padding", "stride", "rows"))
    np.testing.assert_allclose(Y, ref.conv2d(X, W, None, 1), rtol=1e-4, atol=1e-4)
    assert t.tiling_problems() == [], t.tiling_problems()
