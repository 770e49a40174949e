#!/usr/bin/env bash
# run 140: flexsn-bounded-reciprocal and the sigmoid surrogate's new form,
# A = HEAD before (d3f35e6), B = 0d501b6; kernel only, alternating A B per case
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
mkdir -p /tmp/a /tmp/b
xz -dc .gpu/flexsn-run-old.xz > /tmp/a/flexsn-run; xz -dc .gpu/flexsn-run.xz > /tmp/b/flexsn-run; chmod +x /tmp/a/flexsn-run /tmp/b/flexsn-run
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
{
nvidia-smi --query-gpu=name,clocks.max.sm,multiprocessor_count --format=csv,noheader 2>/dev/null || nvidia-smi -L
echo "== lif backward (sigmoid surrogate), pass 1"
CORES=lif VARIANTS="backward" SHAPES="4_4194304 4_4194305 32_262144 256_65536 1024_16384" timeout 200 bench/ab_kernels.sh /tmp/a/flexsn-run /tmp/b/flexsn-run
echo "== traced tutorial core (torch.sigmoid, atan surrogates): forward, backward"
IR_A=.gpu/tutorial_traced.mlir IR_B=.gpu/tutorial_traced.mlir CORES=tutorial_traced VARIANTS="forward backward" SHAPES="4_4194304 32_262144 256_65536 1024_16384" timeout 200 bench/ab_kernels.sh /tmp/a/flexsn-run /tmp/b/flexsn-run
echo "== lif backward, pass 2; lif inference (unchanged code, control)"
CORES=lif VARIANTS="backward inference" SHAPES="32_262144 256_65536 1024_16384" timeout 150 bench/ab_kernels.sh /tmp/a/flexsn-run /tmp/b/flexsn-run
} 2>&1 | tee $OUT/run140.txt
