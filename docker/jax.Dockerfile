# JAX image (jax) for clusters: mpirun across nodes. CPU only: the jax family's environment has no CUDA plugin yet.
# Its own pins, not pyproject.toml's: tools/envs/jax.txt (JAX 0.10 needs NumPy 2; tests/unit/tools/test_docker.py
# keeps them in step). The harness is on PYTHONPATH, not installed: its pyproject pins NumPy 1.26 for Chainer.
# Build from the repository root:  docker build -f docker/jax.Dockerfile -t rosetta/jax:0.10.2 .
# BASE_IMAGE: tools/container_images.py builds it from a local Debian 12 base (no registry).
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}

ENV DEBIAN_FRONTEND=noninteractive \
    PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONPATH=/opt/rosetta \
    ROSETTA_IMAGE=rosetta/jax:0.10.2

# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends openmpi-bin iproute2 \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/rosetta
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH

RUN pip install "jax==0.10.2" "jaxlib==0.10.2" "flax==0.12.8" "optax==0.2.8" "numpy==2.4.6" "psutil==7.2.2" \
    "nvidia-ml-py==13.615.71"
COPY harness ./harness
COPY frameworks ./frameworks
COPY scenarios ./scenarios
COPY tools ./tools

CMD ["python", "-m", "harness.contract.worker"]
