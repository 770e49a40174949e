#!/usr/bin/env bash
# Kernel-only speed of each launch path (flexsn-run --bench, % of a device
# copy of the same bytes): the vector entry at T=4 NCL=4M, the scalar entry
# at NCL=4M+1 (not a multiple of 4 neurons per thread) and at T=256 NCL=64K
# (too few threads of 4 neurons), for lif and two_in_two_state, f32 and
# bf16, inference and backward. Each line names the entry the launch took.
# Usage: bench/entry_paths.sh [dir-with-flexsn-run]
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/bench_lib.sh
BIN=${1:-build/bin}
for core in lif two_in_two_state; do
  for dt in f32 bf16; do
    for v in inference backward; do
      for s in "4 4194304" "4 4194305" "256 65536"; do
        read -r T N <<<"$s"
        out=$(bench_run "$BIN/flexsn-run" examples/$core.mlir $v $T $N $dt)
        entry=$(bench_entry "$out")
        pct=$(bench_pct "$out")
        ms=$(bench_ms "$out")
        printf "%-17s %-4s %-9s T=%-3s NCL=%-8s %4s%% %8s ms  %s\n" \
          $core $dt $v $T $N "${pct:-?}" "${ms:-?}" "${entry:-$(tail -2 <<<"$out")}"
      done
    done
  done
done
