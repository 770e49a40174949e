#!/usr/bin/env bash
# Sets up, builds, and runs every test: the lit regression suite (compiler,
# tools, C API) and the Python package's pytest suite (cpu backend here; the
# cuda backend too where a GPU is present).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/python_deps.sh
BUILD_DIR=${FLEXSN_BUILD_DIR:-build}
ninja -C "$BUILD_DIR" check-flexsn
export FLEXSN_LIBRARY=${FLEXSN_LIBRARY:-$PWD/$BUILD_DIR/lib/libFlexSN.so}
cd python-bindings
${PYTHON:-python3} -m pytest -q -p no:cacheprovider tests
