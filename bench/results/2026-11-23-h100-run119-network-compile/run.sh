#!/usr/bin/env bash
# run 119: network.py, our neurons under torch.compile (flexsn-compile) next to
# ours eager and torch.compile's own loop, T=16 then T=4.
set -uo pipefail
OUT=${OUT:-/tmp/out}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl .gpu/flexsn-*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
timeout 560 python3 -P bench/network.py --T 16,4 --systems flexsn,flexsn-compile,torch-compile \
  --out $OUT/net 2>&1 | grep -v "^W1\|warn" | tee $OUT/network.log
