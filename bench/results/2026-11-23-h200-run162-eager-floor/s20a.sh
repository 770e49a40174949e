#!/usr/bin/env bash
# Session 20, run 162: bench/compare.py with PyTorch's eager floor per case
# (eager_floor(): one elementwise op / that op and its backward through
# autograd, moving the case's minimal bytes), ours, LIFNode and the eager
# loop (eager and replayed); then bench/overhead.py on the same host.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
start=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --upgrade --target /tmp/site .whl/*.whl .gpu/flexsn-*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi -L | tee "$OUT/device.txt"
echo "== lif"
timeout 250 python3 -P bench/compare.py --cores lif --systems flexsn,sj-lifnode,torch-eager \
  --graph --out "$OUT/lif" 2>&1 | grep -v "^W\|Warning\|warn(" > "$OUT/lif.log"
echo "lif rc $? after $(( $(date +%s) - start )) s"; tail -3 "$OUT/lif.log"
echo "== 2in2st"
timeout 220 python3 -P bench/compare.py --cores 2in2st \
  --systems flexsn,torch-eager --graph --out "$OUT/2in2st" 2>&1 \
  | grep -v "^W\|Warning\|warn(" > "$OUT/2in2st.log"
echo "2in2st rc $? after $(( $(date +%s) - start )) s"; tail -3 "$OUT/2in2st.log"
echo "== overhead"
timeout $(( 570 - ($(date +%s) - start) )) python3 -P bench/overhead.py cuda 2>&1 \
  | grep -v "^W\|Warning\|warn(" > "$OUT/overhead.txt"
echo "overhead rc $? after $(( $(date +%s) - start )) s"; cat "$OUT/overhead.txt"
