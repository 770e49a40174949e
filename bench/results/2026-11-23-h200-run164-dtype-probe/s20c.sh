#!/usr/bin/env bash
# Session 20, run 164: why our bf16 eager calls took longer than f32 ones in
# runs 162-163 (replays did not): per-rep distributions and a profile.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --upgrade --target /tmp/site .whl/*.whl .gpu/flexsn-*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi -L | tee "$OUT/device.txt"
timeout 300 python3 -P .gpu/dtprobe.py 2>&1 | grep -v "^W\|Warning\|warn(" > "$OUT/probe.txt"
cat "$OUT/probe.txt"
