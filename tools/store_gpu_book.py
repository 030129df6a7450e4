"""Keep notebooks executed on a GPU beside the book, in book_gpu/, with the device and date.

    python tools/store_gpu_book.py --device "NVIDIA H200" --date 2026-12-05 OUT/16_*.ipynb

Each executed notebook must have exactly the book's code cells (the same sources in the same
order) and no error output; its markdown cells are taken from the book (they have no outputs, so
a sentence changed after the GPU run changes nothing the GPU computed):

    python tools/store_gpu_book.py --markdown-only     # after editing prose: resync book_gpu/'s text

The executed notebook is then written to book_gpu/, and book_gpu/manifest.json names the
device and date. The HTML edition is built from these copies (html_edition/build.py), and each chapter
shows a stored GPU result beside the simulator's where the simulator's small run would mislead
(gpulib.figures.stored_gpu). tests/test_gpu_book.py fails when a copy goes stale: re-execute it
on a GPU (tools/device_run.sh) or delete it, and the HTML edition falls back to the simulator's.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BOOK, GPU_BOOK = ROOT / "book", ROOT / "book_gpu"


def sources(path: Path) -> list[tuple[str, str]]:
    return [(c["cell_type"], "".join(c["source"])) for c in json.loads(path.read_text())["cells"]]


def code_sources(path: Path) -> list[tuple[str, str]]:
    return [(kind, "" if kind == "markdown" else src) for kind, src in sources(path)]


def with_book_markdown(executed: dict, book: dict) -> dict:
    """``executed`` with each markdown cell's source replaced by the book's (same cells in order)."""
    for mine, theirs in zip(executed["cells"], book["cells"]):
        if mine["cell_type"] == "markdown":
            mine["source"] = theirs["source"]
    return executed


def errors(path: Path) -> list[int]:
    return [i for i, c in enumerate(json.loads(path.read_text())["cells"]) if c["cell_type"] == "code"
            and any(o.get("output_type") == "error" for o in c.get("outputs", []))]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--device")
    parser.add_argument("--date")
    parser.add_argument("--markdown-only", action="store_true",
                        help="resync the markdown of the notebooks already in book_gpu/ from book/")
    args = parser.parse_args(argv)
    if args.markdown_only:
        args.notebooks, keep_manifest = sorted(GPU_BOOK.glob("*.ipynb")), True
    elif not (args.notebooks and args.device and args.date):
        parser.error("give the executed notebooks, --device and --date (or --markdown-only)")
    else:
        keep_manifest = False
    GPU_BOOK.mkdir(exist_ok=True)
    manifest_path = GPU_BOOK / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    for path in args.notebooks:
        book = BOOK / path.name
        if not book.exists() or code_sources(path) != code_sources(book):
            print(f"{path.name}: its cells differ from book/{path.name}; not stored", file=sys.stderr)
            return 1
        if errors(path):
            print(f"{path.name}: cells {errors(path)} raised; not stored", file=sys.stderr)
            return 1
        executed = with_book_markdown(json.loads(path.read_text()), json.loads(book.read_text()))
        (GPU_BOOK / path.name).write_text(json.dumps(executed, indent=1, ensure_ascii=False) + "\n")
        if not keep_manifest:
            manifest[path.name] = dict(device=args.device, date=args.date)
        print(f"stored book_gpu/{path.name} ({manifest[path.name]['device']}, {manifest[path.name]['date']})")
    manifest_path.write_text(json.dumps(dict(sorted(manifest.items())), indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
