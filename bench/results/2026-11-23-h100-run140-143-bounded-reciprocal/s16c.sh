#!/usr/bin/env bash
# run 142: HEAD (bounded reciprocal, invariant reads, refill first): every
# CUDA RUN line and every checked CPU execution test with --backend=cuda,
# then the fuzzer on the GPU
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
mkdir -p build/bin
xz -dc .gpu/flexsn-run.xz > build/bin/flexsn-run; xz -dc .gpu/flexsn-fuzz.xz > build/bin/flexsn-fuzz; chmod +x build/bin/*
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
nvidia-smi -L
echo "== gpu_tests.sh"
time timeout 330 scripts/gpu_tests.sh > $OUT/gpu_tests.log 2>&1; echo rc=$?
grep -v "^ok" $OUT/gpu_tests.log | tail -30
echo "== flexsn-fuzz --cuda"
time timeout 200 build/bin/flexsn-fuzz --count=200 --seed=6 --jobs=8 --cuda --out=$OUT/fuzz-failures > $OUT/fuzz.log 2>&1; echo rc=$?
tail -5 $OUT/fuzz.log
