#!/usr/bin/env bash
# Session 20, run 165: does timing the eager floor first in a case slow our
# bf16 training step after it (runs 162-163, not run 164's probe)? compare.py
# on lif, ours only, alternately with and without the eager floor.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --upgrade --target /tmp/site .whl/*.whl .gpu/flexsn-*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi -L | tee "$OUT/device.txt"
for i in 1 2; do
  for ef in "" "--no-eager-floor"; do
    echo "== pass $i ${ef:-with the eager floor}" | tee -a "$OUT/ab.log"
    timeout 120 python3 -P bench/compare.py --cores lif --systems flexsn --reps 100 \
      --shapes 4x4194304,32x262144 $ef --out "$OUT/x$i$ef" 2>&1 \
      | grep -v "^W\|Warning\|warn(" | grep "flexsn \|eager floor\|NCL" >> "$OUT/ab.log"
  done
done
cat "$OUT/ab.log"
