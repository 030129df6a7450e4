"""The static HTML edition of the book (`make html`): every notebook of book/ with the outputs
stored in it, rendered by Sphinx with myst-nb and sphinx-book-theme into a site that reads
offline. Nothing is executed and nothing is fetched from the network:

- each widget is shown as what it was saved with: its picture, its text and the values of its
  controls (a static page has no kernel to move a slider; the page says so);
- mathematics is typeset by MathJax 2.7 from the jupyter-server-mathjax package, copied into the
  site;
- Korean is set in NanumGothic (the font the figures use), cut down to the characters the book
  uses and written into the style sheet itself, so a reader without a Korean font still reads
  the prose, also from a page opened as a file (browsers refuse font files there).

    python html_edition/build.py [--out site]
"""

from __future__ import annotations

import argparse
import base64
import copy
import importlib.util
import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BOOK = ROOT / "book"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
CONTROLS = ("Slider", "Dropdown", "ToggleButtons", "RadioButtons", "Checkbox", "Text", "Select")


def chapters() -> list[Path]:
    """The book's notebooks in reading order (their names start with the section number)."""
    return sorted(BOOK.glob("*.ipynb"))


GPU_BOOK = ROOT / "book_gpu"


def _cells(path: Path) -> list[tuple[str, str]]:
    return [(c["cell_type"], "".join(c["source"])) for c in json.loads(path.read_text())["cells"]]


def source(path: Path) -> tuple[Path, dict | None]:
    """Where a chapter's page takes its outputs from: the notebook executed on a GPU
    (book_gpu/, with its device and date) when one is stored and has the book's cells, as d2l
    builds its pages from GPU runs; else the book's own notebook (the simulator's outputs)."""
    manifest_path = GPU_BOOK / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    gpu = GPU_BOOK / path.name
    if path.name in manifest and gpu.exists() and _cells(gpu) == _cells(path):
        return gpu, manifest[path.name]
    return path, None


def provenance_cell(run: dict | None) -> dict:
    """A note under the page's title saying where its outputs come from."""
    text = (f"이 페이지의 실행 결과는 **{run['device']}** 에서 {run['date']}에 전체 크기로 실행한 것이다."
            if run else "이 페이지의 실행 결과는 GPU가 없는 기계의 CUDA 시뮬레이터에서 줄인 크기로 실행한 것이다. "
            "GPU에서 잰 시간과 결과는 본문의 표와 그림이 저장된 측정값으로 보여 준다.")
    return {"cell_type": "markdown", "metadata": {}, "source": f"> {text}"}


def pages() -> list[Path]:
    """The book's Markdown pages (the glossary), published beside the notebooks."""
    return sorted(BOOK.glob("*.md"))


def _children(model: dict) -> list[str]:
    return [c.removeprefix("IPY_MODEL_") for c in model["state"].get("children", [])]


def _control_value(state: dict) -> str:
    if "_options_labels" in state and state.get("index") is not None:
        return str(state["_options_labels"][state["index"]])
    value = state.get("value")
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def widget_as_outputs(model_id: str, models: dict) -> list[dict]:
    """The outputs a static page shows for one widget view: a note with the values of its
    controls and its text, then each picture it holds (as image/png outputs)."""
    controls, texts, images = [], [], []

    def walk(mid: str) -> None:
        model = models.get(mid)
        if model is None:
            return
        name, state = model["model_name"], model["state"]
        if name == "ImageModel":
            for buffer in model.get("buffers", []):
                if buffer["path"] == ["value"]:
                    data = buffer["data"] if buffer["encoding"] == "base64" else base64.b64encode(
                        buffer["data"].encode("latin-1")).decode()
                    images.append(data)
        elif name in ("HTMLModel", "HTMLMathModel") and state.get("value"):
            texts.append(state["value"])
        elif name == "LabelModel" and state.get("value"):
            texts.append(f"<span>{state['value']}</span>")
        elif any(kind in name for kind in CONTROLS) and state.get("description"):
            controls.append(f"{state['description']} = {_control_value(state)}")
        for child in _children(model):
            walk(child)

    walk(model_id)
    saved = f" ({', '.join(controls)})" if controls else ""
    note = (f'<div class="static-widget-note">정적 판: 노트북에 저장된 위젯의 마지막 상태{saved}. '
            "컨트롤을 움직여 보려면 JupyterLab에서 노트북을 여세요.</div>")
    html = note + "".join(f'<div class="static-widget-text">{t}</div>' for t in texts)
    outputs = [{"output_type": "display_data", "metadata": {}, "data": {"text/html": html}}]
    outputs += [{"output_type": "display_data", "metadata": {},
                 "data": {"image/png": data, "text/plain": "<widget picture>"}} for data in images]
    return outputs


def static_notebook(nb: dict) -> dict:
    """The notebook with every widget view replaced by its saved picture and text, and the
    widget state removed (a page with widget state would load the widget manager from a CDN)."""
    nb = copy.deepcopy(nb)
    models = nb["metadata"].pop("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        outputs = []
        for output in cell.get("outputs", []):
            view = output.get("data", {}).get(WIDGET_VIEW)
            if view is None:
                outputs.append(output)
            elif view["model_id"] in models:
                outputs += widget_as_outputs(view["model_id"], models)
            else:  # a view whose state was not saved: say so rather than show an empty box
                outputs.append({"output_type": "display_data", "metadata": {}, "data": {
                    "text/html": '<div class="static-widget-note">(이 위젯의 상태는 저장되지 않았습니다.)</div>'}})
        cell["outputs"] = outputs
    return nb


def _mathjax_dir() -> Path:
    spec = importlib.util.find_spec("jupyter_server_mathjax")
    if spec is None:
        raise SystemExit("jupyter-server-mathjax is missing: `pip install -e '.[html]'` (make html does)")
    return Path(next(iter(spec.submodule_search_locations))) / "static"


def _korean_fonts() -> list[Path]:
    """NanumGothic regular and bold: the font the figures use (gpulib.style)."""
    from gpulib.style import korean_font_path

    regular = korean_font_path()
    if regular is None:
        raise SystemExit("koreanize-matplotlib (NanumGothic) is missing: `pip install -e .`")
    return [regular, regular.with_name("NanumGothicBold.ttf")]


def book_characters() -> str:
    """Every character of the book's text (prose, code, outputs) and of the landing page."""
    text = (HERE / "index.md").read_text()
    for path in chapters() + pages() + sorted(GPU_BOOK.glob("*.ipynb")):
        text += path.read_text()  # the JSON escapes nothing: it was written with ensure_ascii=False
    printable = {chr(c) for c in range(0x20, 0x7F)}
    return "".join(sorted(set(text) | printable))


def font_face_css(characters: str) -> str:
    """@font-face rules for NanumGothic (regular and bold) cut down to `characters`, the fonts
    inside the CSS as WOFF data: URIs."""
    import io

    from fontTools import subset

    rules = []
    for font, weight in zip(_korean_fonts(), (400, 700)):
        options = subset.Options()
        options.flavor = "woff"
        options.layout_features = ["*"]
        options.drop_tables += ["TSI0", "TSI1", "TSI2", "TSI3", "TSI5"]  # the font tool's sources
        face = subset.load_font(str(font), options)
        cutter = subset.Subsetter(options)
        cutter.populate(text=characters)
        cutter.subset(face)
        data = io.BytesIO()
        subset.save_font(face, data, options)
        uri = "data:font/woff;base64," + base64.b64encode(data.getvalue()).decode()
        rules.append(f'@font-face {{ font-family: "NanumGothic"; font-weight: {weight}; '
                     f'font-display: swap; src: url("{uri}") format("woff"); }}')
    return "\n".join(rules) + "\n"


def stage(staging: Path) -> None:
    """The Sphinx source folder (the landing page and the static notebooks) and, beside it, the
    assets the site serves itself (MathJax and the Korean font's style sheet)."""
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    shutil.copy(HERE / "index.md", staging / "index.md")
    for page in pages():
        shutil.copy(page, staging / page.name)
    for path in chapters():
        where, run = source(path)
        nb = static_notebook(json.loads(where.read_text()))
        nb["cells"].insert(1, provenance_cell(run))
        (staging / path.name).write_text(json.dumps(nb, ensure_ascii=False))
    assets = staging.parent / (staging.name + "-assets")  # beside the sources: Sphinx copies, never parses it
    if assets.exists():
        shutil.rmtree(assets)
    shutil.copytree(_mathjax_dir(), assets / "mathjax")
    (assets / "fonts.css").write_text(font_face_css(book_characters()))


def build(out: Path, staging: Path | None = None) -> Path:
    """Build the site into `out`; returns the path of its front page."""
    from sphinx.cmd.build import build_main

    staging = staging or ROOT / "build" / "html-source"
    stage(staging)
    static = f"{HERE / 'static'},{staging.parent / (staging.name + '-assets')}"
    code = build_main(["-b", "html", "-q", "-E", "-c", str(HERE), "-D", f"html_static_path={static}",
                       str(staging), str(out)])
    if code != 0:
        raise SystemExit(f"sphinx-build failed with exit status {code}")
    return out / "index.html"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "site", help="the site's folder (default: site/)")
    args = parser.parse_args(argv)
    front = build(args.out.resolve())
    print(f"the book's HTML edition: {front}")


if __name__ == "__main__":
    sys.exit(main())
