"""What wgmma reads when a descriptor's start lies r rows (128 bytes each) into a 128B swizzle
atom, with the descriptor's base-offset field 0 or r mod 8 (PTX ISA, "Matrix Descriptor
Format": the base offset is for starts not aligned to the swizzle's repeating pattern). Needs
a Hopper GPU; prints, for each (r, base offset), the error against A[r:r+64] and against the
rows that an address-blind reading would give.

    python tools/probe_descriptor_rows.py
"""

from __future__ import annotations

import gpulib  # first: it picks the backend

ON_GPU = gpulib.on_gpu()

import numpy as np  # noqa: E402
from numba import cuda, float32, uint64  # noqa: E402

from gpulib.tensorcore import wgmma  # noqa: E402

ROWS = 80  # A's rows in shared memory: 64 plus room to start up to 16 rows in


@cuda.jit(device=True)
def _fill(smem, A, Bt, t):
    for e in range(t, ROWS * 8, 128):
        wgmma.copy16_async(smem, wgmma.swizzled_byte(e // 8, e % 8), A, e // 8, 8 * (e % 8), True)
    for e in range(t, Bt.shape[0] * 8, 128):
        wgmma.copy16_async(smem, 16384 + wgmma.swizzled_byte(e // 8, e % 8), Bt, e // 8, 8 * (e % 8), True)


@wgmma.kernel
def probe_kernel(A, Bt, C, r, base_offset):
    smem = cuda.shared.array(0, wgmma.float16)
    base = 2 * wgmma.aligned_start(smem)
    acc = cuda.local.array(32, float32)
    _fill(smem[base // 2:], A, Bt, cuda.threadIdx.x)
    wgmma.async_commit()
    wgmma.async_wait_all()
    wgmma.fence_async_proxy()
    cuda.syncthreads()
    wgmma.fill(acc, float32(0.0))
    wgmma.fence()
    a = wgmma.descriptor(smem, base + 128 * r, 1024) | (uint64(base_offset) << uint64(49))
    b = wgmma.descriptor(smem, base + 16384, 1024)
    wgmma.mma_n64(acc, a, b, 0)
    wgmma.commit()
    wgmma.wait_all()
    wgmma.store_n64(C, 0, 0, acc)


def main() -> None:
    if not ON_GPU:
        print("needs a GPU")
        return
    rng = np.random.default_rng(3)
    A = rng.standard_normal((ROWS, 64)).astype(np.float16)
    Bt = rng.standard_normal((64, 64)).astype(np.float16)
    dA, dBt = cuda.to_device(A), cuda.to_device(Bt)
    print(f"{'r':>3} {'base':>5} {'err vs A[r:r+64]':>18}")
    for r in (1, 2, 5, 8, 9):
        for bo in sorted({0, r % 8}):
            C = cuda.to_device(np.full((64, 64), np.nan, np.float32))
            wgmma.launch(probe_kernel, 1, 128, 16384 + 8192 + 1024, dA, dBt, C, r, bo)
            got = C.copy_to_host()
            want = A[r:r + 64, :16].astype(np.float64) @ Bt[:, :16].astype(np.float64).T
            err = np.abs(got - want).max() / np.abs(want).max()
            print(f"{r:>3} {bo:>5} {err:>18.3g}")


if __name__ == "__main__":
    main()
