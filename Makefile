# The two commands of the README: `make quickstart` (the main job) and `make test`.
# Both create the virtual environment .venv on first use (and again when pyproject.toml changes).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: quickstart test timing-test bench clean

# The build constraint: chainer's sdist builds only with setuptools < 81 (its setup.py imports pkg_resources).
# Horovod: built once from its sdist with our patch, cached in ~/.cache/rosetta/horovod/ (tools/install_horovod.py).
$(STAMP): pyproject.toml tools/build-constraints.txt tools/install_horovod.py tools/horovod-0.28.1.patch
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --build-constraint tools/build-constraints.txt \
		-e '.[torch,tf,chainer,dev,report]'
	$(BIN)/python -m pip install --quiet -e '.[nfs]' \
	  || echo "libnfs (the NFS client) did not build: apt-get install libnfs-dev; the nfs storage tests will skip" >&2
	$(BIN)/python tools/install_horovod.py
	touch $(STAMP)

quickstart: $(STAMP)
	$(BIN)/rosetta run

test: $(STAMP)
	$(BIN)/python -m pytest

# Tests whose verdict depends on timing real launches (the planted-slowdown gate): run them on a quiet machine.
timing-test: $(STAMP)
	ROSETTA_TIMING_TESTS=1 $(BIN)/python -m pytest tests/test_compare.py

bench: $(STAMP)
	$(BIN)/python benchmarks/overhead.py
	$(BIN)/python benchmarks/loader.py

clean:
	rm -rf $(VENV)
