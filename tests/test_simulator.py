"""The simulator's scheduling (gpulib/simulator.py): a kernel without barriers runs its block's
threads one after another in one Python thread, with the right indices, results and error
messages; a kernel with a barrier, also one reached through a device function, a kernel
factory's closure or a module, runs its block's threads as greenlets of one Python thread that
meet at every barrier; a wait no thread can end is an error at once; a barrier the analysis
cannot see stops the kernel loudly."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import gpulib
from gpulib import simulator
from gpulib.env import cuda

pytestmark = pytest.mark.skipif(not gpulib.on_simulator(), reason="the simulator's scheduling")

BLOCK = (4, 3, 2)


@cuda.jit
def _who_am_i(out, idents):
    x, y, z = cuda.threadIdx.x, cuda.threadIdx.y, cuda.threadIdx.z
    b = cuda.blockIdx.x
    t = x + cuda.blockDim.x * (y + cuda.blockDim.y * z)
    n = cuda.blockDim.x * cuda.blockDim.y * cuda.blockDim.z
    out[b * n + t, 0] = x
    out[b * n + t, 1] = y
    out[b * n + t, 2] = z
    out[b * n + t, 3] = b
    out[b * n + t, 4] += 1
    idents[b * n + t] = threading.get_ident()


@cuda.jit(device=True)
def _wait():
    cuda.syncthreads()


@cuda.jit
def _barrier_in_device_function(out):
    _wait()
    out[cuda.threadIdx.x] = 1.0


def _factory():
    wait = _wait

    @cuda.jit
    def kernel(out):
        wait()
        out[cuda.threadIdx.x] = 1.0

    return kernel


@cuda.jit
def _hidden_barrier(out):
    getattr(cuda, "sync" + "threads")()
    out[cuda.threadIdx.x] = 1.0


@cuda.jit
def _fails_at_thread_5(out):
    i = cuda.threadIdx.x
    out[i] = 1.0
    if i == 5:
        out[100 + i] = 1.0  # out of bounds


def test_a_barrier_free_block_runs_in_one_python_thread_with_every_index_right():
    n = int(np.prod(BLOCK))
    out = np.zeros((3 * n, 5), np.int64)
    idents = np.zeros(3 * n, np.int64)
    _who_am_i[3, BLOCK](out, idents)
    want = np.array([(x, y, z, b, 1) for b in range(3) for z in range(BLOCK[2])
                     for y in range(BLOCK[1]) for x in range(BLOCK[0])])
    np.testing.assert_array_equal(out, want)  # every thread once, with its own threadIdx and blockIdx
    assert len(set(idents[:n])) == 1 and threading.get_ident() not in set(idents)


@cuda.jit
def _reverse_in_block_where(a, out, idents):
    tile = cuda.shared.array(64, np.float32)
    i = cuda.threadIdx.x
    tile[i] = a[cuda.blockIdx.x * cuda.blockDim.x + i]
    cuda.syncthreads()
    out[cuda.blockIdx.x * cuda.blockDim.x + i] = tile[cuda.blockDim.x - 1 - i]
    idents[cuda.blockIdx.x * cuda.blockDim.x + i] = threading.get_ident()


def test_a_kernel_with_a_barrier_runs_its_block_in_one_python_thread_and_is_right(rng):
    a = rng.standard_normal(3 * 32).astype(np.float32)
    out = np.full_like(a, np.nan)
    idents = np.zeros(3 * 32, np.int64)
    _reverse_in_block_where[3, 32](a, out, idents)
    np.testing.assert_array_equal(out, a.reshape(3, 32)[:, ::-1].ravel())  # each read a value written before the barrier
    assert simulator.needs_threads(_reverse_in_block_where.fn)
    assert all(len(set(idents[b * 32:(b + 1) * 32])) == 1 for b in range(3))  # a greenlet per CUDA thread, one thread


def test_a_wait_runs_the_other_threads_until_they_end_it_and_a_wait_none_can_end_raises_at_once():
    import time

    @cuda.jit
    def chain(out, order):
        """Thread i waits until thread i + 1 has gone (the last goes at once): they finish last to first."""
        i = cuda.threadIdx.x
        n = cuda.blockDim.x
        if i + 1 < n:
            simulator.wait_until(lambda: order[i + 1] > 0, f"thread {i + 1} never went")
        order[i] = 1 + order[i + 1] if i + 1 < n else 1
        cuda.syncthreads()
        out[i] = order[i]

    out, order = np.zeros(16, np.int64), np.zeros(17, np.int64)
    chain[1, 16](out, order)
    assert out.tolist() == list(range(16, 0, -1))

    @cuda.jit
    def stuck(out):
        i = cuda.threadIdx.x
        if i == 3:
            simulator.wait_until(lambda: out[0] == 99, "nobody writes 99")
        cuda.syncthreads()  # the others wait here, for thread 3, which waits for them

    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"tid=\[3, 0, 0\] ctaid=\[0, 0, 0\]: nobody writes 99"):
        stuck[1, 8](np.zeros(8, np.int64))
    assert time.monotonic() - start < 5  # found stuck when no thread could run, not after a time limit


def test_barriers_are_found_through_device_functions_closures_and_modules():
    import types

    assert simulator.needs_threads(_barrier_in_device_function.fn)
    assert simulator.needs_threads(_factory().fn)
    module = types.ModuleType("helpers")
    module.wait = _wait
    namespace = {"helpers": module, "cuda": cuda}
    exec("def kernel(out):\n    helpers.wait()\n    out[0] = 1.0\n", namespace)
    assert simulator.needs_threads(namespace["kernel"])
    assert not simulator.needs_threads(_who_am_i.fn) and not simulator.needs_threads(_fails_at_thread_5.fn)
    out = np.zeros(8, np.float32)
    _barrier_in_device_function[1, 8](out)
    _factory()[1, 8](out)
    assert out.tolist() == [1.0] * 8


def test_a_barrier_the_analysis_cannot_see_stops_the_kernel():
    with pytest.raises(RuntimeError, match="barrier"):
        _hidden_barrier[1, 8](np.zeros(8, np.float32))


def test_an_error_names_the_thread_that_raised_it():
    with pytest.raises(IndexError, match=r"tid=\[5, 0, 0\] ctaid=\[0, 0, 0\]"):
        _fails_at_thread_5[1, 8](np.zeros(8, np.float32))


@cuda.jit
def _half_return_then_sync(out, fail):
    i = cuda.threadIdx.x
    if i % 2 == 1:
        return  # these no longer count at the barriers below
    out[i] = 1.0
    cuda.syncthreads()
    if fail and i == 4:
        out[100 + i] = 1.0  # out of bounds, while the others wait at the next barrier
    cuda.syncthreads()
    out[16 + i] = out[i] + out[(i + 2) % 16]  # a neighbour's value, written before the barrier


def test_a_block_with_barriers_counts_only_live_threads_at_a_barrier_and_an_error_stops_the_rest():
    out = np.zeros(32, np.float32)
    _half_return_then_sync[1, 16](out, False)
    assert out.tolist() == [1.0, 0.0] * 8 + [2.0, 0.0] * 8
    with pytest.raises(IndexError, match=r"tid=\[4, 0, 0\]"):  # raised, not a block hung at its barrier
        _half_return_then_sync[1, 16](np.zeros(32, np.float32), True)


def test_installing_twice_changes_nothing():
    from numba.cuda.simulator import kernel

    run = kernel.BlockManager.run
    simulator.install()
    assert kernel.BlockManager.run is run and hasattr(run, "threaded_run")


@cuda.jit
def _two_aligned_tiles(a, out):
    first = cuda.shared.array(8, np.float32, alignment=16)
    second = cuda.shared.array(8, np.float32, alignment=16)
    scratch = cuda.local.array(2, np.float32, alignment=8)
    i = cuda.threadIdx.x
    first[i] = a[i]
    second[i] = -a[i]
    scratch[0] = first[i]
    cuda.syncthreads()
    out[i] = scratch[0] + 10 * second[7 - i]


def test_aligned_shared_and_local_arrays_run_and_stay_apart():
    a = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    _two_aligned_tiles[1, 8](a, out)
    np.testing.assert_array_equal(out, a - 10 * a[::-1])


@cuda.jit
def _badly_aligned(out):
    tile = cuda.shared.array(4, np.float32, alignment=12)
    out[0] = tile.shape[0]


def test_an_alignment_that_is_not_a_power_of_two_is_refused():
    with pytest.raises(ValueError, match="alignment must be a power of two, not 12"):
        _badly_aligned[1, 1](np.zeros(1, np.float32))


def test_debug_mode_raises_on_a_division_by_zero_in_every_thread_of_a_block_with_barriers():
    """The simulator's debug=True sets NumPy to raise on a division by zero in each CUDA thread;
    the greenlets start in their block thread's context, so they see it too."""

    @cuda.jit(debug=True, opt=False)
    def divide(a):
        cuda.syncthreads()
        a[cuda.threadIdx.x] = np.float64(1.0) / a[cuda.threadIdx.x]

    a = np.ones(4)
    a[2] = 0.0
    with pytest.raises(FloatingPointError, match=r"tid=\[2, 0, 0\]"):
        divide[1, 4](a)
