"""16.6's correctness tools on planted bugs: compute-sanitizer, CUDA_LAUNCH_BLOCKING, Nsight Systems, memory_summary.

    python benchmarks/correctness.py [--save]   (--save writes benchmarks/results/correctness.json)

Each planted program runs in a child process under its tool; the reports are stored with the
device and date. The work is in gpulib/bench/correctness.py and gpulib/playbook/correctness.py.
Needs a GPU (and the CUDA toolkit's compute-sanitizer and nsys for their reports).
"""

import sys

from _cli import main

from gpulib.bench import correctness as bench

if __name__ == "__main__":
    sys.exit(main(bench, __doc__.splitlines()[0]))
