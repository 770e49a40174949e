#!/usr/bin/env bash
# run 146: 2467c7d (refill after the step) on the GPU: every CUDA RUN line
# and every checked CPU execution test with --backend=cuda, the fuzzer on
# the GPU (seed 7), then lif bf16 kernel-only cells at the issue's shapes
# with both copy references
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
mkdir -p build/bin
xz -dc .gpu/flexsn-run.xz > build/bin/flexsn-run; xz -dc .gpu/flexsn-fuzz.xz > build/bin/flexsn-fuzz; chmod +x build/bin/*
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
nvidia-smi -L
echo "== gpu_tests.sh"
time timeout 330 scripts/gpu_tests.sh > $OUT/gpu_tests.log 2>&1; echo rc=$?
grep -c "^ok" $OUT/gpu_tests.log; grep -v "^ok" $OUT/gpu_tests.log | tail -30
echo "== flexsn-fuzz --cuda"
time timeout 130 build/bin/flexsn-fuzz --count=120 --seed=7 --jobs=8 --cuda --out=$OUT/fuzz-failures > $OUT/fuzz.log 2>&1; echo rc=$?
tail -5 $OUT/fuzz.log
echo "== lif bf16 kernel only: % of big copy / % of same-size copy, ms"
source bench/bench_lib.sh
for v in inference final_state forward backward; do for s in "4 4194304" "32 262144" "256 65536"; do set -- $s
  out=$(bench_run build/bin/flexsn-run examples/lif.mlir $v $1 $2 bf16)
  echo "lif bf16 $v T=$1 NCL=$2: $(bench_pct "$out")% / $(bench_same "$out")% $(bench_ms "$out") ms"
done; done 2>&1 | tee $OUT/table.txt
