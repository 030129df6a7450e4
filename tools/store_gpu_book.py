"""Keep notebooks executed on a GPU beside the book, in book_gpu/, with the device and date.

    python tools/store_gpu_book.py --device "NVIDIA H200" --date 2026-12-05 OUT/16_*.ipynb

Each executed notebook must have exactly the book's cells (the same sources in the same order)
and no error output; it is copied to book_gpu/ and book_gpu/manifest.json names the device and
date. The HTML edition is built from these copies (html_edition/build.py), and each chapter
shows a stored GPU result beside the simulator's where the simulator's small run would mislead
(gpulib.figures.stored_gpu). tests/test_gpu_book.py fails when a copy goes stale: re-execute it
on a GPU (tools/device_run.sh) or delete it, and the HTML edition falls back to the simulator's.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BOOK, GPU_BOOK = ROOT / "book", ROOT / "book_gpu"


def sources(path: Path) -> list[tuple[str, str]]:
    return [(c["cell_type"], "".join(c["source"])) for c in json.loads(path.read_text())["cells"]]


def errors(path: Path) -> list[int]:
    return [i for i, c in enumerate(json.loads(path.read_text())["cells"]) if c["cell_type"] == "code"
            and any(o.get("output_type") == "error" for o in c.get("outputs", []))]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--device", required=True)
    parser.add_argument("--date", required=True)
    args = parser.parse_args(argv)
    GPU_BOOK.mkdir(exist_ok=True)
    manifest_path = GPU_BOOK / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    for path in args.notebooks:
        book = BOOK / path.name
        if not book.exists() or sources(path) != sources(book):
            print(f"{path.name}: its cells differ from book/{path.name}; not stored", file=sys.stderr)
            return 1
        if errors(path):
            print(f"{path.name}: cells {errors(path)} raised; not stored", file=sys.stderr)
            return 1
        shutil.copy(path, GPU_BOOK / path.name)
        manifest[path.name] = dict(device=args.device, date=args.date)
        print(f"stored book_gpu/{path.name} ({args.device}, {args.date})")
    manifest_path.write_text(json.dumps(dict(sorted(manifest.items())), indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
