"""16.5 benchmark: tensor-core GEMM and conv (gpulib) against cuBLAS fp16 and cuDNN fp16, the
auto-tuner's ranking on four layer shapes next to cuDNN, and fp32/TF32/fp16/bf16 time and error.

    python benchmarks/cudnn_tensorcore.py [--save]   (--save writes benchmarks/results/cudnn_tensorcore.json)
    python benchmarks/cudnn_tensorcore.py --part resources --save   (adds the kernels' registers
                                                                     to the stored results)

Every row is checked before it is timed (median of CUDA events, L2 flushed). Needs a GPU with
CuPy and PyTorch. The work is in gpulib/bench/cudnn_tensorcore.py.
"""

import sys

from _cli import main

from gpulib.bench import cudnn_tensorcore as bench

if __name__ == "__main__":
    sys.exit(main(bench, __doc__.splitlines()[0]))
