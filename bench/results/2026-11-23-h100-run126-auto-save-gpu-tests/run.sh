#!/usr/bin/env bash
# run 126: the compiler's auto saving policy on the GPU: every checked RUN
# line (scripts/gpu_tests.sh: CUDA examples, and the CPU/Autodiff checks
# with --backend=cuda, including policy.mlir's auto and final-pair lines),
# then flexsn-fuzz --cuda --save-ops=auto (300 cores, the final-state pair
# where built).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build/bin
for t in flexsn-fuzz flexsn-run; do
  xz -dc ".gpu/$t.xz" > "build/bin/$t" && chmod +x "build/bin/$t" || exit 1
done
nvidia-smi -L | tee "$OUT/device.txt"
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
bash scripts/gpu_tests.sh build/bin > "$OUT/gpu_tests.log" 2>&1
grep -E "final|auto|FAIL|GPU tests" "$OUT/gpu_tests.log" | head -30
JOBS=$(( $(nproc) / 2 ))
echo "== flexsn-fuzz --cuda --save-ops=auto (300 cores, $JOBS workers)"
build/bin/flexsn-fuzz --count=300 --seed=1 --jobs="$JOBS" --cuda --save-ops=auto \
  --out="$OUT/fuzz-failures" 2>&1 | tee "$OUT/fuzz-cuda-auto.log" | tail -3
cd $OUT && tar czf /tmp/all.tgz . && find . -mindepth 1 -delete && mv /tmp/all.tgz . && ls -la
