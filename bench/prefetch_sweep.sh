#!/usr/bin/env bash
# Prefetch depth against the automatic one, kernel only (flexsn-run --bench:
# CUDA events, median of 30, % of a device copy measured in the same
# process): per case the default launch, then each depth of DEPTHS
# (--prefetch=P), one after the other on the same machine state. Shows
# whether more steps of reads in flight lift a kernel (bench/NOTES.md,
# after run 80: lif's bf16 kernels at T=256 NCL=64K hold about 7.9 KB of
# reads in flight per SM).
# Usage: bench/prefetch_sweep.sh [dir-with-flexsn-run]
# CORES, DTYPES, VARIANTS, SHAPES (T_NCL words) and DEPTHS narrow the table.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/bench_lib.sh
BIN=${1:-build/bin}
DEPTHS=${DEPTHS:-4 12 16}
bench() {
  local out
  out=$(bench_run "$BIN/flexsn-run" examples/$1.mlir "${@:2}")
  printf "%4s%% %7s" "$(bench_pct "$out")" "$(bench_ms "$out")"
}
printf "%-17s %-4s %-11s %-18s | %-13s" core dtype variant shape default
for p in $DEPTHS; do printf " | %-13s" "prefetch=$p"; done
printf "\n"
row() {
  printf "%-17s %-4s %-11s T=%-3s NCL=%-8s | %s" "$1" "$2" "$3" "$4" "$5" \
    "$(bench "$1" "$3" "$4" "$5" "$2")"
  for p in $DEPTHS; do
    printf " | %s" "$(bench "$1" "$3" "$4" "$5" "$2" --prefetch=$p)"
  done
  printf "\n"
}
DEFAULT_SHAPES="256_65536 32_262144" each_case row
