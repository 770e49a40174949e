#!/usr/bin/env bash
# run 121: the missing row: SpikingJelly's FlexSN at 2in2st T=32 NCL=256K,
# beside ours, eager and replayed (8 calls a graph).
set -uo pipefail
OUT=${OUT:-/tmp/out}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl .gpu/flexsn-*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
timeout 540 python3 -P bench/compare.py --cores 2in2st --shapes 32x262144 \
  --systems flexsn,sj-flexsn --graph --graph-calls 8 --out $OUT/cmp 2>&1 | grep -v "^W1\|warn" | tail -30
python3 -P bench/compare.py --report $OUT/cmp > /dev/null 2>&1; rm -f $OUT/cmp/*.png
