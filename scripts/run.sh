#!/usr/bin/env bash
# The main job: set up and build, then for every example neuron compile it
# (inference and training kernels) to PTX (and assemble it with ptxas when
# the CUDA toolkit is present) and run its inference and its BPTT backward on
# the CPU backend, checked against the reference interpreter and adjoint. With a GPU
# and CuPy/PyTorch present, the PTX also runs on the GPU (bench/gpu_ptx_check.py).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_DIR=${FLEXSN_BUILD_DIR:-build}
BIN="$BUILD_DIR/bin"
PTXAS=${CUDA_HOME:-/usr/local/cuda}/bin/ptxas
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
for f in examples/*.mlir; do
  name=$(basename "$f" .mlir)
  "$BIN/flexsn-translate" --flexsn-to-ptx --differentiate "$f" -o "$TMP/$name.ptx"
  ptx="PTX $(grep -c '^.visible .entry' "$TMP/$name.ptx") kernels"
  if [ -x "$PTXAS" ]; then
    regs=$("$PTXAS" -arch=sm_90 -v "$TMP/$name.ptx" -o "$TMP/$name.cubin" 2>&1 \
           | grep -o 'Used [0-9]* registers' | head -1)
    ptx="$ptx (ptxas sm_90: $regs)"
  fi
  check=$("$BIN/flexsn-run" "$f" --backend=cpu --T=64 --ncl=4099 --check | tail -1)
  grad=$("$BIN/flexsn-run" "$f" --backend=cpu --variant=backward --T=64 --ncl=4099 --check | tail -1)
  printf "%-18s %s\n    CPU T=64 NCL=4099 inference %s; backward %s\n" \
    "$name" "$ptx" "$check" "$grad"
done
if nvidia-smi -L >/dev/null 2>&1 && python3 -c "import cupy, torch" 2>/dev/null; then
  scripts/gen_gpu_bundle.sh "$BUILD_DIR" >/dev/null
  python3 bench/gpu_ptx_check.py | tail -12
else
  echo "No GPU here: ran on the CPU backend (the GPU path needs a GPU, CuPy and PyTorch)."
fi
