#!/usr/bin/env bash
# run 118: A/B of the keeper-tensor node's per-call cost (old wheel = run
# 116's, new = run 117's), then bench/network.py at T=4 and T=16.
set -uo pipefail
OUT=${OUT:-/tmp/out}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/siteB .whl/*.whl .gpu/flexsn-*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/siteA .whl/*.whl .gpu/old/flexsn-*.whl || exit 1
export PYTHONUNBUFFERED=1
for r in 1 2 3 4; do
  for s in A B; do TAG=$s PYTHONPATH=/tmp/site$s python3 -P .gpu/ab_keeper.py; done
done 2>&1 | tee $OUT/ab_keeper.log
export PYTHONPATH=/tmp/siteB
timeout 470 python3 -P bench/network.py --T 4,16 --out $OUT/net 2>&1 | grep -v "^W1\|warn" | tee $OUT/network.log
