#!/usr/bin/env bash
# run 143: the wheel of a0b4377 through gpu_python.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
timeout 400 bash scripts/gpu_python.sh > $OUT/gpu_python.txt 2>&1; echo rc=$?
grep -E "ALL OK|passed|failed|error|Error|first training|flexsn \(cuda\)|train step|inference  " $OUT/gpu_python.txt | head -40
