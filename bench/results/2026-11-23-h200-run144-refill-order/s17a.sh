#!/usr/bin/env bash
# run 144: A = HEAD (refill first), B = refill after the step (invariant
# reads kept); kernel only, A B alternating; then the call breakdown.
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
mkdir -p /tmp/a /tmp/b
xz -dc .gpu/flexsn-run.xz > /tmp/a/flexsn-run; xz -dc .gpu/flexsn-run-b.xz > /tmp/b/flexsn-run; chmod +x /tmp/a/flexsn-run /tmp/b/flexsn-run
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
{
nvidia-smi --query-gpu=name,clocks.max.sm,multiprocessor_count --format=csv,noheader
echo "== lif, pass 1"
CORES=lif VARIANTS="backward forward" SHAPES="1024_16384 256_65536 32_262144 4_4194304" timeout 170 bench/ab_kernels.sh /tmp/a/flexsn-run /tmp/b/flexsn-run
echo "== traced tutorial"
IR_A=.gpu/tutorial_traced.mlir IR_B=.gpu/tutorial_traced.mlir CORES=tutorial_traced VARIANTS="forward backward" SHAPES="1024_16384 256_65536" timeout 120 bench/ab_kernels.sh /tmp/a/flexsn-run /tmp/b/flexsn-run
echo "== lif, pass 2 (long T)"
CORES=lif VARIANTS="backward inference" SHAPES="1024_16384 256_65536" timeout 80 bench/ab_kernels.sh /tmp/a/flexsn-run /tmp/b/flexsn-run
echo "== depth sweep, HEAD, lif backward T=1024 NCL=16K"
for p in 4 8 12 16; do for dt in f32 bf16; do
  echo "prefetch=$p $dt: $(/tmp/a/flexsn-run examples/lif.mlir --backend=cuda --variant=backward --T=1024 --ncl=16384 --dtype=$dt --bench --reps=30 --prefetch=$p 2>&1 | grep 'kernel median' | head -1)"
done; done
} 2>&1 | tee $OUT/run144-ab.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .gpu/flexsn-*.whl
PYTHONPATH=/tmp/site timeout 150 python3 -P .gpu/s17_calls.py 2>&1 | tee $OUT/run144-calls.txt | head -40
