#!/usr/bin/env bash
# Session 18, run 155: the wheel after review (call_result helper; PerProcess refactor of
# the two worker pools after run 153): gpu_python.sh.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
start=$(date +%s)
OUT=$OUT timeout 420 bash scripts/gpu_python.sh > "$OUT/gpu_python.log" 2>&1
echo "gpu_python rc $? after $(( $(date +%s) - start )) s"
grep -E "passed|failed|ALL OK|first training|rror" "$OUT/gpu_python.log" | head -20
