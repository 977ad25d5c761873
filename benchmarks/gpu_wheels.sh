#!/usr/bin/env bash
# The wheels a GPU machine without network needs beside its own PyTorch image
# (Python 3.12, torch with CUDA, numpy, pandas, scipy, matplotlib, psutil, rich,
# nvidia-ml-py, triton present; SQLAlchemy, pyperf and psycopg absent), for
# CPython 3.12 on manylinux x86-64, downloaded into .whl/ (git-ignored): benchbench's
# requirements, and the models extra's (transformers and what it needs) for the zoo
# rows of benchmarks/gpu_acceptance2.py. benchbench itself runs from the checkout
# (PYTHONPATH), as do the acceptance scripts.
#
#   bash benchmarks/gpu_wheels.sh            # here, with network
#   pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
#       && export PYTHONPATH=/tmp/site:.    # there, before anything imports them
#
# The set is closed: every requirement of every wheel is a wheel here too, but numpy
# and rich, which the image holds and the set must not shadow (its pandas, scipy and
# matplotlib are built against its numpy); tests/unit/test_gpu_wheels.py checks that
# from the wheels' metadata and, once .whl/ exists, installs the set offline with
# `pip install --dry-run --no-index`. 37 MB: the device tool carries up to 64 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
PACKAGES=(
    "SQLAlchemy==2.1.9"
    "typing_extensions==4.16.0"
    "pyperf==2.11.0"
    "psutil==7.1.3"
    "psycopg==3.3.9"
    "psycopg-binary==3.3.9"
    # the models extra: transformers and its requirements
    "transformers==5.24.0"
    "huggingface-hub==2.4.0"
    "tokenizers==0.23.3"
    "safetensors==0.8.0"
    "hf-xet==1.8.0"
    "regex==2026.11.19"
    "pyyaml==6.0.4"
    "tqdm==4.70.1"
    "filelock==4.3.1"
    "fsspec==2026.9.0"
    "packaging==26.4"
    "httpx2==2.16.2"
    "httpcore2==2.16.2"
    "h11==0.16.0"
    "anyio==4.16.0"
    "idna==3.20"
    "truststore==0.10.5"
    "typer==0.29.2"
    "click==8.5.1"
    "shellingham==1.5.4"
    "annotated-doc==0.0.7"
    "pydantic==2.14.4"
    "pydantic-core==2.50.5"
    "annotated-types==0.8.0"
    "typing-inspection==0.4.5"
)
rm -rf .whl && mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --abi cp312 --abi abi3 --abi none \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 --platform any \
    -d .whl "${PACKAGES[@]}"
ls .whl
