#!/usr/bin/env bash
# Session 19, run 156: where a training step's time goes (bench/step_timeline.py).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --upgrade --target /tmp/site .whl/*.whl .gpu/flexsn-*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi -L | tee "$OUT/device.txt"
for c in "2in2st 4 4194304 float32" "lif 4 4194304 float32" "lif 32 262144 float32" "2in2st 4 4194304 bfloat16" "2in2st 32 262144 float32"; do
  set -- $c
  python3 -P bench/step_timeline.py --core $1 --T $2 --N $3 --dtype $4 2>&1 | grep -v "^W\|warn" | tee -a "$OUT/timeline.log"
done
