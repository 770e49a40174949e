#!/usr/bin/env bash
# Session 18, run 150: the per-kernel CPU JIT and lazily bound training
# pairs (wheel of this session), the GPU suite through gpu_python.sh, then
# the overhead layers and first call of the 300-op core on CUDA.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
start=$(date +%s)
OUT=$OUT timeout 420 bash scripts/gpu_python.sh > "$OUT/gpu_python.log" 2>&1
echo "gpu_python rc $? after $(( $(date +%s) - start )) s"
export PYTHONPATH=/tmp/site
echo "== overhead layers (native)"
timeout 60 python3 -P bench/overhead.py cuda --layers 2>&1 | tee "$OUT/layers.log"
echo "== overhead layers (ctypes)"
FLEXSN_NATIVE=0 timeout 60 python3 -P bench/overhead.py cuda --layers 2>&1 | tee "$OUT/layers-ctypes.log"
echo "== first call, 300-op core"
timeout 90 python3 bench/first_call.py cuda --ops=300 2>&1 | tee "$OUT/first_call_300.log"
echo "done after $(( $(date +%s) - start )) s"
