#!/usr/bin/env bash
# run 120: the session's final wheel (keeper node, compile path without zero
# states) through gpu_python.sh; then compare.py --graph --graph-calls 8 at
# 2in2st T=4 NCL=4M (ours, torch.compile, SpikingJelly's FlexSN).
set -uo pipefail
OUT=${OUT:-/tmp/out}
bash scripts/gpu_python.sh > $OUT/gpu_python.txt 2>&1
grep -E "ALL OK|passed|failed|error|first training|flexsn \(cuda\)|train step|inference  " $OUT/gpu_python.txt | head -40
export PYTHONPATH=/tmp/site FLEXSN_TEST_INSTALLED=1 PYTHONUNBUFFERED=1
timeout 300 python3 -P bench/compare.py --cores 2in2st --shapes 4x4194304 \
  --systems flexsn,torch-compile,sj-flexsn --graph --graph-calls 8 --out $OUT/cmp 2>&1 | grep -v "^W1\|warn" | tail -30
python3 -P bench/compare.py --report $OUT/cmp > /dev/null 2>&1; rm -f $OUT/cmp/*.png
cd $OUT && tar czf /tmp/all.tgz . && find . -mindepth 1 -delete && mv /tmp/all.tgz . && ls -la
