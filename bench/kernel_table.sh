#!/usr/bin/env bash
# The kernel-only table of issue 12: flexsn-run --bench (CUDA events, median
# of 30 after warm-up) for lif and two_in_two_state, f32 and bf16 storage,
# every variant, at T=8 NCL=16M, T=4 NCL=4M, T=32 NCL=256K and T=256
# NCL=64K. Each cell: % of the bandwidth of a 2 x 1 GiB device-to-device
# copy measured in the same process / % of a copy of the kernel's own bytes
# (its time over the kernel's; same launch and ramp-up costs), then the
# kernel's median. CORES="lif" (say) limits the cores.
# Extra flexsn-run flags (e.g. --prefetch=1 for the loop without
# pipelining) follow the directory.
# Usage: bench/kernel_table.sh [dir-with-flexsn-run] [flexsn-run flags...]
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/bench_lib.sh
BIN=${1:-build/bin}
shift || true
EXTRA=("$@")
printf "%-18s %-5s %-12s" kernel dtype variant
for s in "T=8 NCL=16M" "T=4 NCL=4M" "T=32 NCL=256K" "T=256 NCL=64K"; do printf " | %-19s" "$s"; done
echo
for core in ${CORES:-lif two_in_two_state}; do
  for dt in f32 bf16; do
    for v in inference final_state forward backward; do
      printf "%-18s %-5s %-12s" $core $dt $v
      for s in "8 16777216" "4 4194304" "32 262144" "256 65536"; do
        read -r T N <<<"$s"
        out=$(bench_run "$BIN/flexsn-run" examples/$core.mlir $v $T $N $dt "${EXTRA[@]}")
        pct=$(bench_pct "$out")
        same=$(bench_same "$out")
        ms=$(bench_ms "$out")
        printf " | %4s%%/%3s%% %7s ms" "${pct:-?}" "${same:-?}" "${ms:-?}"
      done
      echo
    done
  done
done
