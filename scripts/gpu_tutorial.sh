#!/usr/bin/env bash
# On the GPU machine, with the wheel in .gpu/: the SpikingJelly tutorial's
# examples with flexsn (docs/tutorial.md) and the per-call overhead bench.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --upgrade --target /tmp/site .gpu/flexsn-*.whl || exit 1
export PYTHONPATH=/tmp/site
python3 -P examples/python/sj_tutorial.py 2>&1 | grep -v "Warning\|warnings.warn" | tee "$OUT/tutorial.log"
python3 -P bench/overhead.py cuda 2>&1 | tee "$OUT/overhead.log"
