#!/usr/bin/env bash
# Session 18, run 153: the wheel with one compile thread pool for every
# program (PTX of kernel entries compiled on it) and the shared CPU JIT:
# gpu_python.sh, then first calls with both caches filled by the cold
# process (first_call.py's new warm row), tutorial and the 300-op core.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
start=$(date +%s)
OUT=$OUT timeout 420 bash scripts/gpu_python.sh > "$OUT/gpu_python.log" 2>&1
echo "gpu_python rc $? after $(( $(date +%s) - start )) s"
grep -E "passed|failed|ALL OK|first training|error" "$OUT/gpu_python.log" | head -20
export PYTHONPATH=/tmp/site
echo "== first call, 300-op core"
timeout 90 python3 bench/first_call.py cuda --ops=300 2>&1 | tee "$OUT/first_call_300.log"
python3 -c 'import os; print("threads after import", len(os.listdir("/proc/self/task")))'
echo "done after $(( $(date +%s) - start )) s"
