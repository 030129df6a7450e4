"""16.3 benchmark: the direct convolution versions against cuDNN, on one layer, in one run.

    python benchmarks/conv_direct.py [--save]     (--save writes benchmarks/results/conv_direct.json)

Layer N=32, C=64, H=W=56, K=64, 3x3, padding 1, stride 1, fp32. Every version is checked
against a float64 reference before it is timed; cuDNN runs through PyTorch with
cudnn.benchmark = True and TF32 off. The work is in gpulib/conv/bench.py. Needs a GPU.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import gpulib
from gpulib.conv import bench


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--save", action="store_true", help=f"write {bench.RESULTS}")
    parser.add_argument("--out", type=Path, help="write the results as JSON here instead")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args(argv)
    if not gpulib.on_gpu():
        print("This benchmark needs an NVIDIA GPU: the simulator's times say nothing about one.")
        print("Stored results:\n" + bench.table(bench.load()))
        return 0
    results = bench.measure(repeat=args.repeat)
    print(bench.table(results))
    if args.save or args.out:
        bench.save(results, args.out or bench.RESULTS)
        print(f"wrote {args.out or bench.RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
