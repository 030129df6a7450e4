"""16.5 (Hopper): the warpgroup tensor-core instructions from Numba. Four warps (a warpgroup,
128 threads) multiply a 64xN tile together, their operands read straight from shared memory:

    smem = cuda.shared.array(0, float16)              # dynamic shared memory (wgmma.launch)
    base = wgmma.aligned_start(smem)                  # first 1024-byte aligned element
    wgmma.copy16_async(smem, byte, A, row, col, ok)   # 8 fp16 values into a swizzled place
    wgmma.async_commit(); wgmma.async_wait_one()      # the cp.async groups of wmma.py
    wgmma.fence_async_proxy()                         # ordinary writes → visible to wgmma
    cuda.syncthreads()
    a = wgmma.descriptor(smem, a_byte, 1024)          # 64-bit matrix descriptors (128B swizzle)
    b = wgmma.descriptor(smem, b_byte, 1024)
    wgmma.fence()                                     # accumulators ready for the tensor cores
    wgmma.mma_n128(acc, a, b, 1)                      # acc (64 floats) += A·Bᵀ, asynchronous
    wgmma.MULTIPLY_TILE["fp16", 128](acc, smem, a_byte, b_byte, 1)  # a 64-deep tile: four such slices
    wgmma.commit()                                    # close this group of multiplies
    wgmma.wait_one()  /  wgmma.wait_all()             # at most one / no group still running
    wgmma.store_n128(C, row, col, acc)                # each thread writes its 64 results

On a GPU each call is one or two PTX instructions in linked CUDA C++; on the simulator the same
calls are emulated with the same arithmetic and layout (smem_layout, wgmma_model). 16.5's
notebook explains the layout, the fences and the asynchrony. What must stay true: the emulation
and the instruction agree element for element (tests/test_wgmma.py, tests/test_wgmma_model.py).
"""

from __future__ import annotations

import numpy as np
from numba import cuda, types, uint32, uint64

from gpulib import precision
from gpulib.env import on_gpu
from gpulib.launch import BoundLaunch
from gpulib.tensorcore import wgmma_model, wmma

float16 = types.float16

M_TILE, K_TILE, WARPGROUP = wgmma_model.M_TILE, wgmma_model.K_TILE, wgmma_model.THREADS
ATOM_BYTES = 1024  # 8 rows of 128 bytes: one 128-byte swizzle atom
SWIZZLE_128B = 1  # the descriptor's swizzle code (smem_layout.SWIZZLES["128B"])
N_SIZES = (64, 128, 256)  # the N this module offers whole epilogues for (the instruction takes any multiple of 8)
MMA_N_SIZES = (64, 112, 128, 256)  # the N of its multiplies: also conv v7's patches of 14 x 8 pixels
REGISTER_COUNTS = (40, 232)  # what RELEASE and CLAIM offer (setmaxnreg takes multiples of 8 in 24..256)


PTX_TYPES = {"fp16": "f16", "bf16": "bf16"}  # the operand types and their names in the instruction


def _mma_name(n: int, operands: str) -> str:
    """The linked C++ function that issues one m64nNk16 with these operands."""
    return f"gpulib_wgmma_n{n}" if operands == "fp16" else f"gpulib_wgmma_{operands}_n{n}"


def _mma_source(n: int, operands: str = "fp16") -> str:
    regs = ", ".join(f"%{i}" for i in range(n // 2))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(n // 2))
    a, b, scale = n // 2, n // 2 + 1, n // 2 + 2
    ptx = PTX_TYPES[operands]
    return f"""
extern "C" __device__ int {_mma_name(n, operands)}(int* ret, unsigned long long acc, unsigned long long a_desc,
                                           unsigned long long b_desc, int scale_d) {{
    float* d = reinterpret_cast<float*>(acc);
    asm volatile("{{\\n .reg .pred p;\\n setp.ne.b32 p, %{scale}, 0;\\n"
                 " wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ptx}.{ptx} {{{regs}}}, %{a}, %{b}, p, 1, 1, 0, 0;\\n}}\\n"
                 : {outs} : "l"(a_desc), "l"(b_desc), "r"(scale_d));
    return 0;
}}
"""


SOURCE = (
    r"""
// gpulib: Hopper's warpgroup MMA (sm_90a) as Numba-callable device functions, Numba's ABI.
static __device__ __forceinline__ unsigned gpulib_wg_smem(unsigned long long p) {
    unsigned long long s; asm("cvta.to.shared.u64 %0, %1;" : "=l"(s) : "l"(p)); return static_cast<unsigned>(s);
}
extern "C" __device__ int gpulib_shared_address(unsigned* ret, unsigned long long ptr) {
    *ret = gpulib_wg_smem(ptr);
    return 0;
}
extern "C" __device__ int gpulib_wgmma_fence(int* ret) {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    return 0;
}
extern "C" __device__ int gpulib_wgmma_commit(int* ret) {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    return 0;
}
extern "C" __device__ int gpulib_wgmma_wait0(int* ret) {
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    return 0;
}
extern "C" __device__ int gpulib_wgmma_wait1(int* ret) {
    asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
    return 0;
}
extern "C" __device__ int gpulib_fence_async_proxy(int* ret) {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    return 0;
}
"""
    + r"""
// GEMM v8's epilogue: two fp32 results rounded and packed into one 32-bit word of shared memory
// (cvt's first source goes to the upper half: the second column), or stored side by side in
// global memory with one 8-byte store.
extern "C" __device__ int gpulib_st_shared_f16x2(int* ret, unsigned long long ptr, float lo, float hi) {
    unsigned packed;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
    asm volatile("st.shared.b32 [%0], %1;" :: "r"(gpulib_wg_smem(ptr)), "r"(packed) : "memory");
    return 0;
}
extern "C" __device__ int gpulib_st_shared_bf16x2(int* ret, unsigned long long ptr, float lo, float hi) {
    unsigned packed;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
    asm volatile("st.shared.b32 [%0], %1;" :: "r"(gpulib_wg_smem(ptr)), "r"(packed) : "memory");
    return 0;
}
extern "C" __device__ int gpulib_st_global_v2_f32(int* ret, unsigned long long ptr, float lo, float hi) {
    unsigned long long g; asm("cvta.to.global.u64 %0, %1;" : "=l"(g) : "l"(ptr));
    asm volatile("st.global.v2.f32 [%0], {%1, %2};" :: "l"(g), "f"(lo), "f"(hi) : "memory");
    return 0;
}
"""
    + "".join(_mma_source(n, operands) for n in MMA_N_SIZES for operands in PTX_TYPES)
    + "".join(
        f'extern "C" __device__ int gpulib_setmaxnreg_{way}_{n}(int* ret) '
        f'{{ asm volatile("setmaxnreg.{way}.sync.aligned.u32 {n};"); return 0; }}\n'
        for way in ("dec", "inc")
        for n in REGISTER_COUNTS
    )
)

ON_GPU = on_gpu()


DESCRIPTOR_LOW_FLAGS = 1 << 16  # the leading byte offset, unused by the 128-byte swizzle's layout: 16 bytes


@cuda.jit(device=True)
def descriptor_low(address):
    """The low 32 bits of encode(address, ...): the start in 16-byte units (14 bits: the whole
    shared window) and the leading byte offset."""
    return uint32(((address >> 4) & 0x3FFF) | DESCRIPTOR_LOW_FLAGS)


@cuda.jit(device=True)
def encode(address, stride_byte_offset):
    """The 64-bit matrix descriptor of a K-major tile at shared byte ``address`` with the 128-byte
    swizzle (smem_layout.descriptor's bits): descriptor_low, then the stride byte offset and the
    swizzle mode in the high word."""
    return (
        uint64(descriptor_low(address))
        | uint64((stride_byte_offset >> 4) & 0x3FFF) << uint64(32)
        | uint64(SWIZZLE_128B) << uint64(62)
    )


# encode's high word for a tile of 1024-byte atoms (ATOM_BYTES apart): the same for every such tile
DESCRIPTOR_HIGH = (((ATOM_BYTES >> 4) & 0x3FFF) << 32) | (SWIZZLE_128B << 62)


@cuda.jit(device=True)
def slice_descriptor(low, kk):
    """encode(address + 32·kk, ATOM_BYTES) from low = descriptor_low(address): the 16-deep slice kk
    of the tile. One 32-bit add: the address field stays below 2**14 in a shared window of at most
    228 KiB, so it never carries into the flags."""
    return uint64(uint32(low + 2 * kk)) | uint64(DESCRIPTOR_HIGH)


@cuda.jit(device=True)
def swizzled_byte(row, chunk):
    """Byte offset, from a 1024-byte aligned tile start, of 16-byte chunk ``chunk`` (0..7: K values
    8·chunk .. 8·chunk + 7) of row ``row`` in the 128-byte swizzle's K-major layout (rows 128
    bytes apart, 8-row atoms packed): the chunk lands at chunk XOR (row mod 8)."""
    return row * 128 + ((chunk ^ (row % 8)) * 16)


@cuda.jit(device=True)
def thread_in_warpgroup():
    return cuda.threadIdx.x % WARPGROUP


def _pair_groups(groups: int):
    @cuda.jit(device=True)
    def pair_groups(C, r0, c0, acc, first, paired):
        """Column groups first .. first + groups - 1 (8 columns each) of this thread's
        accumulators, skipping what lies outside C; each two neighbours in one 8-byte store where
        ``paired`` (C's rows start at multiples of 8 bytes: GEMM v8's fp32 C), else one by one."""
        for j in range(first, first + groups):
            c = c0 + 8 * j
            for h in range(2):
                r = r0 + 8 * h
                if r < C.shape[0]:
                    if paired and c + 1 < C.shape[1]:
                        store_pair(C, r, c, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1])
                    else:
                        if c < C.shape[1]:
                            C[r, c] = acc[4 * j + 2 * h]
                        if c + 1 < C.shape[1]:
                            C[r, c + 1] = acc[4 * j + 2 * h + 1]

    return pair_groups


# at most 16 column groups per loop: the compiler unrolls such a loop, every accumulator index
# becomes a constant and the accumulators stay in registers. A loop of 32 (N = 256) is kept
# rolled, and then the 128 accumulators live in local memory (512 bytes a thread).
_store8, _store16 = _pair_groups(8), _pair_groups(16)


@cuda.jit(device=True)
def accumulator_corner(row, col):
    """(r0, c0): the place in C of this thread's first accumulator of the tile at (row, col); its
    others are at rows r0 and r0 + 8, columns c0 + 8j and c0 + 8j + 1 (wgmma_model's layout)."""
    t = thread_in_warpgroup()
    return row + 16 * (t // 32) + (t % 32) // 4, col + 2 * (t % 4)


@cuda.jit(device=True)
def store_n64(C, row, col, acc):
    """C[row:row+64, col:col+64] = this warpgroup's accumulators (each thread its 32 values, at
    the places wgmma_model.accumulator_element names), skipping what lies outside C."""
    r0, c0 = accumulator_corner(row, col)
    _store8(C, r0, c0, acc, 0, False)


@cuda.jit(device=True)
def store_n128(C, row, col, acc):
    """store_n64 for a 64 x 128 tile (64 values a thread)."""
    r0, c0 = accumulator_corner(row, col)
    _store16(C, r0, c0, acc, 0, False)


@cuda.jit(device=True)
def store_n256(C, row, col, acc):
    """store_n64 for a 64 x 256 tile (128 values a thread), in two loops of 16 column groups."""
    r0, c0 = accumulator_corner(row, col)
    _store16(C, r0, c0, acc, 0, False)
    _store16(C, r0, c0, acc, 16, False)


BOX_BYTES = 128 * 128  # a 128-row box of 64 16-bit values: GEMM v8's staged tile, per 64 columns


def _stage_groups(groups: int, pack):
    @cuda.jit(device=True)
    def stage_groups(smem, out, r0, c0, acc, first):
        """Column groups first .. first + groups - 1 of this thread's accumulators, rounded to 16
        bits, into the staged tile at byte ``out``: row r0 (and r0 + 8) of the tile, columns
        c0 + 8j and c0 + 8j + 1 packed in one 4-byte word, in the box of their 64 columns, at the
        128-byte swizzle's place (chunk j mod 8 of the row, XOR the row mod 8). A warp's 32 words
        then fall in 32 different banks."""
        for j in range(first, first + groups):
            for h in range(2):
                r = r0 + 8 * h
                byte = out + (j // 8) * BOX_BYTES + r * 128 + (((j % 8) ^ (r % 8)) * 16) + 2 * c0
                pack(smem, byte, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1])

    return stage_groups


def _epilogues(n: int, operands: str):
    """The two ways out of a 64 x n tile of accumulators: to fp32 C in 8-byte stores, or staged in
    shared memory as 16-bit words for the copy engine (``operands``' type)."""
    loops = [(first, min(16, n // 8 - first)) for first in range(0, n // 8, 16)]  # unrolled loops of <= 16
    pairs = [({8: _store8, 16: _store16}[size], first) for first, size in loops]
    stages = [(_stage_groups(size, PACK[operands]), first) for first, size in loops]
    (p0, f0), (p1, f1) = pairs[0], pairs[-1]
    (s0, g0), (s1, g1) = stages[0], stages[-1]
    two = len(loops) == 2

    @cuda.jit(device=True)
    def store_pairs(C, row, col, acc, paired):
        """C[row:+64, col:+n] = this warpgroup's accumulators, in 8-byte stores where ``paired``."""
        r0, c0 = accumulator_corner(row, col)
        p0(C, r0, c0, acc, f0, paired)
        if two:
            p1(C, r0, c0, acc, f1, paired)

    @cuda.jit(device=True)
    def stage(smem, out, row, acc):
        """This warpgroup's accumulators into rows row .. row + 63 of the staged tile at byte ``out``."""
        r0, c0 = accumulator_corner(row, 0)
        s0(smem, out, r0, c0, acc, g0)
        if two:
            s1(smem, out, r0, c0, acc, g1)

    return store_pairs, stage


@cuda.jit(device=True)
def fill(acc, value):
    for i in range(acc.shape[0]):
        acc[i] = value


if ON_GPU:
    LINK = wmma.LINK + [cuda.CUSource(SOURCE)]
    _shared_address = cuda.declare_device("gpulib_shared_address", uint32(uint64))
    fence = cuda.declare_device("gpulib_wgmma_fence", types.int32())
    commit = cuda.declare_device("gpulib_wgmma_commit", types.int32())
    wait_all = cuda.declare_device("gpulib_wgmma_wait0", types.int32())
    wait_one = cuda.declare_device("gpulib_wgmma_wait1", types.int32())
    fence_async_proxy = cuda.declare_device("gpulib_fence_async_proxy", types.int32())
    _mma_sig = types.int32(types.uint64, types.uint64, types.uint64, types.int32)
    # setmaxnreg: a warpgroup gives registers back to the SM's pool (dec) or takes them (inc)
    RELEASE = {n: cuda.declare_device(f"gpulib_setmaxnreg_dec_{n}", types.int32()) for n in REGISTER_COUNTS}
    CLAIM = {n: cuda.declare_device(f"gpulib_setmaxnreg_inc_{n}", types.int32()) for n in REGISTER_COUNTS}

    @cuda.jit(device=True)
    def aligned_start(smem):
        """The first element of the fp16 shared array ``smem`` whose shared address is a multiple
        of 1024 bytes (swizzle atoms must sit on their own size)."""
        return ((ATOM_BYTES - _shared_address(smem.ctypes.data) % ATOM_BYTES) % ATOM_BYTES) // 2

    @cuda.jit(device=True)
    def descriptor(smem, byte, stride_byte_offset):
        """Descriptor of the K-major 128B-swizzled tile at byte ``byte`` of the shared array."""
        return encode(_shared_address(smem.ctypes.data) + byte, stride_byte_offset)

    @cuda.jit(device=True)
    def copy16_async(smem, byte, src, row, col, valid):
        """Start copying src[row, col:col+8] (fp16, 16 bytes) to byte ``byte`` of the shared array;
        if not ``valid``, 16 zero bytes instead (src is then not read)."""
        dst = smem.ctypes.data + byte
        if valid:
            wmma.cp_async16(dst, src.ctypes.data + 2 * (row * (src.strides[0] // 2) + col), 16)
        else:
            wmma.cp_async16(dst, src.ctypes.data, 0)

    def _linked_mma(n: int, operands: str = "fp16"):
        issue = cuda.declare_device(_mma_name(n, operands), _mma_sig)

        @cuda.jit(device=True)
        def mma(acc, a_desc, b_desc, scale_d):
            """acc (N/2 floats a thread) = A·Bᵀ + (acc if scale_d else 0), fp16 (or bf16) operands;
            asynchronous: one wgmma.mma_async.sync.aligned.m64nNk16.f32 of the linked C++."""
            issue(acc.ctypes.data, a_desc, b_desc, scale_d)

        return mma

    _make_mma = _linked_mma

    _pair_sig = types.int32(uint64, types.float32, types.float32)
    _st_f16x2 = cuda.declare_device("gpulib_st_shared_f16x2", _pair_sig)
    _st_bf16x2 = cuda.declare_device("gpulib_st_shared_bf16x2", _pair_sig)
    _st_v2 = cuda.declare_device("gpulib_st_global_v2_f32", _pair_sig)

    @cuda.jit(device=True)
    def pack_fp16(smem, byte, lo, hi):
        """Bytes ``byte`` .. ``byte`` + 3 of the shared array = lo, hi rounded to fp16 (one 4-byte store)."""
        _st_f16x2(smem.ctypes.data + byte, lo, hi)

    @cuda.jit(device=True)
    def pack_bf16(smem, byte, lo, hi):
        """``pack_fp16`` with bf16 words (round to nearest, ties to even)."""
        _st_bf16x2(smem.ctypes.data + byte, lo, hi)

    @cuda.jit(device=True)
    def store_pair(C, r, c, lo, hi):
        """C[r, c], C[r, c + 1] = lo, hi (fp32) with one 8-byte store: the address must be a multiple of 8."""
        _st_v2(C.ctypes.data + 4 * (r * (C.strides[0] // 4) + c), lo, hi)

else:
    from gpulib.simulator import wait_until

    LINK = []

    class Descriptor(int):
        """Emulation: the descriptor's 64 bits, and the shared array they point into."""

        memory: np.ndarray

    @cuda.jit(device=True)
    def aligned_start(smem):
        """Emulation: the shared array starts the image (byte 0 is aligned)."""
        return 0

    @cuda.jit(device=True)
    def descriptor(smem, byte, stride_byte_offset):
        """Emulation: the same bits, the start counted from the array's first byte."""
        desc = Descriptor(int(encode(byte, stride_byte_offset)))
        desc.memory = smem
        return desc

    @cuda.jit(device=True)
    def copy16_async(smem, byte, src, row, col, valid):
        """Emulation: the 8 values (or zeros) are in place at once."""
        at = byte // 2
        if valid:  # the 16 bytes as they are (fp16 or bf16 words)
            smem.view(np.uint16)[at : at + 8] = src[row, col : col + 8].view(np.uint16)
        else:
            smem[at : at + 8] = 0

    class _Warpgroup:
        """Emulation: what the 128 threads of one warpgroup meet at. A multiply is one instruction
        of the whole warpgroup, which the tensor cores start once all 128 threads have issued it:
        no thread passes it before the others reach it (a kernel that lets one thread speak for
        its warpgroup, as GEMM version 7 does, relies on this). The last thread to arrive
        computes the whole 64 x N product; each thread then takes its registers' share."""

        def __init__(self):
            self.args = self.result = self.error = None
            self.arrived, self.multiplies = 0, 0

        def _multiply(self):
            image, pairs, n, operands = self.args
            try:  # [128, slices, N/2]: each slice's products, added in turn by each thread
                self.result = np.stack([wgmma_model.warpgroup_products(image, a, b, n, operands) for a, b in pairs], 1)
            except Exception as error:  # raised in every thread below
                self.error = error
            self.args = None

        def products(self, args, thread):
            if self.args is not None and self.args[1:] != args[1:]:
                self.error = ValueError("the threads of a warpgroup issued one wgmma with different operands")
            self.args, self.arrived, mine = args, self.arrived + 1, self.multiplies
            if self.arrived == WARPGROUP:
                self._multiply()
                self.arrived, self.multiplies = 0, mine + 1
            try:
                wait_until(lambda: self.multiplies != mine,  # (the next multiply waits for all 128 again)
                           "not all 128 threads of a warpgroup reached the same wgmma; on a GPU this multiply would never start")
            except BaseException:  # the block stopped: this thread no longer counts
                if self.multiplies == mine:
                    self.arrived -= 1
                raise
            if self.error is not None:
                raise self.error
            return self.result[thread]

    def _warpgroup_products(a_desc, pairs, n, operands):
        """Emulation: this thread's products [slices, N/2] of the m64nNk16 multiplies ``pairs``
        ((A, B) descriptors), once its whole warpgroup has issued them."""
        image = np.asarray(a_desc.memory).view(np.uint8)
        if any(d.memory is not a_desc.memory for pair in pairs for d in pair):
            raise ValueError("A and B must lie in the same shared array")
        key = (image.ctypes.data, cuda.threadIdx.x // WARPGROUP)  # the block's shared memory, the warpgroup
        group = _WARPGROUPS.setdefault(key, _Warpgroup())  # (one step under the GIL)
        return group.products((image, tuple((int(a), int(b)) for a, b in pairs), n, operands), thread_in_warpgroup())

    _WARPGROUPS: dict = {}

    def _emulated_mma(n: int, operands: str = "fp16"):
        @cuda.jit(device=True)
        def mma(acc, a_desc, b_desc, scale_d):
            """Emulation: once the whole warpgroup is here, this thread's N/2 products of the fp16
            (or bf16) operands read through the descriptors (fp32 sums), added to acc (or
            replacing it when scale_d is 0)."""
            products = _warpgroup_products(a_desc, ((a_desc, b_desc),), n, operands)[0]
            acc[:] = products + (acc if scale_d else np.float32(0.0))

        return mma

    def _emulated_tile(n: int, operands: str = "fp16"):
        @cuda.jit(device=True)
        def multiply_tile(acc, smem, a_byte, b_byte, scale_d):
            """Emulation: the four m64nNk16 of a 64-deep tile (as _multiply_tile issues them),
            the warpgroup met once for all four (each meeting is a turn of all 128 threads), each
            slice's products added in the same order."""
            pairs = tuple((descriptor(smem, a_byte + 32 * kk, ATOM_BYTES), descriptor(smem, b_byte + 32 * kk, ATOM_BYTES))
                          for kk in range(TILE_K // K_TILE))
            products = _warpgroup_products(pairs[0][0], pairs, n, operands)
            acc[:] = products[0] + (acc if scale_d else np.float32(0.0))
            for kk in range(1, len(pairs)):
                acc[:] = products[kk] + acc

        return multiply_tile

    _make_mma = _emulated_mma

    @cuda.jit(device=True)
    def fence():
        pass

    commit = wait_all = wait_one = fence_async_proxy = fence

    @cuda.jit(device=True)
    def pack_fp16(smem, byte, lo, hi):
        """Emulation: the two fp16 words in place."""
        words = np.asarray(smem).view(np.uint16)
        words[byte // 2 : byte // 2 + 2] = np.array([lo, hi], np.float32).astype(np.float16).view(np.uint16)

    @cuda.jit(device=True)
    def pack_bf16(smem, byte, lo, hi):
        """Emulation: the two bf16 words (ties to even) in place."""
        words = np.asarray(smem).view(np.uint16)
        words[byte // 2 : byte // 2 + 2] = precision.bf16_bits(np.array([lo, hi], np.float32))

    @cuda.jit(device=True)
    def store_pair(C, r, c, lo, hi):
        """Emulation: the two values in place."""
        C[r, c] = lo
        C[r, c + 1] = hi
    RELEASE = CLAIM = dict.fromkeys(REGISTER_COUNTS, fence)  # a thread's registers are not modelled

async_commit, async_wait_one, async_wait_all = wmma.async_commit, wmma.async_wait_one, wmma.async_wait_all

# the multiply and the epilogue for each (operands, N) and N: what a kernel factory picks from
MMA = {(operands, n): _make_mma(n, operands) for operands in PTX_TYPES for n in MMA_N_SIZES}
mma_n64, mma_n128, mma_n256 = (MMA["fp16", n] for n in N_SIZES)
mma_bf16_n64, mma_bf16_n128, mma_bf16_n256 = (MMA["bf16", n] for n in N_SIZES)
STORE = {64: store_n64, 128: store_n128, 256: store_n256}
PACK = {"fp16": pack_fp16, "bf16": pack_bf16}
# GEMM v8's epilogues for each (operands, N): (store_pairs to fp32 C, stage as 16-bit words)
EPILOGUE = {(operands, n): _epilogues(n, operands) for operands in PTX_TYPES for n in N_SIZES}
TILE_K = 64  # the K depth of the tiles kernels stage: one 128-byte swizzle row of 16-bit values


def _multiply_tile(mma):
    @cuda.jit(device=True)
    def multiply_tile(acc, smem, a_byte, b_byte, scale_d):
        """acc = A·Bᵀ over one 64-deep K tile, plus acc unless ``scale_d`` is 0: four m64nNk16,
        each descriptor's start 32 bytes further along K for the next 16-deep slice. A is this
        warpgroup's 64 rows at byte ``a_byte`` of the shared array, Bᵀ's N rows at ``b_byte``, both
        K-major in the 128-byte swizzle. Asynchronous, like the multiplies it issues.

        The descriptors are encode()'s, the low word built once per tile and each slice one add
        (slice_descriptor): encoding every slice from its byte put some 14 integer instructions
        in front of each multiply, more than a chain of m64n64k16 (32 cycles each) hides."""
        base = _shared_address(smem.ctypes.data)
        a, b = descriptor_low(base + a_byte), descriptor_low(base + b_byte)
        for kk in range(TILE_K // K_TILE):
            mma(acc, slice_descriptor(a, kk), slice_descriptor(b, kk), scale_d if kk == 0 else 1)

    return multiply_tile


# one 64-deep tile's multiplies for each (operands, N): what the kernels call at every step
MULTIPLY_TILE = {key: _multiply_tile(mma) if ON_GPU else _emulated_tile(key[1], key[0]) for key, mma in MMA.items()}


def kernel(fn=None, *, max_registers: int | None = None):
    """``cuda.jit`` for a kernel that calls these functions: links the PTX on a GPU."""
    if fn is None:
        return lambda f: kernel(f, max_registers=max_registers)
    return cuda.jit(link=LINK, max_registers=max_registers)(fn) if ON_GPU else cuda.jit(fn)


_BOUND: dict = {}


def unsupported_device() -> str:
    """ "" where these instructions run (the simulator, or a GPU of compute capability 9.0: H100,
    H200, GH200); else why not. wgmma and TMA exist only in sm_90a."""
    if not ON_GPU:
        return ""
    cc = cuda.get_current_device().compute_capability
    return "" if tuple(cc) == (9, 0) else (f"wgmma needs a Hopper GPU (compute capability 9.0); this one is {cc[0]}.{cc[1]}")


def launch(kernel, grid, block, shared_bytes: int, *args) -> None:
    """``kernel[grid, block, 0, shared_bytes](*args)``, bound (gpulib.launch.BoundLaunch: a call with
    the same argument layout as before skips Numba's typing, about 20 µs of Python that a 30 µs
    kernel would otherwise wait for), its dynamic shared memory allowed past 48 KiB. ValueError on
    a GPU without wgmma, before anything is compiled."""
    reason = unsupported_device()
    if reason:
        raise ValueError(reason)
    key = (kernel, grid, block, shared_bytes, type(grid), type(block), type(shared_bytes))  # (1.0 == 1 as keys)
    try:
        bound = _BOUND.get(key)
    except TypeError:  # an unhashable grid or block: refused below
        bound = None
    if bound is None:
        _check_configuration(kernel, grid, block, shared_bytes)  # once per configuration, before it compiles
        bound = _BOUND[key] = BoundLaunch(kernel, grid, block, shared_bytes)
    bound(*args)


MAX_THREADS, MAX_SHARED = 1024, 227 * 1024  # a block's limits on compute capability 9.0 (opt-in shared memory)


def _check_configuration(kernel, grid, block, shared_bytes) -> None:
    """The GPU's limits, on the simulator too: ValueError naming the argument."""
    if not hasattr(kernel, "py_func"):
        raise ValueError(f"kernel must be a compiled kernel (cuda.jit, wgmma.kernel or tma.kernel), not "
                         f"{type(kernel).__name__}")
    for name, value in (("grid", grid), ("block", block)):
        sizes = (value,) if isinstance(value, (int, np.integer)) and not isinstance(value, bool) else value
        if (not isinstance(sizes, tuple) or not 1 <= len(sizes) <= 3
                or any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1 for d in sizes)):
            raise ValueError(f"{name} must be one to three positive integers, not {value!r}")
    threads = int(np.prod(block if isinstance(block, tuple) else (block,)))
    if threads > MAX_THREADS:
        raise ValueError(f"block has {threads} threads; a block holds at most {MAX_THREADS}")
    if isinstance(shared_bytes, bool) or not isinstance(shared_bytes, (int, np.integer)) or not 0 <= shared_bytes <= MAX_SHARED:
        raise ValueError(f"shared_bytes must be an integer in 0..{MAX_SHARED} (a block's shared memory), not {shared_bytes!r}")
