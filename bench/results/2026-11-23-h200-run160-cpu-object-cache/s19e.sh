#!/usr/bin/env bash
# Session 19, run 160: the wheel with the CPU object cache (C API v3):
# scripts/gpu_python.sh, then the CPU first call cold and warm on this host.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
timeout 420 bash scripts/gpu_python.sh 2>&1 | tail -30
export PYTHONPATH=/tmp/site
for i in 1 2; do python3 -P bench/first_call.py cpu; done 2>&1 | tee "$OUT/first_call_cpu.log"
