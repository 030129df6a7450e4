"""16.5: tensor cores from Numba: a warp-level 16x16x16 multiply-accumulate, fp16 in, fp32 sums.

    a = cuda.local.array(AB_FRAGMENT, AB_DTYPE)   # this thread's share of a 16x16 tile (the names
    b = cuda.local.array(AB_FRAGMENT, AB_DTYPE)   # imported bare: Numba needs a literal shape)
    acc = cuda.local.array(ACC_FRAGMENT, float32)
    wmma.fill(acc, 0.0)                # or wmma.load_c(acc, C, row, col): D = A·B + C
    wmma.load_a(a, A, row, k)          # A[row:row+16, k:k+16], fp16, row-major (load_a_shared too)
    wmma.load_b(b, B, k, col)          # B[k:k+16, col:col+16]
    wmma.mma(acc, a, b)                # acc += a·b on the tensor cores
    wmma.store(C, row, col, acc)       # C[row:row+16, col:col+16] = acc, fp32
    wmma.copy8_async(...); wmma.async_commit(); wmma.async_wait_one()   # cp.async into shared tiles

All 32 threads of a warp make every call together. On a GPU the calls are inline PTX in linked
CUDA C++ (decorate the kernel with ``@wmma.kernel``); on the simulator they are emulated with the
same arithmetic (every thread holds the whole tile). ``warp_mma`` / ``warp_store`` are a warp's
tile of fragments, as the block-tiled kernels use it. What must stay true: the emulation and
the instructions agree to fp32 rounding (tests/test_tensorcore.py).
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32, types, uint32

from gpulib.env import on_gpu

TILE = 16
_REGS = ", ".join(f"%{i}" for i in range(8))

SOURCE = r"""
// gpulib: WMMA m16n16k16 (fp16 in, fp32 accumulate) as Numba-callable device functions.
// Numba's ABI: return int 0, first argument a pointer for the (unused) return value.
#define FRAG8(f, c) c(f[0]), c(f[1]), c(f[2]), c(f[3]), c(f[4]), c(f[5]), c(f[6]), c(f[7])
#define OUT_R(x) "=r"(x)
#define IN_R(x) "r"(x)
#define IO_F(x) "+f"(x)
#define IN_F(x) "f"(x)
#define OUT_F(x) "=f"(x)

extern "C" __device__ int gpulib_wmma_load_a(int* ret, unsigned long long frag, unsigned long long ptr, int ld) {
    unsigned* f = reinterpret_cast<unsigned*>(frag);
    asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;"
                 : FRAG8(f, OUT_R) : "l"(ptr), "r"(ld) : "memory");
    return 0;
}

extern "C" __device__ int gpulib_wmma_load_b(int* ret, unsigned long long frag, unsigned long long ptr, int ld) {
    unsigned* f = reinterpret_cast<unsigned*>(frag);
    asm volatile("wmma.load.b.sync.aligned.row.m16n16k16.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;"
                 : FRAG8(f, OUT_R) : "l"(ptr), "r"(ld) : "memory");
    return 0;
}

extern "C" __device__ int gpulib_wmma_mma(int* ret, unsigned long long acc, unsigned long long a, unsigned long long b) {
    float* c = reinterpret_cast<float*>(acc);
    const unsigned* fa = reinterpret_cast<const unsigned*>(a);
    const unsigned* fb = reinterpret_cast<const unsigned*>(b);
    asm volatile("wmma.mma.sync.aligned.row.row.m16n16k16.f32.f32 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7}, "
                 "{%8, %9, %10, %11, %12, %13, %14, %15}, "
                 "{%16, %17, %18, %19, %20, %21, %22, %23}, "
                 "{%0, %1, %2, %3, %4, %5, %6, %7};"
                 : FRAG8(c, IO_F) : FRAG8(fa, IN_R), FRAG8(fb, IN_R));
    return 0;
}

// the same loads from shared memory: the generic address turned into a shared-window one, so
// the loads are shared-memory instructions (a generic load must first find out where it points)
extern "C" __device__ int gpulib_wmma_load_a_shared(int* ret, unsigned long long frag, unsigned long long ptr, int ld) {
    unsigned* f = reinterpret_cast<unsigned*>(frag);
    asm volatile("{ .reg .u64 s; cvta.to.shared.u64 s, %8;\n"
                 "wmma.load.a.sync.aligned.row.m16n16k16.shared.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, [s], %9; }"
                 : FRAG8(f, OUT_R) : "l"(ptr), "r"(ld) : "memory");
    return 0;
}

extern "C" __device__ int gpulib_wmma_load_b_shared(int* ret, unsigned long long frag, unsigned long long ptr, int ld) {
    unsigned* f = reinterpret_cast<unsigned*>(frag);
    asm volatile("{ .reg .u64 s; cvta.to.shared.u64 s, %8;\n"
                 "wmma.load.b.sync.aligned.row.m16n16k16.shared.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, [s], %9; }"
                 : FRAG8(f, OUT_R) : "l"(ptr), "r"(ld) : "memory");
    return 0;
}

// asynchronous copy of 16 bytes global -> shared (sm_80+): the thread does not wait for the data;
// nbytes = 0 fills the 16 bytes with zeros instead (out-of-range parts of a tile)
extern "C" __device__ int gpulibcp_async16(int* ret, unsigned long long dst, unsigned long long src, int nbytes) {
    asm volatile("{ .reg .u64 s; cvta.to.shared.u64 s, %0;\n"
                 "cp.async.cg.shared.global [s], [%1], 16, %2; }" :: "l"(dst), "l"(src), "r"(nbytes) : "memory");
    return 0;
}

// close the group of copies issued so far; wait until at most 0 (or 1) groups are still in flight
extern "C" __device__ int gpulib_cp_async_commit(int* ret) { asm volatile("cp.async.commit_group;" ::: "memory"); return 0; }
extern "C" __device__ int gpulib_cp_async_wait0(int* ret) { asm volatile("cp.async.wait_group 0;" ::: "memory"); return 0; }
extern "C" __device__ int gpulib_cp_async_wait1(int* ret) { asm volatile("cp.async.wait_group 1;" ::: "memory"); return 0; }

struct alignas(16) gpulib_chunk16 { unsigned w0, w1, w2, w3; };

// one 16-byte copy (8 fp16 values) with a single vector load and store; both addresses 16-byte aligned
extern "C" __device__ int gpulib_copy16(int* ret, unsigned long long dst, unsigned long long src) {
    *reinterpret_cast<gpulib_chunk16*>(dst) = *reinterpret_cast<const gpulib_chunk16*>(src);
    return 0;
}

extern "C" __device__ int gpulib_wmma_load_c(int* ret, unsigned long long acc, unsigned long long ptr, int ld) {
    float* c = reinterpret_cast<float*>(acc);
    asm volatile("wmma.load.c.sync.aligned.row.m16n16k16.f32 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;"
                 : FRAG8(c, OUT_F) : "l"(ptr), "r"(ld) : "memory");
    return 0;
}

extern "C" __device__ int gpulib_wmma_store(int* ret, unsigned long long ptr, unsigned long long acc, int ld) {
    const float* c = reinterpret_cast<const float*>(acc);
    asm volatile("wmma.store.d.sync.aligned.row.m16n16k16.f32 [%0], {%1, %2, %3, %4, %5, %6, %7, %8}, %9;"
                 :: "l"(ptr), FRAG8(c, IN_F), "r"(ld) : "memory");
    return 0;
}
"""

ON_GPU = on_gpu()
# wmma.load/store need 32-byte aligned tile addresses; shared tiles ask for it on a GPU (the
# simulator accepts no alignment argument and needs none)
SHARED_ALIGN = 32 if ON_GPU else None

if ON_GPU:
    AB_FRAGMENT, AB_DTYPE, ACC_FRAGMENT = 8, uint32, 8  # 16 fp16 values in 8 registers; 8 fp32
    LINK = [cuda.CUSource(SOURCE)]
    _sig = types.int32(types.uint64, types.uint64, types.int32)
    _load_a = cuda.declare_device("gpulib_wmma_load_a", _sig)
    _load_b = cuda.declare_device("gpulib_wmma_load_b", _sig)
    _mma = cuda.declare_device("gpulib_wmma_mma", types.int32(types.uint64, types.uint64, types.uint64))
    _store = cuda.declare_device("gpulib_wmma_store", _sig)
    _copy16 = cuda.declare_device("gpulib_copy16", types.int32(types.uint64, types.uint64))
    _load_c = cuda.declare_device("gpulib_wmma_load_c", _sig)
    _load_a_shared = cuda.declare_device("gpulib_wmma_load_a_shared", _sig)
    _load_b_shared = cuda.declare_device("gpulib_wmma_load_b_shared", _sig)
    cp_async16 = cuda.declare_device("gpulibcp_async16", types.int32(types.uint64, types.uint64, types.int32))
    async_commit = cuda.declare_device("gpulib_cp_async_commit", types.int32())
    async_wait_all = cuda.declare_device("gpulib_cp_async_wait0", types.int32())
    async_wait_one = cuda.declare_device("gpulib_cp_async_wait1", types.int32())

    @cuda.jit(device=True)
    def _ld(array, size):
        """The leading dimension (values from one row to the next) that wmma.load/store take."""
        return array.strides[0] // size

    @cuda.jit(device=True)
    def _at(array, row, col, size):
        """The address of array[row, col] in a 2-D array of ``size``-byte values, rows contiguous."""
        return array.ctypes.data + size * (row * _ld(array, size) + col)

    @cuda.jit(device=True)
    def copy8_async(dst, dst_row, dst_col, src, src_row, src_col, valid):
        """Start copying src[src_row, src_col:+8] to the shared dst[dst_row, dst_col:+8] (fp16, 16
        bytes) without waiting; if not ``valid`` write 8 zeros instead (src is then not read)."""
        if valid:
            cp_async16(_at(dst, dst_row, dst_col, 2), _at(src, src_row, src_col, 2), 16)
        else:
            cp_async16(_at(dst, dst_row, dst_col, 2), src.ctypes.data, 0)

    @cuda.jit(device=True)
    def load_a_shared(frag, A, row, col):
        """load_a for a tile in shared memory (shared-memory load instructions)."""
        _load_a_shared(frag.ctypes.data, _at(A, row, col, 2), _ld(A, 2))

    @cuda.jit(device=True)
    def load_b_shared(frag, B, row, col):
        """load_b for a tile in shared memory."""
        _load_b_shared(frag.ctypes.data, _at(B, row, col, 2), _ld(B, 2))

    @cuda.jit(device=True)
    def copy8(dst, dst_row, dst_col, src, src_row, src_col):
        """dst[dst_row, dst_col:+8] = src[src_row, src_col:+8] (fp16) as one 16-byte vector copy."""
        _copy16(_at(dst, dst_row, dst_col, 2), _at(src, src_row, src_col, 2))

    @cuda.jit(device=True)
    def load_a(frag, A, row, col):
        """This thread's share of the 16x16 fp16 tile A[row:row+16, col:col+16] (row-major)."""
        _load_a(frag.ctypes.data, _at(A, row, col, 2), _ld(A, 2))

    @cuda.jit(device=True)
    def load_b(frag, B, row, col):
        """This thread's share of the 16x16 fp16 tile B[row:row+16, col:col+16] (row-major)."""
        _load_b(frag.ctypes.data, _at(B, row, col, 2), _ld(B, 2))

    @cuda.jit(device=True)
    def mma(acc, a, b):
        """acc += a·b on the tensor cores (the whole warp together)."""
        _mma(acc.ctypes.data, a.ctypes.data, b.ctypes.data)

    @cuda.jit(device=True)
    def load_c(acc, C, row, col):
        """acc = C[row:row+16, col:col+16] (fp32, row-major): start from C instead of zeros."""
        _load_c(acc.ctypes.data, _at(C, row, col, 4), _ld(C, 4))

    @cuda.jit(device=True)
    def store(C, row, col, acc):
        """C[row:row+16, col:col+16] = acc, fp32, row-major."""
        _store(_at(C, row, col, 4), acc.ctypes.data, _ld(C, 4))

    @cuda.jit(device=True)
    def fill(acc, value):
        for i in range(ACC_FRAGMENT):
            acc[i] = value

else:
    AB_FRAGMENT, AB_DTYPE, ACC_FRAGMENT = TILE * TILE, float32, TILE * TILE  # the whole tile per thread
    LINK = []

    @cuda.jit(device=True)
    def load_a(frag, A, row, col):
        """Emulation: the whole fp16 tile, as float32 values."""
        frag[:] = np.asarray(A[row:row + TILE, col:col + TILE], np.float32).reshape(-1)

    load_b = load_a

    @cuda.jit(device=True)
    def mma(acc, a, b):
        """Emulation: fp16 values multiplied exactly, summed in fp32."""
        product = a.reshape(TILE, TILE).astype(np.float32) @ b.reshape(TILE, TILE).astype(np.float32)
        acc[:] = (acc.reshape(TILE, TILE) + product).reshape(-1)

    @cuda.jit(device=True)
    def load_c(acc, C, row, col):
        """Emulation: the whole fp32 tile."""
        acc[:] = C[row:row + TILE, col:col + TILE].reshape(-1)

    @cuda.jit(device=True)
    def store(C, row, col, acc):
        """Emulation: every thread of the warp writes the same tile (the values agree)."""
        C[row:row + TILE, col:col + TILE] = acc.reshape(TILE, TILE)

    @cuda.jit(device=True)
    def fill(acc, value):
        acc[:] = value

    @cuda.jit(device=True)
    def copy8(dst, dst_row, dst_col, src, src_row, src_col):
        """Emulation: the same 8 values copied."""
        dst[dst_row, dst_col:dst_col + 8] = src[src_row, src_col:src_col + 8]

    @cuda.jit(device=True)
    def copy8_async(dst, dst_row, dst_col, src, src_row, src_col, valid):
        """Emulation: the copy (or the zeros) happens at once; commit and wait have nothing to do."""
        if valid:
            dst[dst_row, dst_col:dst_col + 8] = src[src_row, src_col:src_col + 8]
        else:
            dst[dst_row, dst_col:dst_col + 8] = 0

    @cuda.jit(device=True)
    def async_commit():
        pass

    async_wait_all = async_wait_one = async_commit
    load_a_shared, load_b_shared = load_a, load_b


def kernel(fn=None, *, max_registers: int | None = None):
    """``cuda.jit`` for a kernel that calls these functions: links the PTX on a GPU.
    ``@wmma.kernel(max_registers=n)`` caps the registers per thread (more blocks fit on an SM)."""
    if fn is None:
        return lambda f: kernel(f, max_registers=max_registers)
    return cuda.jit(link=LINK, max_registers=max_registers)(fn) if ON_GPU else cuda.jit(fn)


# -- a warp's tile of fragments, as the block-tiled kernels (GEMM v2-v4, conv v1) use it


@cuda.jit(device=True)
def warp_mma(a_tile, b_tile, a, b, acc, wy, wx, kk):
    """One 16-deep step of a warp's part of the block tile: A fragments of the shared tile's
    rows wy, wy + 16, ..., B fragments of its columns wx, wx + 16, ..., at depth kk; then every
    A fragment times every B fragment into the accumulators (acc[i·len(b) + j])."""
    for i in range(a.shape[0]):
        load_a_shared(a[i], a_tile, wy + 16 * i, kk)
    for j in range(b.shape[0]):
        load_b_shared(b[j], b_tile, kk, wx + 16 * j)
    for i in range(a.shape[0]):
        for j in range(b.shape[0]):
            mma(acc[b.shape[0] * i + j], a[i], b[j])


@cuda.jit(device=True)
def warp_store(C, acc, row, col, tiles_i, tiles_j):
    """Store a warp's tiles_i x tiles_j accumulators at C[row:, col:], skipping tiles outside C."""
    for i in range(tiles_i):
        for j in range(tiles_j):
            r, c = row + 16 * i, col + 16 * j
            if r < C.shape[0] and c < C.shape[1]:  # matmul_tc pads C to multiples of 16
                store(C, r, c, acc[tiles_j * i + j])
