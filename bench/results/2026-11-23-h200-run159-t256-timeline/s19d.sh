#!/usr/bin/env bash
# Session 19, run 159: why 2in2st's eager training step at T=256 is 92-137 us
# over its replay (lif's: 19-45): step timelines at T=256 (and T=32).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --upgrade --target /tmp/site .whl/*.whl .gpu/flexsn-*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi -L | tee "$OUT/device.txt"
for c in "2in2st 256 65536 float32" "2in2st 256 65536 bfloat16" "lif 256 65536 float32" "2in2st 32 262144 bfloat16" "lif 32 262144 bfloat16"; do
  set -- $c
  python3 -P bench/step_timeline.py --core $1 --T $2 --N $3 --dtype $4 2>&1 | grep -v "^W\|warn" | tee -a "$OUT/timeline.log"
done
