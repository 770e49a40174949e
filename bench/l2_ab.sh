#!/usr/bin/env bash
# The L2 prefetch of the one-neuron-per-thread entries, kernel only
# (flexsn-run --bench: CUDA events, median of 30, % of a device copy
# measured in the same process): per case --l2-prefetch=0 (A, the default)
# and --l2-prefetch=$L2 (B, default 32 steps), alternating A B A B on the
# same machine state. Only launches of at most 128 threads per SM prefetch
# (NCL <= 128 x %nsmid); a build with a larger kL2PrefetchMaxThreadsPerSM
# shows what the gate leaves out.
# Usage: [L2=32] bench/l2_ab.sh [dir-with-flexsn-run]
# CORES, DTYPES, VARIANTS and SHAPES (T_NCL words) narrow the table.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/bench_lib.sh
BIN=${1:-build/bin}
L2=${L2:-32}
one() {
  local out
  out=$(bench_run "$BIN/flexsn-run" examples/$1.mlir "${@:2}")
  printf "%3s%% %7s" "$(bench_pct "$out")" "$(bench_ms "$out")"
}
printf "%-17s %-4s %-11s %-17s | %-12s | %-12s | %-12s | %-12s\n" core dtype \
  variant shape "A l2=0" "B l2=$L2" "A l2=0" "B l2=$L2"
row() {
  printf "%-17s %-4s %-11s T=%-4s NCL=%-6s" "$1" "$2" "$3" "$4" "$5"
  for r in 1 2; do
    printf " | %s" "$(one "$1" "$3" "$4" "$5" "$2" --l2-prefetch=0)"
    printf " | %s" "$(one "$1" "$3" "$4" "$5" "$2" --l2-prefetch=$L2)"
  done
  printf "\n"
}
SKIP_2IN2ST_F32=1 DEFAULT_SHAPES="1024_16384 2048_8192 256_65536" each_case row
