# The two commands the README starts with: `make serve` and `make test`.
# Both create the virtual environment in .venv on first use (and again when pyproject.toml changes).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATA_DIR ?= ./data
HOST ?= 127.0.0.1
PORT ?= 8000
URL ?= http://127.0.0.1:$(PORT)
DOCS_PORT ?= 8001

.PHONY: serve test demo docs dashboard-screenshot clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $@

# The first start on a machine compiles the kernels (two to three minutes); later ones load them
# from the on-disk cache (~/.cache/streamtree, or $STREAMTREE_KERNEL_CACHE).
serve: $(BIN)/.installed
	$(BIN)/streamtree serve --data-dir $(DATA_DIR) --host $(HOST) --port $(PORT)

# Includes tests/docs: the site builds with `mkdocs build --strict` and every answer the
# README and the site show is run.
# Two workers (pytest-xdist): the tests mostly wait on servers and subprocesses.
test: $(BIN)/.installed
	$(BIN)/python -m pytest -q -n 2

# With `make serve` running: post a drifting stream, then watch $(URL)/dashboard.
demo: $(BIN)/.installed
	$(BIN)/streamtree demo --url $(URL)

# The documentation site (mkdocs.yml, docs/) on http://127.0.0.1:$(DOCS_PORT), rebuilt on every change.
docs: $(BIN)/.installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:$(DOCS_PORT)

# Refresh the dashboard screenshot of the docs (the browser test; needs Debian's chromium).
dashboard-screenshot: $(BIN)/.installed
	STREAMTREE_SCREENSHOT=docs/images/dashboard.png $(BIN)/python -m pytest -q tests/app/dashboard/test_browser.py -k drifting

# MOA (Java, through CapyMOA) for bench/moa.py and bench/moa_speed.py, in its own venv: capymoa
# pins an older pandas than ours. Needs a Java runtime (Debian's default-jre-headless).
.venv-moa/bin/.installed:
	$(PYTHON) -m venv .venv-moa
	.venv-moa/bin/pip install --quiet "capymoa==0.15.*"
	touch $@

clean:
	rm -rf $(VENV) build *.egg-info site
