"""16.5 (Hopper): the tensor memory accelerator (TMA) and shared-memory barriers (mbarrier) from
Numba. One thread asks the copy engine for a whole tile; the others wait on a barrier:

    bars = cuda.shared.array(STAGES, uint64)        # one 8-byte barrier per buffer
    if t == 0:
        tma.init(bars, s, 1)                        # one arrival (the thread that asks) per phase
        tma.acquire(a_map)                          # the map, copied from the host, before TMA reads it
    tma.fence_init(); cuda.syncthreads()
    if t == 0:
        tma.expect(bars, s, nbytes)                 # arrive; the phase also waits for nbytes
        tma.load(smem, byte, a_map, row, col, bars, s)   # a [box_rows, 64] tile of A, swizzled
    tma.wait(bars, s, phase)                        # until phase ``phase`` (0, 1, 0, ...) is over
    tma.arrive(bars, s)                             # an arrival alone (a consumer frees a buffer)

``tensor_map`` / ``cached_map`` describe a 2-D to 4-D fp16 (or bf16-word) array and its box, made
by the driver on a GPU; parts of a box outside the array arrive as zeros. On the simulator a load
happens at once and a wait that can never end raises instead of hanging. 16.5's notebook explains
phases and parities. What must stay true: the emulation places every box as the hardware does.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, types, uint64

from gpulib.arrays import integer_arguments, is_device_array
from gpulib.env import on_gpu
from gpulib.tensorcore import wgmma

BOX_K = 64  # values of K per box row: one 128-byte swizzle row
MAX_BOX_ROWS = 256

SOURCE = r"""
// gpulib: mbarrier and TMA (sm_90) as Numba-callable device functions, Numba's ABI.
__device__ unsigned gpulib_smem(unsigned long long p) {
    unsigned long long s; asm("cvta.to.shared.u64 %0, %1;" : "=l"(s) : "l"(p)); return static_cast<unsigned>(s);
}
extern "C" __device__ int gpulib_mbarrier_init(int* ret, unsigned long long bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(gpulib_smem(bar)), "r"(count) : "memory");
    return 0;
}
// The tensor map was written into global memory by a copy from the host (the generic proxy);
// TMA reads it through the tensormap proxy. The CUDA Programming Guide requires this acquire
// fence before a thread first uses such a map (a __grid_constant__ parameter would need none).
extern "C" __device__ int gpulib_tensormap_acquire(int* ret, unsigned long long map) {
    asm volatile("fence.proxy.tensormap::generic.acquire.sys [%0], 128;" :: "l"(map) : "memory");
    return 0;
}
extern "C" __device__ int gpulib_fence_barrier_init(int* ret) {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    return 0;
}
extern "C" __device__ int gpulib_mbarrier_expect(int* ret, unsigned long long bar, int bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(gpulib_smem(bar)), "r"(bytes) : "memory");
    return 0;
}
extern "C" __device__ int gpulib_mbarrier_arrive(int* ret, unsigned long long bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(gpulib_smem(bar)) : "memory");
    return 0;
}
extern "C" __device__ int gpulib_mbarrier_wait(int* ret, unsigned long long bar, int phase) {
    unsigned addr = gpulib_smem(bar), done = 0;
    while (!done) {
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(addr), "r"(phase) : "memory");
    }
    return 0;
}
extern "C" __device__ int gpulib_tma_load_2d(int* ret, unsigned long long dst, unsigned long long map,
                                             int col, int row, unsigned long long bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 :: "r"(gpulib_smem(dst)), "l"(map), "r"(col), "r"(row), "r"(gpulib_smem(bar)) : "memory");
    return 0;
}
extern "C" __device__ int gpulib_tma_load_3d(int* ret, unsigned long long dst, unsigned long long map,
                                             int c0, int c1, int c2, unsigned long long bar) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];"
                 :: "r"(gpulib_smem(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(gpulib_smem(bar)) : "memory");
    return 0;
}
extern "C" __device__ int gpulib_tma_load_4d(int* ret, unsigned long long dst, unsigned long long map,
                                             int c0, int c1, int c2, int c3, unsigned long long bar) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];"
                 :: "r"(gpulib_smem(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(gpulib_smem(bar)) : "memory");
    return 0;
}
// The way out (GEMM v8's epilogue): a box of shared memory written to the mapped array by the copy
// engine; stores are grouped (commit), and a group's wait with .read returns once the engine has
// read the shared memory (it may be written again), without .read once the writes are done.
extern "C" __device__ int gpulib_tma_store_2d(int* ret, unsigned long long map, unsigned long long src, int col, int row) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];"
                 :: "l"(map), "r"(gpulib_smem(src)), "r"(col), "r"(row) : "memory");
    return 0;
}
extern "C" __device__ int gpulib_tma_store_4d(int* ret, unsigned long long map, unsigned long long src,
                                              int c0, int c1, int c2, int c3) {
    asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];"
                 :: "l"(map), "r"(gpulib_smem(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3) : "memory");
    return 0;
}
extern "C" __device__ int gpulib_bulk_commit(int* ret) {
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    return 0;
}
extern "C" __device__ int gpulib_bulk_wait_read(int* ret) {
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    return 0;
}
extern "C" __device__ int gpulib_bulk_wait(int* ret) {
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    return 0;
}
"""

ON_GPU = on_gpu()


def _check_operand(array, name: str, box: tuple) -> None:
    if not is_device_array(array):
        raise ValueError(f"{name} must be a device array (a tensor map points at device memory), not {type(array).__name__}")
    if not isinstance(box, (tuple, list)) or any(isinstance(b, bool) or not isinstance(b, (int, np.integer)) for b in box):
        raise ValueError(f"box must be a tuple of integers, not {box!r}")
    shape, dtype = tuple(array.shape), np.dtype(array.dtype)
    if not 2 <= len(shape) <= 4 or dtype not in (np.float16, np.uint16):
        raise ValueError(f"{name} must be a 2-D to 4-D fp16 array (or uint16 holding bf16 words), not "
                         f"{len(shape)}-D {dtype.name}")
    contiguous = tuple(2 * int(np.prod(shape[i + 1:])) for i in range(len(shape)))
    if shape[-1] % 8 or tuple(array.strides) != contiguous:
        raise ValueError(f"{name} must be C-contiguous with a last dimension of a multiple of 8 values (TMA "
                         f"moves 16-byte multiples), not shape {shape} with strides {array.strides}")
    if len(box) != len(shape) or box[-1] != BOX_K or not all(1 <= b <= MAX_BOX_ROWS for b in box):
        raise ValueError(f"box must give each of the {len(shape)} dimensions 1..{MAX_BOX_ROWS} values and the "
                         f"last one {BOX_K} (a 128-byte swizzle row), not {tuple(box)}")


if ON_GPU:
    LINK = [cuda.CUSource(SOURCE)]
    _init = cuda.declare_device("gpulib_mbarrier_init", types.int32(uint64, types.int32))
    fence_init = cuda.declare_device("gpulib_fence_barrier_init", types.int32())
    _acquire = cuda.declare_device("gpulib_tensormap_acquire", types.int32(uint64))
    _expect = cuda.declare_device("gpulib_mbarrier_expect", types.int32(uint64, types.int32))
    _wait = cuda.declare_device("gpulib_mbarrier_wait", types.int32(uint64, types.int32))
    _arrive = cuda.declare_device("gpulib_mbarrier_arrive", types.int32(uint64))
    _i32 = types.int32
    _load = cuda.declare_device("gpulib_tma_load_2d", _i32(uint64, uint64, _i32, _i32, uint64))
    _load3 = cuda.declare_device("gpulib_tma_load_3d", _i32(uint64, uint64, _i32, _i32, _i32, uint64))
    _load4 = cuda.declare_device("gpulib_tma_load_4d", _i32(uint64, uint64, _i32, _i32, _i32, _i32, uint64))

    class TensorMap:
        """The driver's 128-byte tensor map of ``array`` in device memory (a kernel argument). It
        holds the array's address: the caller keeps the array alive while the map is used."""

        def __init__(self, array, box: tuple):
            from cuda.bindings import driver as cu

            _check_operand(array, "array", box)
            rank = len(box)
            shape = tuple(array.shape)
            u32, u64 = cu.cuuint32_t, cu.cuuint64_t
            kind = cu.CUtensorMapDataType
            data_type = kind.CU_TENSOR_MAP_DATA_TYPE_FLOAT16 if array.dtype == np.float16 else \
                kind.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
            # the driver counts dimensions innermost first; strides (bytes) of all but the innermost
            error, encoded = cu.cuTensorMapEncodeTiled(
                data_type, rank,
                array.__cuda_array_interface__["data"][0], [u64(d) for d in reversed(shape)],
                [u64(array.strides[i]) for i in reversed(range(rank - 1))],
                [u32(b) for b in reversed(box)], [u32(1)] * rank,
                cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
                cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
                cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
            if error != cu.CUresult.CUDA_SUCCESS:
                raise ValueError(f"the driver refused a tensor map of {shape} with boxes {tuple(box)}: {error}")
            self.box = tuple(box)
            self.map = cuda.to_device(np.array(encoded.opaque, np.uint64))

        @property
        def argument(self):
            """What a kernel takes: the device array holding the map."""
            return self.map

    @cuda.jit(device=True)
    def _at(bars, s):
        return bars.ctypes.data + 8 * s

    @cuda.jit(device=True)
    def init(bars, s, count):
        """Barrier ``s`` of the shared uint64 array expects ``count`` arrivals per phase."""
        _init(_at(bars, s), count)

    @cuda.jit(device=True)
    def acquire(tensor_map):
        """(Each thread that asks TMA for boxes, once, before its first load.) Order the host's
        copy of the map into global memory before TMA's reads of it: the map was written by the
        generic proxy and is read by the tensormap proxy, which keep no order between them."""
        _acquire(tensor_map.ctypes.data)

    @cuda.jit(device=True)
    def expect(bars, s, nbytes):
        """Arrive at barrier ``s`` and add ``nbytes`` to what its phase waits for."""
        _expect(_at(bars, s), nbytes)

    @cuda.jit(device=True)
    def arrive(bars, s):
        """One arrival at barrier ``s`` (no bytes)."""
        _arrive(_at(bars, s))

    @cuda.jit(device=True)
    def wait(bars, s, phase):
        """Return once the phase of barrier ``s`` with parity ``phase`` is over."""
        _wait(_at(bars, s), phase)

    @cuda.jit(device=True)
    def load(smem, byte, tensor_map, row, col, bars, s):
        """Ask the copy engine for the box at (row, col) of the mapped array, written to byte ``byte``
        of the shared array (1024-byte aligned) in the 128B swizzle; barrier ``s`` counts its bytes."""
        _load(smem.ctypes.data + byte, tensor_map.ctypes.data, col, row, _at(bars, s))

    _store = cuda.declare_device("gpulib_tma_store_2d", _i32(uint64, uint64, _i32, _i32))
    _store4 = cuda.declare_device("gpulib_tma_store_4d", _i32(uint64, uint64, _i32, _i32, _i32, _i32))
    store_commit = cuda.declare_device("gpulib_bulk_commit", _i32())
    store_wait_read = cuda.declare_device("gpulib_bulk_wait_read", _i32())
    store_wait = cuda.declare_device("gpulib_bulk_wait", _i32())

    @cuda.jit(device=True)
    def store(smem, byte, tensor_map, row, col):
        """(One thread) ask the copy engine to write the box at byte ``byte`` of the shared array
        (1024-byte aligned, 128B swizzle, as ``load`` leaves one) to (row, col) of the mapped
        array; what lies outside the array is not written. Asynchronous: ``store_commit`` closes
        the group, ``store_wait_read`` waits until the box has been read out of shared memory,
        ``store_wait`` until it is written. The threads that wrote the box must first make their
        writes visible to the copy engine (wgmma.fence_async_proxy, then a barrier)."""
        _store(tensor_map.ctypes.data, smem.ctypes.data + byte, col, row)

    @cuda.jit(device=True)
    def store4(smem, byte, tensor_map, i0, i1, i2, i3):
        """``store`` for a 4-D map: the box written at index (i0, i1, i2, i3) of the array, what
        lies outside it (past an image's edge) not written."""
        _store4(tensor_map.ctypes.data, smem.ctypes.data + byte, i3, i2, i1, i0)

    @cuda.jit(device=True)
    def load3(smem, byte, tensor_map, i0, i1, i2, bars, s):
        """``load`` for a 3-D map: the box at index (i0, i1, i2) of the array (any index may be
        negative or past the end: what lies outside arrives as zeros)."""
        _load3(smem.ctypes.data + byte, tensor_map.ctypes.data, i2, i1, i0, _at(bars, s))

    @cuda.jit(device=True)
    def load4(smem, byte, tensor_map, i0, i1, i2, i3, bars, s):
        """``load3`` for a 4-D map."""
        _load4(smem.ctypes.data + byte, tensor_map.ctypes.data, i3, i2, i1, i0, _at(bars, s))

else:
    from gpulib.simulator import wait_until

    LINK = []

    class TensorMap:
        """Emulation: the array and the box, read by ``load``."""

        def __init__(self, array, box: tuple):
            _check_operand(array, "array", box)
            self.array, self.box = array, tuple(box)

        @property
        def argument(self):
            """What a kernel takes: the map itself."""
            return self

    class _Barrier:
        """Arrivals and bytes still owed in the phase under way, and how many phases are over."""

        def __init__(self, count):
            self.count, self.arrived, self.pending, self.phases = count, 0, 0, 0

        def add(self, arrivals: int, nbytes: int) -> None:
            self.arrived += arrivals
            self.pending += nbytes
            if self.arrived == self.count and self.pending == 0:
                self.arrived = 0
                self.phases += 1

    _BARRIERS: dict = {}

    def _barrier(bars, s):
        return _BARRIERS[(id(bars), s)]

    @cuda.jit(device=True)
    def init(bars, s, count):
        """Emulation: a barrier with no finished phase."""
        _BARRIERS[(id(bars), s)] = _Barrier(count)

    @cuda.jit(device=True)
    def fence_init():
        pass

    @cuda.jit(device=True)
    def acquire(tensor_map):
        """Emulation: the map is a Python object; nothing to order."""
        pass

    @cuda.jit(device=True)
    def expect(bars, s, nbytes):
        """Emulation: one arrival, and ``nbytes`` owed until loads deliver them."""
        _barrier(bars, s).add(1, nbytes)

    @cuda.jit(device=True)
    def arrive(bars, s):
        """Emulation: one arrival."""
        _barrier(bars, s).add(1, 0)

    @cuda.jit(device=True)
    def wait(bars, s, phase):
        """Emulation: as try_wait.parity, done once the phase under way has the other parity; the
        block's other threads run meanwhile, and a phase none of them can finish is an error."""
        barrier = _barrier(bars, s)
        wait_until(lambda: barrier.phases % 2 != phase,
                   lambda: f"barrier {s}: phase parity {phase} never finished ({barrier.phases} phases over); on a "
                           "GPU this wait would never end")

    def _chunk_words(byte: int, rows: int) -> np.ndarray:
        """Emulation: the first 16-bit word of each 16-byte chunk of ``rows`` box rows in shared
        memory from byte ``byte``, [rows, 8], at its place in the 128B swizzle (where cp.async or
        the copy engine puts it)."""
        r = np.arange(rows)[:, None]
        chunks = np.arange(BOX_K // 8)[None, :]
        return (byte + wgmma.swizzled_byte(r, chunks)) // 2

    def _place(smem, byte, tensor_map, index, bars, s) -> None:
        """Emulation: the box at ``index`` (zeros outside the array) placed row by row (a row: its
        last dimension's 64 values), each 16-byte chunk at its swizzled place; its bytes counted."""
        source = np.asarray(tensor_map.array).view(np.uint16)  # the 16-bit words as they are
        box = np.zeros(tensor_map.box, np.uint16)
        lows = [min(max(i, 0), n) for i, n in zip(index, source.shape)]
        highs = [max(min(i + b, n), lo) for i, b, n, lo in zip(index, box.shape, source.shape, lows)]
        box[tuple(slice(lo - i, hi - i) for lo, hi, i in zip(lows, highs, index))] = \
            source[tuple(slice(lo, hi) for lo, hi in zip(lows, highs))]
        rows = box.reshape(-1, BOX_K)
        at = _chunk_words(byte, rows.shape[0])
        memory = np.asarray(smem).view(np.uint16)
        for i in range(8):
            memory[at + i] = rows[:, i::8]
        _barrier(bars, s).add(0, -box.nbytes)  # the whole box counts, zeros included, as on a GPU

    def _take(smem, byte, tensor_map, index) -> None:
        """Emulation: _place the other way: the box read row by row from its swizzled places in
        shared memory and written at ``index`` of the mapped array, what lies inside it only."""
        target = np.asarray(tensor_map.array).view(np.uint16)  # a view: writes reach the array
        rows = int(np.prod(tensor_map.box[:-1]))
        at = _chunk_words(byte, rows)
        memory = np.asarray(smem).view(np.uint16)
        flat = np.empty((rows, BOX_K), np.uint16)
        for i in range(8):
            flat[:, i::8] = memory[at + i]
        box = flat.reshape(tensor_map.box)
        lows = [min(max(i, 0), n) for i, n in zip(index, target.shape)]
        highs = [max(min(i + b, n), lo) for i, b, n, lo in zip(index, box.shape, target.shape, lows)]
        target[tuple(slice(lo, hi) for lo, hi in zip(lows, highs))] = \
            box[tuple(slice(lo - i, hi - i) for lo, hi, i in zip(lows, highs, index))]

    @cuda.jit(device=True)
    def store(smem, byte, tensor_map, row, col):
        """Emulation: the box read from its swizzled places and written at once, what lies inside
        the array only."""
        _take(smem, byte, tensor_map, (row, col))

    @cuda.jit(device=True)
    def store4(smem, byte, tensor_map, i0, i1, i2, i3):
        """Emulation: the 4-D box written at once, what lies inside the array only."""
        _take(smem, byte, tensor_map, (i0, i1, i2, i3))

    @cuda.jit(device=True)
    def store_commit():
        pass

    store_wait_read = store_wait = store_commit

    @cuda.jit(device=True)
    def load(smem, byte, tensor_map, row, col, bars, s):
        """Emulation: the box (zeros outside the array) placed at once."""
        _place(smem, byte, tensor_map, (row, col), bars, s)

    @cuda.jit(device=True)
    def load3(smem, byte, tensor_map, i0, i1, i2, bars, s):
        """Emulation: the 3-D box placed at once."""
        _place(smem, byte, tensor_map, (i0, i1, i2), bars, s)

    @cuda.jit(device=True)
    def load4(smem, byte, tensor_map, i0, i1, i2, i3, bars, s):
        """Emulation: the 4-D box placed at once."""
        _place(smem, byte, tensor_map, (i0, i1, i2, i3), bars, s)


@integer_arguments(box_rows=1)
def tensor_map(array, box_rows: int) -> TensorMap:
    """The tensor map of a 2-D fp16 device array, or a uint16 one holding bf16 words (rows of K
    values, K a multiple of 8), for boxes of ``box_rows`` x 64 values in the 128-byte swizzle.
    ValueError for anything else."""
    return TensorMap(array, (box_rows, BOX_K))


def tensor_map_box(array, box: tuple) -> TensorMap:
    """The tensor map of a C-contiguous 2-D to 4-D fp16 (or bf16-word) device array for boxes of
    shape ``box`` (in the array's order; the last dimension 64 values, one 128-byte swizzle row).
    A box lands in shared memory as rows of 64 values, the last dimension but one varying
    fastest: a [1, 4, 32, 64] box of an NHWC image is 128 rows, pixel (y, x) in row 32·y + x."""
    return TensorMap(array, box)


_CACHE: dict = {}


def cached_map(array, box: tuple) -> TensorMap:
    """``tensor_map_box`` made once per (address, shape, box) on a GPU, where a map depends on
    nothing else and encoding one costs a driver call and a copy; a fresh one on the simulator
    (whose map holds the array itself)."""
    _check_operand(array, "array", box)
    if not ON_GPU:
        return TensorMap(array, box)
    key = (array.__cuda_array_interface__["data"][0], tuple(array.shape), tuple(box))
    if key not in _CACHE:
        _CACHE[key] = TensorMap(array, box)
    return _CACHE[key]


LINK_ALL = wgmma.LINK + LINK


def kernel(fn=None, *, max_registers: int | None = None):
    """``cuda.jit`` for a kernel that calls these and wgmma.py's functions (links both)."""
    if fn is None:
        return lambda f: kernel(f, max_registers=max_registers)
    return cuda.jit(link=LINK_ALL, max_registers=max_registers)(fn) if ON_GPU else cuda.jit(fn)
