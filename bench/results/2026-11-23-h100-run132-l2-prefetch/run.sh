#!/usr/bin/env bash
# L2 prefetch distance sweep (experimental FLEXSN_L2_AHEAD), kernel only
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/bench_lib.sh
xz -dc .gpu/flexsn-run.xz > /tmp/flexsn-run && chmod +x /tmp/flexsn-run
for a in 8 32; do for v in inference final_state backward forward; do FLEXSN_L2_AHEAD=$a /tmp/flexsn-run examples/two_in_two_state.mlir --backend=cuda --variant=$v --dtype=bf16 --T=200 --ncl=1000 --seed=1 --check 2>&1 | grep -E "check|entry|rror" | tr "\n" " "; echo; FLEXSN_L2_AHEAD=$a /tmp/flexsn-run examples/lif.mlir --backend=cuda --variant=$v --dtype=f32 --T=131 --ncl=4099 --seed=2 --check 2>&1 | grep -E "check|entry|rror" | tr "\n" " "; echo; done; done
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
AHEADS=${AHEADS:-0 16 32 64}
printf "%-17s %-4s %-11s %-16s" core dtype variant shape
for a in $AHEADS; do printf " | %-20s" "ahead=$a"; done; printf "\n"
for core in ${CORES:-lif two_in_two_state}; do
 for dt in ${DTYPES:-bf16 f32}; do
  [ $core = two_in_two_state ] && [ $dt = f32 ] && continue
  for v in ${VARIANTS:-inference final_state backward}; do
   for s in ${SHAPES:-256_65536 1024_16384 32_262144 4_4194304}; do
    read -r T N <<<"${s/_/ }"
    printf "%-17s %-4s %-11s T=%-4s N=%-8s" $core $dt $v $T $N
    for a in $AHEADS; do
      out=$(FLEXSN_L2_AHEAD=$a bench_run /tmp/flexsn-run examples/$core.mlir $v $T $N $dt)
      printf " | %3s%% %7s %-8s" "$(bench_pct "$out")" "$(bench_ms "$out")" "$(bench_entry "$out" | sed 's/.*_//')"
    done
    printf "\n"
   done
  done
 done
done
