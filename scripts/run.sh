#!/usr/bin/env bash
# The main job: set up and build, then compile SpikingJelly's tutorial
# neuron (two inputs, two states, two outputs) written in PyTorch through
# the flexsn package and run it forward and backward, checked against the
# same core as a Python loop, with timings: on the GPU when there is one,
# else on the cpu backend (JIT kernels). Then, for every example neuron of
# the dialect, PTX (assembled by ptxas when the CUDA toolkit is present)
# and a CPU run checked against the reference interpreter and adjoint.
set -euo pipefail
cd "$(dirname "$0")/.."
# PyTorch first: configuring the build looks for it (libFlexSNTorch.so).
scripts/python_deps.sh
scripts/setup.sh
BUILD_DIR=${FLEXSN_BUILD_DIR:-build}
BIN="$BUILD_DIR/bin"
export FLEXSN_LIBRARY=${FLEXSN_LIBRARY:-$PWD/$BUILD_DIR/lib/libFlexSN.so}
PYTHONPATH=python-bindings${PYTHONPATH:+:$PYTHONPATH} \
  ${PYTHON:-python3} examples/python/tutorial_neuron.py
echo
echo "== example neurons in the dialect (flexsn-translate, flexsn-run)"
PTXAS=${CUDA_HOME:-/usr/local/cuda}/bin/ptxas
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
for f in examples/*.mlir; do
  name=$(basename "$f" .mlir)
  "$BIN/flexsn-translate" --flexsn-to-ptx --options='differentiate' "$f" -o "$TMP/$name.ptx"
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
