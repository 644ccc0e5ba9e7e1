# PyTorch DDP image for GPU clusters (SLURM with pyxis/apptainer, Kubernetes PyTorchJob).
# CUDA and NCCL come with the torch wheel (PyPI's default torch build is the CUDA one); the base image
# gives the driver-facing CUDA user-space libraries and cuDNN. Versions match pyproject.toml's pins
# (tests/test_docker.py keeps them in step).
# Build from the repository root:  docker build -f docker/torch.Dockerfile -t rosetta/torch:2.13.0 .
FROM nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04

ARG PYTHON_VERSION=3.11
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1 \
    ROSETTA_IMAGE=rosetta/torch:2.13.0

# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends software-properties-common openmpi-bin iproute2 \
    && add-apt-repository -y ppa:deadsnakes/ppa \
    && apt-get install -y --no-install-recommends "python${PYTHON_VERSION}" "python${PYTHON_VERSION}-venv" \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/rosetta
RUN "python${PYTHON_VERSION}" -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH

# Dependencies first (a layer that survives source edits), then the harness itself.
COPY pyproject.toml README.md ./
RUN pip install "torch==2.13.0" "transformers==5.23.0" "scikit-learn==1.9.1" "numpy==1.26.4" "pyarrow==23.0.1"
COPY harness ./harness
COPY frameworks ./frameworks
COPY scenarios ./scenarios
COPY tools ./tools
RUN pip install -e ".[torch]"

CMD ["rosetta", "run"]
