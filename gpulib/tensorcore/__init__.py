"""16.5: tensor cores from Numba.

    wmma.py   the warp-level 16x16x16 fp16 → fp32 multiply-accumulate (inline PTX on a GPU,
              the same arithmetic emulated on the simulator)
    gemm.py   GEMM on the tensor cores: one warp per 16x16 tile of C
"""
