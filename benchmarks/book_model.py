"""16.6 benchmark: the book's model trained and profiled, the GPU's limits, the memory estimator
against the measured peak, the debugging playbook, im2col's bottleneck and the CUDA C kernels.

    python benchmarks/book_model.py [--save]   (--save writes benchmarks/results/book_model.json)

Every kernel is checked against float64 before it is timed (CUDA events). Needs a GPU with
CuPy and PyTorch. The work is in gpulib/bench/book_model.py.
"""

import sys

from _cli import main

from gpulib.bench import book_model as bench

if __name__ == "__main__":
    sys.exit(main(bench, __doc__.splitlines()[0]))
