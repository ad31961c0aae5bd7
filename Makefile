# The two commands the README starts with: `make serve` and `make test`.
# Both create the virtual environment in .venv on first use (and again when pyproject.toml changes).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATA_DIR ?= ./data

.PHONY: serve test bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $@

serve: $(BIN)/.installed
	$(BIN)/streamtree serve --data-dir $(DATA_DIR)

test: $(BIN)/.installed
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) build *.egg-info
