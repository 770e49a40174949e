#!/usr/bin/env bash
# run 122: network.py, ours eager and under torch.compile, after the compile
# path stopped allocating zero initial states (run 119 had them).
set -uo pipefail
OUT=${OUT:-/tmp/out}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl .gpu/flexsn-*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
timeout 400 python3 -P bench/network.py --T 16,4 --systems flexsn,flexsn-compile \
  --out $OUT/net 2>&1 | grep -v "^W1\|warn" | tee $OUT/network.log
