"""16.4 benchmark: GEMM 4096³ (gpulib v1-v3 against cuBLAS), the 16.3 layer as im2col + GEMM and
as implicit GEMM against cuDNN, and the memory im2col costs; in one run.

    python benchmarks/conv_gemm.py [--save]     (--save writes benchmarks/results/conv_gemm.json)

Every row is checked against a float64 reference before it is timed (median of CUDA events,
L2 flushed). cuBLAS runs through CuPy (TF32 off, CuPy's default), cuDNN through PyTorch with
cudnn.benchmark = True and TF32 off. The work is in gpulib/bench/conv_gemm.py. Needs a GPU.
"""

import sys

from _cli import main

from gpulib.bench import conv_gemm as bench

if __name__ == "__main__":
    sys.exit(main(bench, __doc__.splitlines()[0]))
