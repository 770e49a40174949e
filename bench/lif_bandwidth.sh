#!/usr/bin/env bash
# LIF inference and backward bandwidth on the GPU, measured by flexsn-run
# --bench with our CUDA runtime: kernel time (CUDA events, median of 50
# after warm-up), bytes moved, the floor (bytes / copy bandwidth) and % of a
# 2 x 1 GiB device-to-device copy measured in the same process.
# Usage: bench/lif_bandwidth.sh [dir-with-flexsn-run]   (default build/bin)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build/bin}
for v in inference backward; do
  for s in "8 16777216" "4 4194304" "256 65536"; do
    set -- $s
    echo "== lif $v T=$1 NCL=$2"
    "$BIN/flexsn-run" examples/lif.mlir --backend=cuda --variant=$v \
      --T=$1 --ncl=$2 --bench --reps=50 | grep bench
  done
done
