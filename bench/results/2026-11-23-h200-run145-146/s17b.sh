#!/usr/bin/env bash
# run 145: depth sweep on HEAD 2467c7d (refill after the step), H200
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
mkdir -p /tmp/a && xz -dc .gpu/flexsn-run.xz > /tmp/a/flexsn-run && chmod +x /tmp/a/flexsn-run
{
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
echo "== bf16, issue's T=256 and T=32 shapes"
CORES="lif two_in_two_state" DTYPES=bf16 VARIANTS="inference final_state forward backward" SHAPES="256_65536 32_262144" DEPTHS="8 16 24 32" timeout 330 bench/prefetch_sweep.sh /tmp/a
echo "== long T"
CORES=lif DTYPES="f32 bf16" VARIANTS="inference backward" SHAPES="1024_16384" DEPTHS="8 16 24 32" timeout 100 bench/prefetch_sweep.sh /tmp/a
echo "== entries taken"
for v in inference forward backward; do for s in "256 65536" "32 262144" "1024 16384"; do set -- $s
 echo "$v T=$1 NCL=$2: $(/tmp/a/flexsn-run examples/lif.mlir --backend=cuda --variant=$v --T=$1 --ncl=$2 --dtype=bf16 --bench --reps=3 2>&1 | grep '^bench: entry')"
done; done
} 2>&1 | tee $OUT/run145-sweep.txt
