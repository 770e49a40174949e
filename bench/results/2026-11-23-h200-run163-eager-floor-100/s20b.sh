#!/usr/bin/env bash
# Session 20, run 163: our package against PyTorch's eager floor with 100
# repetitions a case (run 162's host was noisy), and replays of 10 calls a
# graph (a graph's own launch out of the per-call figure); then
# bench/overhead.py (default and --layers) on the same host.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
start=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --upgrade --target /tmp/site .whl/*.whl .gpu/flexsn-*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi -L | tee "$OUT/device.txt"
timeout 300 python3 -P bench/compare.py --systems flexsn --reps 100 --graph --graph-calls 10 \
  --out "$OUT/cmp" 2>&1 | grep -v "^W\|Warning\|warn(" > "$OUT/compare.log"
echo "compare rc $? after $(( $(date +%s) - start )) s"; tail -3 "$OUT/compare.log"
for a in "" "--layers"; do
  timeout 150 python3 -P bench/overhead.py cuda $a 2>&1 | grep -v "^W\|Warning\|warn(" >> "$OUT/overhead.txt"
done
echo "overhead after $(( $(date +%s) - start )) s"; cat "$OUT/overhead.txt"
