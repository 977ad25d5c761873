#!/usr/bin/env bash
# The wheels a GPU machine without network needs beside its own PyTorch image
# (Python 3.12, torch with CUDA, numpy, pandas, scipy, matplotlib, psutil, rich,
# nvidia-ml-py, triton present; SQLAlchemy, pyperf and psycopg absent), for
# CPython 3.12 on manylinux x86-64, downloaded into .whl/ (git-ignored).
#
#   bash benchmarks/gpu_wheels.sh            # here, with network
#   pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
#       && export PYTHONPATH=/tmp/site:.    # there, before anything imports them
#
# The set is closed: every requirement of every wheel is a wheel here too
# (tests/unit/test_gpu_wheels.py resolves it offline with `pip install --dry-run
# --no-index`), so nothing there is missed when the installed versions differ.
set -euo pipefail
cd "$(dirname "$0")/.."
PACKAGES=(
    "SQLAlchemy==2.1.9"
    "typing_extensions==4.16.0"
    "pyperf==2.11.0"
    "psutil==7.1.3"
    "psycopg==3.3.9"
    "psycopg-binary==3.3.9"
)
rm -rf .whl && mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --abi cp312 --abi abi3 --abi none \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 --platform any \
    -d .whl "${PACKAGES[@]}"
ls .whl
