# The two commands of the README: `make quickstart` (the main job) and `make test`.
# Both create the virtual environment .venv on first use (and again when pyproject.toml changes).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: quickstart test bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[torch,dev,report]'
	touch $(STAMP)

quickstart: $(STAMP)
	$(BIN)/rosetta run

test: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/overhead.py

clean:
	rm -rf $(VENV)
