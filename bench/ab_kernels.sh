#!/usr/bin/env bash
# Two builds of flexsn-run side by side, kernel only (flexsn-run --bench:
# CUDA events, median of 30 after warm-up, % of a device copy measured in
# the same process), alternating A and B per case so that both see the same
# machine state: lif and two_in_two_state, f32 and bf16, inference, forward
# and backward, at T=4 NCL=4M, T=4 NCL=4M+1 (scalar entry), T=32 NCL=256K
# and T=256 NCL=64K. Prints "% of copy" and ms for A, then B.
# Usage: bench/ab_kernels.sh A/flexsn-run B/flexsn-run [flexsn-run flags...]
# CORES, DTYPES, VARIANTS and SHAPES (T_NCL words) narrow the table; IR_A
# and IR_B, when set, are the .mlir files A and B run instead of
# examples/<core>.mlir (e.g. a core the tracer emitted before and after a
# change; CORES then only labels the rows).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/bench_lib.sh
A=$1; B=$2; shift 2
EXTRA=("$@")
bench() {
  local out ir=examples/$2.mlir
  [[ $1 == "$A" && -n ${IR_A:-} ]] && ir=$IR_A
  [[ $1 == "$B" && -n ${IR_B:-} ]] && ir=$IR_B
  out=$(bench_run "$1" "$ir" "${@:3}" "${EXTRA[@]}")
  printf "%4s%% %7s" "$(bench_pct "$out")" "$(bench_ms "$out")"
}
printf "%-17s %-4s %-9s %-18s | %-13s | %-13s\n" core dtype variant shape A B
for core in ${CORES:-lif two_in_two_state}; do
  for dt in ${DTYPES:-f32 bf16}; do
    for v in ${VARIANTS:-inference forward backward}; do
      for s in ${SHAPES:-4_4194304 4_4194305 32_262144 256_65536}; do
        read -r T N <<<"${s/_/ }"
        printf "%-17s %-4s %-9s T=%-3s NCL=%-8s | %s | %s\n" $core $dt $v $T $N \
          "$(bench "$A" $core $v $T $N $dt)" "$(bench "$B" $core $v $T $N $dt)"
      done
    done
  done
done
