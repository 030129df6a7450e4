"""16.4-16.6 benchmark: the book's fastest training step, fp32 convolution and SGEMM against
PyTorch eager, cuDNN and cuBLAS, in one run.

    python benchmarks/scoreboard.py [--save]     (--save writes benchmarks/results/scoreboard.json)

Each row is checked first (the step's gradients against PyTorch's, the convolution and the GEMM
against float64), then timed beside its library in the same run, and says whether it meets the
book's target. The work is in gpulib/bench/scoreboard.py. Needs a GPU and PyTorch.
"""

import sys

from _cli import main

from gpulib.bench import scoreboard as bench

if __name__ == "__main__":
    sys.exit(main(bench, __doc__.splitlines()[0]))
