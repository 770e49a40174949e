#!/usr/bin/env bash
# run 135: the gated l2-prefetch (current HEAD), its cuda checks, A/B at the
# gate's two sides, and a build whose gate is 1024 threads per SM at 512_32768
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
mkdir -p /tmp/a /tmp/b
xz -dc .gpu/flexsn-run.xz > /tmp/a/flexsn-run; xz -dc .gpu/flexsn-run-on.xz > /tmp/b/flexsn-run; chmod +x /tmp/a/flexsn-run /tmp/b/flexsn-run
{
nvidia-smi --query-gpu=name,clocks.max.sm,multiprocessor_count --format=csv,noheader 2>/dev/null || nvidia-smi -L
echo "== checks"
ONLY=test/Integration/CUDA/l2-prefetch.mlir timeout 90 scripts/gpu_tests.sh /tmp/a 2>&1 | tail -12
echo "== A/B, gate at 128 threads per SM"
SHAPES="1024_16384 256_65536" timeout 320 bench/l2_ab.sh /tmp/a
echo "== A/B, gate at 1024 (always on at these shapes)"
SHAPES="512_32768" VARIANTS="inference backward" timeout 140 bench/l2_ab.sh /tmp/b
} 2>&1 | tee $OUT/run135.txt
