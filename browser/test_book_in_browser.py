"""The book as a reader meets it: every notebook of book/ (and one assignment) opened in
JupyterLab in headless Chromium, Run All, and then

- no cell ends in an error;
- every widget output is rendered as a widget (not "Error displaying widget", not a text repr);
- every image inside a widget output has loaded and is laid out at a non-zero size;
- in every widget that holds a picture and a slider, moving the slider changes the picture;
- Korean text is drawn with a Korean font (a Hangul glyph differs from the missing-glyph box).

Run with `make browser-test` (it installs Chromium, a Korean font and Playwright when missing).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import ASSIGNMENT, ROOT

NOTEBOOKS = sorted(p.name for p in (ROOT / "book").glob("*.ipynb")) + [ASSIGNMENT.name]
RUN_TIMEOUT_S = 600  # the longest notebook takes about 90 s on the simulator

CURRENT = "window.jupyterapp.shell.currentWidget"
KERNEL_READY = f"""() => {{
    const w = window.jupyterapp && {CURRENT};
    const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
    return k && k.status === 'idle' ? k.id : null;
}}"""
RUN_STATE = f"""() => {{
    const w = {CURRENT};
    const cells = w.content.widgets.filter(c => c.model.type === 'code');
    const errors = [];
    for (const c of cells) for (const o of c.model.outputs.toJSON())
        if (o.output_type === 'error') errors.push(o.ename + ': ' + o.evalue);
    const busy = cells.some(c => (c.promptNode && c.promptNode.textContent.includes('*')));
    const done = cells.every(c => c.model.executionCount !== null);
    return {{status: w.sessionContext.session.kernel.status, busy, done, errors, cells: cells.length}};
}}"""
WIDGETS = """() => {
    const outs = [...document.querySelectorAll(
        '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.widget-view+json"]')];
    return outs.map(o => ({
        rendered: !!o.querySelector('.jupyter-widgets'),
        text: o.innerText.slice(0, 200),
        images: [...o.querySelectorAll('img')].map(i => {
            const r = i.getBoundingClientRect();
            return {loaded: i.complete && i.naturalWidth > 0, width: r.width, height: r.height};
        }),
        sliders: o.querySelectorAll('.noUi-handle').length,
    }));
}"""
HANGUL = """() => {
    const node = document.querySelector('.jp-RenderedMarkdown') || document.body;
    const family = getComputedStyle(node).fontFamily;
    const canvas = document.createElement('canvas');
    canvas.width = 120; canvas.height = 60;
    const g = canvas.getContext('2d');
    const draw = t => { g.clearRect(0, 0, 120, 60); g.font = '40px ' + family; g.fillStyle = '#000';
                        g.fillText(t, 10, 45); return Array.from(g.getImageData(0, 0, 120, 60).data).join(','); };
    const missing = draw(String.fromCodePoint(0x10FFFD));
    const ga = draw('가'), na = draw('나');
    return {family, differs_from_missing: ga !== missing, distinct_glyphs: ga !== na};
}"""


def _open(page, lab, name):
    base, token, _ = lab
    page.goto(f"{base}/lab/tree/{name}?token={token}&reset")  # reset: only this notebook, not the ones before it
    # an idle kernel whose id stays the same for 3 s: Run All sent to a kernel that is still
    # being started or replaced is lost
    deadline, seen, since = time.time() + 180, None, time.time()
    while True:
        kernel = page.evaluate(KERNEL_READY)
        if kernel is None or kernel != seen:
            seen, since = kernel, time.time()
        elif time.time() - since >= 3:
            return
        if time.time() > deadline:
            raise AssertionError(f"{name}: no stable idle kernel after 180 s")
        time.sleep(0.5)


def _run_all(page):
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    deadline = time.time() + RUN_TIMEOUT_S
    time.sleep(2)
    while True:
        state = page.evaluate(RUN_STATE)
        if state["status"] == "idle" and not state["busy"] and (state["done"] or state["errors"]):
            return state
        if time.time() > deadline:
            raise AssertionError(f"Run All did not finish in {RUN_TIMEOUT_S} s: {state}")
        time.sleep(1)


def _image_sources(page, index):
    return page.evaluate(
        """i => [...document.querySelectorAll(
            '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.widget-view+json"]')][i]
            .querySelectorAll('img')[0].src.slice(-200)""", index)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_and_renders_in_the_browser(page, lab, name):
    _open(page, lab, name)
    state = _run_all(page)
    assert not state["errors"], f"{name}: cells ended in errors: {state['errors']}"
    assert state["done"], f"{name}: some cells never ran: {state}"

    widgets = page.evaluate(WIDGETS)
    for i, w in enumerate(widgets):
        assert w["rendered"], f"{name}: widget output {i} is not rendered as a widget: {w['text']!r}"
        assert "Error displaying widget" not in w["text"], f"{name}: widget output {i}: {w['text']!r}"
        for img in w["images"]:
            assert img["loaded"] and img["width"] > 0 and img["height"] > 0, (
                f"{name}: an image of widget output {i} is not shown: {img}")

    hangul = page.evaluate(HANGUL)
    assert hangul["differs_from_missing"] and hangul["distinct_glyphs"], (
        f"{name}: Hangul is drawn as empty boxes with the font {hangul['family']!r}: install a Korean font")

    interactive = [i for i, w in enumerate(widgets) if w["images"] and w["sliders"]]
    for i in interactive:  # the first slider one step right; the picture must change
        before = _image_sources(page, i)
        handle = page.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.widget-view+json"]'
                               ).nth(i).locator(".noUi-handle").first
        handle.scroll_into_view_if_needed()
        handle.focus()
        page.keyboard.press("ArrowRight")
        page.wait_for_function(
            """([i, before]) => [...document.querySelectorAll(
                '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.widget-view+json"]')][i]
                .querySelectorAll('img')[0].src.slice(-200) !== before""", arg=[i, before], timeout=180_000)


def test_every_notebook_is_covered():
    assert len(NOTEBOOKS) == len(list((ROOT / "book").glob("*.ipynb"))) + 1 >= 8
    assert Path(ROOT / "lab" / "overrides.json").exists()
