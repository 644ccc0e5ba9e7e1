# The two commands of the README: `make quickstart` (the main job) and `make test`.
# Both create the virtual environment .venv on first use (and again when pyproject.toml changes).

PYTHON ?= python3
VENV ?= .venv
# MPI: "wheel" (default) installs Open MPI from the package index into the environment; "system" uses
# the MPI whose mpicc/mpirun come first on PATH (a cluster's own, built for its fabric).
ROSETTA_MPI ?= wheel
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
ENGINES_STAMP := $(VENV)/.installed-engines

.PHONY: quickstart envs test test-unit timing-test bench bench-dlio bench-changepoints clean

# The build constraint: chainer's sdist builds only with setuptools < 81 (its setup.py imports pkg_resources).
# Horovod: built once from its sdist with our patch, cached in ~/.cache/rosetta/horovod/ (tools/install_horovod.py).
comma := ,
EXTRAS := torch,tf,chainer,build,dev,report$(if $(filter wheel,$(ROSETTA_MPI)),$(comma)mpi)

# The packages go in with uv where it can (tools/install_packages.py: pip's index settings passed on; pip
# where uv cannot): 24 s with uv's cache warm, 30 s cold, against pip's 70 s on 2 cores.
$(STAMP): pyproject.toml tools/build-constraints.txt tools/install_packages.py tools/install_horovod.py \
		tools/horovod-0.28.1.patch
	@case "$(ROSETTA_MPI)" in wheel|system) ;; *) echo "ROSETTA_MPI must be wheel or system, got '$(ROSETTA_MPI)'" >&2; exit 2;; esac
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet uv==0.13.9 || echo "uv did not install: pip installs the packages instead" >&2
	$(BIN)/python tools/install_packages.py --quiet --build-constraint tools/build-constraints.txt \
		-e '.[$(EXTRAS)]'
	$(BIN)/python -m pip install --quiet -e '.[nfs]' 2>/dev/null \
	  || echo "libnfs (the NFS client) did not build: apt-get install libnfs-dev; the nfs storage tests will skip" >&2
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python tools/install_horovod.py
	touch $(STAMP)

# The framework families that cannot share .venv (JAX: NumPy 2), each its own environment from its pins
# (tools/envs/<name>.txt), made once with uv into ~/.cache/rosetta/envs/<name>-<key of the pins>/; a made one is
# found at once (tools/make_env.py). A family whose environment did not make has its runs skipped, saying why.
envs: $(STAMP)
	$(BIN)/python tools/make_env.py || echo "an environment did not make: its framework's runs will be skipped" >&2

quickstart: $(STAMP) envs
	$(BIN)/rosetta run

# The tests' extra packages that the quickstart does not need (Ray, MLflow, the Azure ML SDK: pyproject's
# `engines`), installed the same way, once per change of pyproject.toml.
$(ENGINES_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python tools/install_packages.py --quiet --build-constraint tools/build-constraints.txt -e '.[engines]'
	touch $(ENGINES_STAMP)

# As root, the tests' servers are installed first (tools/install_test_servers.sh); then the NFS client
# binding, which builds only once libnfs-dev is there. The tests run in TEST_WORKERS processes (pytest-xdist):
# two keep a 2-core machine busy while a test waits on a server, a sleep or a one-rank start-up.
TEST_WORKERS ?= 2
test: $(STAMP) $(ENGINES_STAMP) envs
	tools/install_test_servers.sh
	@$(BIN)/python -c "import libnfs" 2>/dev/null || $(BIN)/python -m pip install --quiet -e '.[nfs]' 2>/dev/null \
	  || echo "libnfs (the NFS client) did not build: apt-get install libnfs-dev; the nfs storage tests will skip" >&2
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

# The fast layer a developer runs before every commit: tests/unit/ less the tests marked runs (none of them starts
# a process; tests/unit/conftest.py refuses one), a few minutes on 2 cores. `make test` runs every layer.
test-unit: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) -m "not runs" -q tests/unit tests/conformance

# Tests whose verdict depends on timing real launches (the planted-slowdown gate): run them on a quiet machine.
timing-test: $(STAMP)
	ROSETTA_TIMING_TESTS=1 $(BIN)/python -m pytest tests/unit/gate/test_compare.py

bench: $(STAMP)
	$(BIN)/python benchmarks/overhead.py
	$(BIN)/python benchmarks/loader.py

# DLIO (MLPerf Storage's tool) beside Rosetta on the same JPEGs; DLIO installs without its declared
# dependencies (NVIDIA DALI is not installable here), its real ones come with the bench extra.
bench-dlio: $(STAMP)
	$(BIN)/python tools/install_packages.py --quiet -e '.[bench]'
	$(BIN)/python -m pip install --quiet --no-deps dlio-benchmark==2.0.0
	$(BIN)/python benchmarks/dlio_side_by_side.py

# The change-point benchmark runs Apache Otava beside our detector. Otava 0.8.0 declares numpy==2.2 (Chainer
# needs NumPy < 2) and clients for its data sources; its analysis needs only NumPy and SciPy, so it goes in
# without its declared dependencies (no extra in pyproject.toml could say that).
bench-changepoints: $(STAMP)
	$(BIN)/python -m pip install --quiet --no-deps apache-otava==0.8.0
	$(BIN)/python benchmarks/changepoints.py

clean:
	rm -rf $(VENV)
