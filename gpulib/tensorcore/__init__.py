"""16.5: tensor cores from Numba.

    wmma.py   the warp-level 16x16x16 fp16 → fp32 multiply-accumulate, fragment loads from
              global or shared memory, and cp.async copies (inline PTX on a GPU, the same
              arithmetic emulated on the simulator)
    wgmma.py  Hopper's warpgroup MMA (wgmma.mma_async m64nNk16 from shared-memory descriptors,
              fences, wait groups, cp.async into the 128-byte swizzle), inline PTX on a GPU and
              emulated on the simulator through wgmma_model
    tma.py    the tensor memory accelerator (tensor maps, 2-D to 4-D box loads) and mbarriers, inline
              PTX on a GPU, emulated on the simulator (a wait that can never end is an error)
    gemm.py   GEMM on the tensor cores: v1 one warp per 16x16 tile from global memory,
              v2 4 warps per 64x64 block tile staged in shared memory, v3 8 warps per
              128x128x32 tile staged with 16-byte vector copies, v4 = v3 with two tile pairs
              filled by asynchronous copies; v5 wgmma with a ring of cp.async buffers, v6
              wgmma with TMA and mbarriers (C = A·Bᵀ)
    conv.py   implicit-GEMM convolution on the tensor cores (fp16 in, fp32 out): v1 NCHW,
              v2 NHWC with 16-byte asynchronous gathers, v3 NHWC on wgmma
    layout.py which lane holds which element of an mma.m16n8k16 tile (the PTX ISA's fragment
              layout), with a warp-level model of the instruction
    smem_layout.py  Hopper's wgmma operands in shared memory: the 128/64/32-byte swizzles, the
              64-bit matrix descriptor and the canonical K-major layout, as pure Python
    wgmma_model.py  what one wgmma m64nNk16 computes from a shared-memory image and its
              descriptors, and which of the warpgroup's 128 threads holds which result (NumPy)
    (16.5's measurements of them are in gpulib/bench/cudnn_tensorcore.py)
"""
