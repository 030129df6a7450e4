"""The command line shared by the benchmark scripts: measure on a GPU, print, optionally save."""

from __future__ import annotations

import argparse
from pathlib import Path

import gpulib


def main(bench, description: str, argv=None) -> int:
    """``bench`` is a gpulib benchmark module with measure, table, load, save and RESULTS."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--save", action="store_true", help=f"write {bench.RESULTS}")
    parser.add_argument("--out", type=Path, help="write the results as JSON here instead")
    parser.add_argument("--repeat", type=int, default=20)
    if hasattr(bench, "measure_part"):
        parser.add_argument("--part", help="measure only this part and add it to the stored results (with --save)")
    args = parser.parse_args(argv)
    if not gpulib.on_gpu():
        print("This benchmark needs an NVIDIA GPU: the simulator's times say nothing about one.")
        if Path(bench.RESULTS).exists():
            print("Stored results:\n" + bench.table(bench.load()))
        return 0
    if getattr(args, "part", None):
        results = bench.load() if Path(bench.RESULTS).exists() else {}
        results[args.part] = bench.measure_part(args.part, repeat=args.repeat)
    else:
        results = bench.measure(repeat=args.repeat)
    print(bench.table(results))
    if args.save or args.out:
        bench.save(results, args.out or bench.RESULTS)
        print(f"wrote {args.out or bench.RESULTS}")
    return 0
