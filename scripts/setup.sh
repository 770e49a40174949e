#!/usr/bin/env bash
# Installs what flexsn needs (Debian 12 packages: LLVM/MLIR 22, Ninja, zstd),
# then configures and builds into build/. Safe to run again: it installs
# only what is missing and rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

LLVM_PREFIX=/usr/lib/llvm-22
PKGS=(llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools ninja-build
      libzstd-dev cmake g++)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "== installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

BUILD_DIR=${FLEXSN_BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -G Ninja -S . -B "$BUILD_DIR" \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR="$LLVM_PREFIX/lib/cmake/mlir" \
    -DLLVM_EXTERNAL_LIT="$LLVM_PREFIX/bin/lit"
fi
JOBS=${FLEXSN_JOBS:-$(nproc)}
ninja -C "$BUILD_DIR" -j "$JOBS" ${FLEXSN_TARGETS:-all}
