"""The static HTML edition (`make html-test`): the site is built from the book as it is, and
then every chapter has its page with its Korean prose, every figure and every widget picture
of the notebook is on that page, nothing is fetched from the network, and in Chromium a page
opened as a file shows its Korean in the site's own font and its mathematics typeset.
"""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path

import pytest

import build

HANGUL_PHRASE = re.compile(r"[가-힣][가-힣 ]{10,}[가-힣]")
TAG = re.compile(r"<[^>]+>")
# per formula Sphinx wrote (class "math notranslate"), whether MathJax has typeset it
TYPESET = "[...document.querySelectorAll('.math.notranslate')].map(m => !!m.querySelector('.MathJax, .MathJax_Display'))"
EXTERNAL = re.compile(r"""<(?:script|link|img|iframe|source)\b[^>]*\b(?:src|href)\s*=\s*["']?(?:https?:)?//""", re.I)


@pytest.fixture(scope="session")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("html")
    build.build(root / "site", staging=root / "source")
    return root / "site"


def _text(page: Path) -> str:
    return re.sub(r"\s+", " ", html.unescape(TAG.sub(" ", page.read_text())))


def _notebook(path: Path) -> dict:
    return json.loads(path.read_text())


def _pictures(nb: dict) -> int:
    """Figures of a notebook: its PNG outputs and the pictures held by its saved widgets."""
    state = nb["metadata"].get("widgets", {}).get(build.WIDGET_STATE, {}).get("state", {})
    shown = [o["data"][build.WIDGET_VIEW]["model_id"] for c in nb["cells"] if c["cell_type"] == "code"
             for o in c["outputs"] if build.WIDGET_VIEW in o.get("data", {})]
    widget_images = sum(len([o for o in build.widget_as_outputs(m, state) if "image/png" in o["data"]])
                        for m in shown)
    pngs = sum("image/png" in o.get("data", {}) for c in nb["cells"] if c["cell_type"] == "code"
               for o in c["outputs"])
    return pngs + widget_images


CHAPTERS = [p.name for p in build.chapters()]


def test_the_book_has_six_sections_in_seven_notebooks_and_a_glossary(site):
    assert [name.split("_")[0] + "_" + name.split("_")[1] for name in CHAPTERS] == [
        "16_1", "16_2", "16_3", "16_4", "16_5", "16_5b", "16_6"]
    glossary = site / "glossary.html"
    assert glossary.exists() and "glossary.html" in (site / "index.html").read_text()
    assert "쓰지 않는 말" in _text(glossary) and "local translation invariance" in _text(glossary)


@pytest.mark.parametrize("name", CHAPTERS)
def test_each_chapter_page_carries_its_korean_prose(site, name):
    page = site / name.replace(".ipynb", ".html")
    assert page.exists(), f"no page for {name}"
    text = _text(page)
    nb = _notebook(build.source(build.BOOK / name)[0])
    title = "".join(nb["cells"][0]["source"]).splitlines()[0].lstrip("# ").strip()
    assert title in text, f"{name}: the title {title!r} is not on its page"
    run = build.source(build.BOOK / name)[1]  # the GPU execution the page shows, or None (the simulator's)
    assert (f"{run['device']} 에서 {run['date']}" if run else "CUDA 시뮬레이터에서 줄인 크기로") in text, (
        f"{name}: the page does not say where its outputs come from")
    phrases = []  # one Korean passage per markdown cell, from within one line
    for cell in nb["cells"]:
        found = [HANGUL_PHRASE.search(line) for line in cell["source"]] if cell["cell_type"] == "markdown" else []
        phrases += [m.group(0) for m in found if m][:1]
    assert len(phrases) >= 5, name
    missing = [p for p in phrases if p not in text]
    assert not missing, f"{name}: {len(missing)} of {len(phrases)} Korean passages are not on the page: {missing[:3]}"
    assert name.replace(".ipynb", ".html") in (site / "index.html").read_text(), "not in the table of contents"


@pytest.mark.parametrize("name", CHAPTERS)
def test_each_chapter_page_shows_every_figure_and_widget_picture(site, name):
    page = site / name.replace(".ipynb", ".html")
    sources = re.findall(r'<img[^>]*\bsrc="([^"]+)"', page.read_text())
    images = [s for s in sources if s.startswith("_images/")]
    assert len(images) == _pictures(_notebook(build.source(build.BOOK / name)[0])), (name, len(images))
    for src in images:
        data = (site / src).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 1000, src
    views = sum(build.WIDGET_VIEW in o.get("data", {}) for c in _notebook(build.source(build.BOOK / name)[0])["cells"]
                if c["cell_type"] == "code" for o in c["outputs"])
    assert page.read_text().count('class="static-widget-note"') == views
    assert "widget-view+json" not in page.read_text()


def test_the_site_fetches_nothing_from_the_network(site):
    pages = list(site.glob("*.html"))
    assert len(pages) >= 8
    for page in pages:
        assert not EXTERNAL.search(page.read_text()), f"{page.name} loads something from the network"
    for css in site.glob("_static/**/*.css"):
        assert not re.search(r"(@import|url\()\s*[\"']?(https?:)?//", css.read_text()), css
    assert (site / "_static" / "mathjax" / "MathJax.js").exists()
    assert '_static/mathjax/MathJax.js' in (site / "16_1_background.html").read_text()


def test_the_korean_font_travels_inside_the_style_sheet(site):
    css = (site / "_static" / "fonts.css").read_text()
    fonts = re.findall(r"data:font/woff;base64,([A-Za-z0-9+/=]+)", css)
    assert len(fonts) == 2  # regular and bold
    for font in fonts:
        assert base64.b64decode(font)[:4] == b"wOFF"
    assert '"NanumGothic"' in (site / "_static" / "book.css").read_text()


def test_a_widget_becomes_its_picture_text_and_control_values():
    png = base64.b64encode(b"\x89PNG fake").decode()
    models = {
        "box": {"model_name": "VBoxModel", "state": {"children": ["IPY_MODEL_s", "IPY_MODEL_h", "IPY_MODEL_i"]}},
        "s": {"model_name": "FloatLogSliderModel", "state": {"description": "η", "value": 0.5}},
        "h": {"model_name": "HTMLModel", "state": {"value": "<b>수렴</b>"}},
        "i": {"model_name": "ImageModel", "state": {}, "buffers": [{"path": ["value"], "encoding": "base64", "data": png}]},
    }
    outputs = build.widget_as_outputs("box", models)
    assert "η = 0.5" in outputs[0]["data"]["text/html"] and "<b>수렴</b>" in outputs[0]["data"]["text/html"]
    assert [o["data"].get("image/png") for o in outputs[1:]] == [png]
    nb = {"metadata": {"widgets": {build.WIDGET_STATE: {"state": models}}}, "cells": [{"cell_type": "code", "outputs": [
        {"output_type": "display_data", "data": {build.WIDGET_VIEW: {"model_id": "box"}}},
        {"output_type": "display_data", "data": {build.WIDGET_VIEW: {"model_id": "gone"}}}]}]}
    static = build.static_notebook(nb)
    assert "widgets" not in static["metadata"]
    kinds = [next(iter(o["data"])) for o in static["cells"][0]["outputs"]]
    assert kinds == ["text/html", "image/png", "text/html"]
    assert "저장되지 않았습니다" in static["cells"][0]["outputs"][2]["data"]["text/html"]


def test_in_chromium_a_page_opened_as_a_file_shows_korean_and_mathematics(site):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    executable = Path("/usr/bin/chromium")
    assert executable.exists(), "no Chromium: `make html-test` installs Debian's chromium"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(executable), args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        page.goto((site / "16_1_background.html").as_uri())
        try:  # MathJax typesets the page's formulas one after another after the page has loaded
            page.wait_for_function(
                f"() => document.querySelectorAll('.MathJax_Error').length > 0 || ({TYPESET}).every(x => x)",
                timeout=90_000)
        except PlaywrightTimeout:
            pass  # the assertion below says how far it got
        state = page.evaluate("""async () => ({
            fonts: (await document.fonts.load('16px NanumGothic', '가')).map(f => f.status),
            family: getComputedStyle(document.querySelector('article p')).fontFamily,
            maths: (""" + TYPESET + """).length,
            typeset: (""" + TYPESET + """).filter(x => x).length,
            errors: document.querySelectorAll('.MathJax_Error').length})""")
        browser.close()
    assert state["family"].replace('"', "").startswith("NanumGothic,"), state
    assert state["fonts"] == ["loaded"], state  # the site's own font (the style sheet's), even from a file:// page
    assert state["maths"] > 50 and state["typeset"] == state["maths"] and state["errors"] == 0, state
