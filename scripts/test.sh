#!/usr/bin/env bash
# Sets up, builds, and runs every test: the lit regression suite (compiler,
# tools, C API), the wheel's install check (scripts/wheel.sh builds it), a
# 300-core flexsn-fuzz smoke run (differential: kernels vs
# the reference interpreter and adjoint; --cuda too where a GPU is present)
# and the Python package's pytest suite (cpu backend here; the cuda backend
# too where a GPU is present).
set -euo pipefail
cd "$(dirname "$0")/.."
# PyTorch first: configuring the build looks for it (libFlexSNTorch.so).
scripts/python_deps.sh
scripts/setup.sh
BUILD_DIR=${FLEXSN_BUILD_DIR:-build}
ninja -C "$BUILD_DIR" check-flexsn
FUZZ_CUDA=""
if command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1; then
  FUZZ_CUDA="--cuda"
fi
"$BUILD_DIR"/bin/flexsn-fuzz --count=300 --seed=1 --jobs="$(nproc)" $FUZZ_CUDA \
  --out="$BUILD_DIR/fuzz-failures"
# The manylinux wheel, for the install check (tests/test_wheel.py).
export FLEXSN_TEST_WHEEL=${FLEXSN_TEST_WHEEL:-$(scripts/wheel.sh "$BUILD_DIR/dist" | tail -1)}
# The wheel a plain `pip wheel .` builds (pip's build isolation: no torch
# there, so no operators inside; they are built on first use).
rm -rf "$BUILD_DIR/dist/plain"
${PYTHON:-python3} -m pip wheel -q --no-deps . -w "$BUILD_DIR/dist/plain" >&2
export FLEXSN_TEST_PLAIN_WHEEL=$(realpath "$BUILD_DIR"/dist/plain/flexsn-*.whl)
export FLEXSN_LIBRARY=${FLEXSN_LIBRARY:-$PWD/$BUILD_DIR/lib/libFlexSN.so}
cd python-bindings
${PYTHON:-python3} -c 'import flexsn; print("== pytest, call path", flexsn.call_path())'
${PYTHON:-python3} -m pytest -q -p no:cacheprovider tests
