"""Execute notebooks with nbclient and report each one's time (and, with --cells, each cell's).

    python tools/run_notebooks.py --inplace book/*.ipynb     # refresh the stored outputs
    python tools/run_notebooks.py --out DIR book/*.ipynb     # keep executed copies in DIR

``make execute-notebooks`` runs the first form on the simulator, so the outputs stored in
the book are the ones nbval compares against in CI.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def run(path: Path, out: Path, timeout: int, show_cells: bool) -> float:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    started = time.perf_counter()
    cell_times = []

    def on_cell_executed(cell, cell_index, execute_reply):
        cell_times.append((cell_index, time.perf_counter()))
        if show_cells:
            previous = cell_times[-2][1] if len(cell_times) > 1 else started
            print(f"  cell {cell_index:3d}: {cell_times[-1][1] - previous:7.2f} s", flush=True)

    client.on_cell_executed = on_cell_executed
    try:
        client.execute()
    finally:
        nbformat.write(nb, out)
    return time.perf_counter() - started


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--inplace", action="store_true", help="overwrite each notebook")
    where.add_argument("--out", type=Path, help="directory for the executed copies")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
    parser.add_argument("--cells", action="store_true", help="print the time of every cell")
    args = parser.parse_args(argv)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    for path in args.notebooks:
        out = path if args.inplace else args.out / path.name
        seconds = run(path, out, args.timeout, args.cells)
        print(f"{path}: executed in {seconds:.1f} s -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
