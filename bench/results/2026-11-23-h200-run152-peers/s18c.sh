#!/usr/bin/env bash
# Session 18, run 152: the slow-to-compile peers on this build's H200 table:
# SpikingJelly's FlexSN and torch.compile (whole loop; the step under
# torch.compile at T=256), both cores, eager and graph replay.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
start=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --upgrade --target /tmp/site .whl/*.whl .gpu/flexsn-*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi -L | tee "$OUT/device.txt"
for core in lif 2in2st; do
  left=$(( 575 - ($(date +%s) - start) ))
  [ $left -lt 30 ] && break
  [ $core = lif ] && lim=$(( left / 2 )) || lim=$left
  timeout $lim python3 -P bench/compare.py --cores $core \
    --systems sj-flexsn,torch-compile,torch-compile-step --graph \
    --skip 'torch-compile:*:256:*,torch-compile-step:*:4:*,torch-compile-step:*:32:*,sj-flexsn:*:256:*' \
    --out "$OUT/$core" 2>&1 | grep -v "^W\|Warning\|warn(" > "$OUT/$core.log"
  echo "$core rc $? after $(( $(date +%s) - start )) s"; tail -2 "$OUT/$core.log"
done
