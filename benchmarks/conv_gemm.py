"""16.4 benchmark: GEMM 4096³ (gpulib v1-v3 against cuBLAS), the 16.3 layer as im2col + GEMM and
as implicit GEMM against cuDNN, and the memory im2col costs; in one run.

    python benchmarks/conv_gemm.py [--save]     (--save writes benchmarks/results/conv_gemm.json)

Every row is checked against a float64 reference before it is timed (median of CUDA events,
L2 flushed). cuBLAS runs through CuPy (TF32 off, CuPy's default), cuDNN through PyTorch with
cudnn.benchmark = True and TF32 off. The work is in gpulib/conv/gemm_bench.py. Needs a GPU.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import gpulib
from gpulib.conv import gemm_bench


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--save", action="store_true", help=f"write {gemm_bench.RESULTS}")
    parser.add_argument("--out", type=Path, help="write the results as JSON here instead")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args(argv)
    if not gpulib.on_gpu():
        print("This benchmark needs an NVIDIA GPU: the simulator's times say nothing about one.")
        if gemm_bench.RESULTS.exists():
            print("Stored results:\n" + gemm_bench.table(gemm_bench.load()))
        return 0
    results = gemm_bench.measure(repeat=args.repeat)
    print(gemm_bench.table(results))
    if args.save or args.out:
        gemm_bench.save(results, args.out or gemm_bench.RESULTS)
        print(f"wrote {args.out or gemm_bench.RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
