#!/usr/bin/env bash
# Where the vector entry (4 neurons per thread) stops beating the scalar
# one: kernel-only time (flexsn-run --bench, % of a device copy) of the
# default build (the launch picks the entry) against a build with one
# neuron per thread (--neurons-per-thread=1: the scalar entry's code), per
# case alternating, at NCL from 128K to 1M with T*NCL = 8M.
# Usage: bench/entry_threshold.sh [dir-with-flexsn-run]
# CORES, DTYPES, VARIANTS and SHAPES (T_NCL words) narrow the table.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/bench_lib.sh
BIN=${1:-build/bin}
bench() {
  local out kind=vector
  out=$(bench_run "$BIN/flexsn-run" examples/$1.mlir "${@:2}")
  [[ $(bench_entry "$out") == *_scalar || $* == *--neurons-per-thread=1* ]] && kind=scalar
  printf "%4s%% %7s %-6s" "$(bench_pct "$out")" "$(bench_ms "$out")" "$kind"
}
printf "%-17s %-4s %-9s %-18s | %-22s | %s\n" core dtype variant shape default "1 neuron per thread"
for core in ${CORES:-lif two_in_two_state}; do
  for dt in ${DTYPES:-f32 bf16}; do
    for v in ${VARIANTS:-inference backward}; do
      for s in ${SHAPES:-64_131072 32_262144 16_524288 8_1048576}; do
        read -r T N <<<"${s/_/ }"
        printf "%-17s %-4s %-9s T=%-3s NCL=%-8s | %s | %s\n" $core $dt $v $T $N \
          "$(bench $core $v $T $N $dt)" "$(bench $core $v $T $N $dt --neurons-per-thread=1)"
      done
    done
  done
done
