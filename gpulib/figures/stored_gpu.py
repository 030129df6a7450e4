"""16.1-16.6, every chapter: the book executed on a GPU, kept beside it (book_gpu/: each notebook with the device and date
that ran it, book_gpu/manifest.json), and a cell's stored GPU outputs shown next to the
simulator's: where the simulator's small run would mislead (a model trained for two steps, a
confusion matrix that never predicts some digit), a reader sees what the same cell did on a GPU.

    show("16_1_background.ipynb", "gpu-result-train")   # the outputs of the cell tagged so

tests/test_gpu_book.py keeps every stored notebook's source identical to the book's."""

from __future__ import annotations

import base64
import json
from pathlib import Path

GPU_BOOK = Path(__file__).resolve().parents[2] / "book_gpu"
MANIFEST = GPU_BOOK / "manifest.json"


def manifest() -> dict:
    """{notebook name: {device, date}} of the stored GPU executions ({} when there are none)."""
    return json.loads(MANIFEST.read_text()) if MANIFEST.exists() else {}


def tagged_outputs(notebook: str, tag: str) -> list[dict]:
    """The outputs, as stored on the GPU, of the cell of ``notebook`` that carries ``tag``."""
    if not isinstance(notebook, str) or not isinstance(tag, str):
        raise ValueError(f"notebook and tag must be names (str), not {notebook!r:.40} and {tag!r:.40}")
    path = GPU_BOOK / notebook
    if not path.exists():
        return []
    cells = [c for c in json.loads(path.read_text())["cells"] if tag in c.get("metadata", {}).get("tags", [])]
    if len(cells) != 1:
        raise ValueError(f"{notebook} has {len(cells)} cells tagged {tag!r}; needs exactly one")
    return cells[0].get("outputs", [])


def show(notebook: str, *tags: str) -> bool:
    """Print and display the stored GPU outputs of the cells with ``tags``, under a line naming the
    device and date; say so and return False when this notebook has no stored GPU execution."""
    from IPython.display import Image, display

    entry = manifest().get(notebook)
    if entry is None:
        print(f"{notebook} has no stored GPU execution yet (tools/store_gpu_book.py stores one).")
        return False
    print(f"--- the same cells executed on {entry['device']}, {entry['date']} (stored in book_gpu/{notebook}) ---")
    for tag in tags:
        for out in tagged_outputs(notebook, tag):
            data = out.get("data", {})
            if out.get("output_type") == "stream" and out.get("name") == "stdout":
                print("".join(out["text"]).rstrip())
            elif "image/png" in data:
                display(Image(data=base64.b64decode("".join(data["image/png"]))))
            elif "text/plain" in data and out.get("output_type") == "execute_result":
                print("".join(data["text/plain"]))
    return True
