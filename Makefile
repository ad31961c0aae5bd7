# The two commands the README starts with: `make serve` and `make test`.
# Both create the virtual environment in .venv on first use (and again when pyproject.toml changes).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATA_DIR ?= ./data
URL ?= http://127.0.0.1:8000

.PHONY: serve test demo dashboard-screenshot bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $@

serve: $(BIN)/.installed
	$(BIN)/streamtree serve --data-dir $(DATA_DIR)

test: $(BIN)/.installed
	$(BIN)/python -m pytest -q

# With `make serve` running: post a drifting stream, then watch $(URL)/dashboard.
demo: $(BIN)/.installed
	$(BIN)/streamtree demo --url $(URL)

# Refresh the README's dashboard screenshot (the browser test; needs Debian's chromium).
dashboard-screenshot: $(BIN)/.installed
	STREAMTREE_SCREENSHOT=docs/images/dashboard.png $(BIN)/python -m pytest -q tests/app/dashboard/test_browser.py -k drifting

clean:
	rm -rf $(VENV) build *.egg-info
