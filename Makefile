# Two commands for a fresh machine with nothing but Python:
#   make lab    open the book in JupyterLab (the reader's own copy, my-book/)
#   make test   run every test, the notebooks included (on the CUDA simulator without a GPU)
#   (make unit / make notebooks run one half; make assignments writes the student versions;
#    make html builds the static HTML edition into site/; make browser-test and make html-test
#    check the book in Chromium)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: lab reset-book test lint hub-test browser-test browser-deps html html-test unit notebooks execute-notebooks assignments clean

# The reader works in a copy of book/ (my-book/, not tracked): running and saving notebooks
# there never changes the book itself, and the tests keep comparing against its stored outputs.
READER_BOOK := my-book
# JupyterLab settings shipped with the book (lab/overrides.json): every cell rendered (the
# default windowing can leave an image that arrives off screen laid out at 0x0 px), no news pop-up.
LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings/overrides.json

# Installs into the environment of Python $(1) the requirements $(2). uv resolves and fetches the
# same packages from the same index as pip, in parallel, in a fraction of pip's time (CONTRIBUTING,
# "Time budget"). Where uv cannot be had (no wheel for the platform, an index only pip is
# configured for), pip installs them. Neither writes bytecode: it is written on import instead.
# uv itself goes into .venv once; the later installs (browser, html, hub) reuse it.
define install
((test -x $(BIN)/uv || $(BIN)/python -m pip install --quiet uv) && $(BIN)/uv pip install --quiet --python $(1) $(2)) \
	|| $(1) -m pip install --quiet --no-compile $(2)
endef

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(call install,$(BIN)/python,-e '.[dev]')
	touch $(STAMP)

lab: $(STAMP) $(LAB_SETTINGS) $(READER_BOOK)
	$(BIN)/jupyter lab --notebook-dir=$(READER_BOOK) $(LAB_ARGS)

$(LAB_SETTINGS): lab/overrides.json $(STAMP)
	mkdir -p $(dir $@)
	cp lab/overrides.json $@

$(READER_BOOK):
	cp -R book $(READER_BOOK)

# A fresh copy of the book for the reader (what was changed in my-book/ is discarded).
reset-book:
	rm -rf $(READER_BOOK)
	cp -R book $(READER_BOOK)

# One session over the notebooks and the tests, on every core: pytest-xdist hands out each
# notebook whole (its cells share one kernel) and each test module whole, the notebooks first,
# so that long notebooks and long tests overlap.
test: $(STAMP) lint
	$(BIN)/python -m pytest -n auto --dist loadscope --nbval --nbval-current-env \
		--nbval-sanitize-with book/nbval_sanitize.cfg -p no:cacheprovider book tests

# The code's rules: ruff (line length, unused names, import order) and the layers' contracts
# (import-linter: every import points down the layers of pyproject.toml).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-cache

# The book in a real browser (browser/): JupyterLab as `make lab` starts it, headless Chromium
# driven by Playwright, every notebook run and its widgets, images and Korean text checked;
# two notebooks at a time (two JupyterLabs, -n 2), since each kernel keeps one core busy.
APT := $(shell [ "$$(id -u)" = 0 ] && echo apt-get || echo sudo apt-get)
browser-test: browser-deps $(LAB_SETTINGS)
	$(BIN)/python -m pytest -n 2 -p no:cacheprovider browser

# Debian's chromium and a Korean font (apt), and Playwright (uv or pip), when missing.
browser-deps: $(STAMP)
	command -v chromium >/dev/null || ($(APT) update -q && $(APT) install -y -q chromium)
	fc-list | grep -qi nanum || ($(APT) update -q && $(APT) install -y -q fonts-nanum)
	$(BIN)/python -c "import playwright" 2>/dev/null || $(call install,$(BIN)/python,-e '.[browser]')

# The static HTML edition (html_edition/): every chapter with its stored outputs and its widgets'
# saved pictures, MathJax and the Korean font inside the site; nothing runs, nothing is fetched.
HTML_STAMP := $(VENV)/.installed-html
$(HTML_STAMP): $(STAMP)
	$(call install,$(BIN)/python,-e '.[html]')
	touch $@

html: $(HTML_STAMP)
	$(BIN)/python html_edition/build.py --out site

# Builds the site afresh and checks every chapter page, its prose, figures and widget pictures,
# that nothing comes from the network, and (in Chromium) the font and the mathematics.
html-test: $(HTML_STAMP) browser-deps
	$(BIN)/python -m pytest -p no:cacheprovider html_edition

# A whole class round on a real JupyterHub (classroom/): an instructor and three students as Unix
# accounts of their own, each with a Jupyter server behind configurable-http-proxy, nbgrader's
# exchange between them, from release to exported grades. Run as root: the hub starts each
# account's server as that account. Their servers run in an environment every account can read
# (HUB_PREFIX, made from the system's Python), with the proxy from npm (classroom/package.json).
HUB_PREFIX ?= /opt/gpulib-hub
HUB_PYTHON ?= /usr/bin/python3
# (a variable, since call splits its arguments at commas)
HUB_PACKAGES := '.[book,classroom,grader-cpu,hub]' pytest requests
hub-test: $(STAMP)
	@[ "$$(id -u)" = 0 ] || { echo "make hub-test adds Unix accounts and starts servers as them: run it as root"; exit 1; }
	cd classroom && npm ci --no-audit --no-fund --loglevel=error
	test -x $(HUB_PREFIX)/bin/python || $(HUB_PYTHON) -m venv $(HUB_PREFIX)
	$(call install,$(HUB_PREFIX)/bin/python,$(HUB_PACKAGES))
	cd classroom && HUB_PREFIX=$(HUB_PREFIX) $(HUB_PREFIX)/bin/python -m pytest -p no:cacheprovider -v --tb=short test_hub_round.py

# -n auto: one pytest worker per core (pytest-xdist); the simulator's kernels run as Python on the CPU.
unit: $(STAMP)
	$(BIN)/python -m pytest -n auto tests

# nbval runs every notebook and compares each output with the one stored in it; a notebook's
# cells share one kernel, so they stay on one worker (--dist loadscope).
notebooks: $(STAMP)
	$(BIN)/python -m pytest -n auto --dist loadscope --nbval --nbval-current-env \
		--nbval-sanitize-with book/nbval_sanitize.cfg -p no:cacheprovider book

# Re-run every notebook on the simulator and store its outputs (after editing a notebook).
execute-notebooks: $(STAMP)
	GPULIB_BACKEND=sim $(BIN)/python tools/run_notebooks.py --inplace book/*.ipynb

# The classroom assignments (assignments/README.md): from assignments/source, the student
# versions (release/: no solutions, no hidden tests) and the solution versions (solution/:
# executed, outputs included). Generated, never edited by hand, not committed.
assignments: $(STAMP)
	cd assignments && PATH="$(abspath $(BIN)):$$PATH" nbgrader generate_assignment "*" --force
	cd assignments && PATH="$(abspath $(BIN)):$$PATH" nbgrader generate_solution "*" --force

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .hypothesis site build
