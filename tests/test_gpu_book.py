"""The notebooks executed on a GPU (book_gpu/) stay the book's: the same cells, the device and
date named, no errors; a stale copy fails here (re-execute it on a GPU or delete it)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import store_gpu_book  # noqa: E402

from gpulib.figures import stored_gpu  # noqa: E402

STORED = sorted(stored_gpu.GPU_BOOK.glob("*.ipynb"))


def test_every_stored_gpu_notebook_is_the_book_s_notebook_as_it_is_now():
    manifest = stored_gpu.manifest()
    assert sorted(manifest) == [p.name for p in STORED], "book_gpu/manifest.json and book_gpu/ disagree"
    for path in STORED:
        book = ROOT / "book" / path.name
        assert book.exists(), f"book_gpu/{path.name} has no notebook in book/"
        assert store_gpu_book.sources(path) == store_gpu_book.sources(book), (
            f"book_gpu/{path.name} is stale: its cells differ from book/{path.name}. Re-execute it on a GPU "
            f"(tools/device_run.sh, then tools/store_gpu_book.py; after a change of prose only, "
            f"tools/store_gpu_book.py --markdown-only) or delete it (the HTML edition then shows the "
            f"simulator's outputs)")
        assert not store_gpu_book.errors(path), f"book_gpu/{path.name} stored an error"
        assert manifest[path.name]["device"].startswith("NVIDIA") and manifest[path.name]["date"][:2] == "20"
        first = next(c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code")
        assert "gpulib backend: GPU" in "".join("".join(o.get("text", "")) for o in first["outputs"]), (
            f"book_gpu/{path.name} was not executed on a GPU")


def test_each_tag_a_chapter_shows_from_its_gpu_run_is_in_the_book():
    for book in sorted((ROOT / "book").glob("*.ipynb")):
        cells = json.loads(book.read_text())["cells"]
        tags = [t for c in cells for t in c.get("metadata", {}).get("tags", []) if t.startswith("gpu-result")]
        assert len(tags) == len(set(tags)), f"{book.name}: a gpu-result tag is used twice"
        shown = "".join("".join(c["source"]) for c in cells if "stored_gpu.show" in "".join(c["source"]))
        for tag in tags:
            assert tag in shown, f"{book.name}: the cell tagged {tag} is never shown from its GPU run"
