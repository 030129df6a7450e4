"""16.3 benchmark: the direct convolution versions against cuDNN, on one layer, in one run.

    python benchmarks/conv_direct.py [--save]     (--save writes benchmarks/results/conv_direct.json)

Layer N=32, C=64, H=W=56, K=64, 3x3, padding 1, stride 1, fp32. Every version is checked
against a float64 reference before it is timed; cuDNN runs through PyTorch with
cudnn.benchmark = True and TF32 off. The work is in gpulib/bench/conv_direct.py. Needs a GPU.
"""

import sys

from _cli import main

from gpulib.bench import conv_direct as bench

if __name__ == "__main__":
    sys.exit(main(bench, __doc__.splitlines()[0]))
