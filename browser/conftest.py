"""The browser test's fixtures: JupyterLab started as `make lab` starts it (the book's settings
installed, a copy of the book as the notebook folder), and headless Chromium driven by
Playwright. Chromium is Debian's (/usr/bin/chromium, or $CHROMIUM); Playwright's own browser
download is never used."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = ROOT / "assignments" / "source" / "16_1_mlp" / "16_1_mlp.ipynb"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    """A running JupyterLab on a copy of book/ (and one assignment): (base url, token, folder)."""
    folder = tmp_path_factory.mktemp("reader") / "my-book"
    shutil.copytree(ROOT / "book", folder)
    shutil.copy(ASSIGNMENT, folder / ASSIGNMENT.name)
    port, token = _free_port(), secrets.token_hex(16)
    jupyter = Path(sys.executable).with_name("jupyter")
    env = dict(os.environ, GPULIB_BACKEND="sim")  # the reader's machine without a GPU
    log = open(folder.parent / "lab.log", "w")
    server = subprocess.Popen(
        [str(jupyter), "lab", f"--notebook-dir={folder}", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
         f"--IdentityProvider.token={token}", "--allow-root", "--LabApp.expose_app_in_browser=True",
         # a workspace folder of its own: in the user's shared one, every notebook opened before (by
         # this run's other worker, or by an earlier run) would be opened again, its kernel started
         f"--LabApp.workspaces_dir={folder.parent / 'workspaces'}"],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while True:
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
            break
        except OSError:
            if time.time() > deadline or server.poll() is not None:
                server.kill()
                raise RuntimeError("JupyterLab did not start: " + (folder.parent / "lab.log").read_text()[-2000:])
            time.sleep(0.5)
    yield base, token, folder
    server.terminate()
    try:
        server.wait(20)
    except subprocess.TimeoutExpired:
        server.kill()


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    executable = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    if not Path(executable).exists():
        pytest.fail(f"no Chromium at {executable}: `make browser-test` installs Debian's chromium")
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, tmp_path_factory):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    yield page
    context.close()
