#!/usr/bin/env bash
# Session 18, run 151: bench/compare.py on this build, H200: lif against
# LIFNode and the eager loop (eager and CUDA-graph replay, first calls,
# kernel-only figures), then two_in_two_state against the eager loop.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
start=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --upgrade --target /tmp/site .whl/*.whl .gpu/flexsn-*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
xz -dc .gpu/flexsn-run.xz > /tmp/flexsn-run && chmod +x /tmp/flexsn-run
nvidia-smi -L | tee "$OUT/device.txt"
echo "== lif"
timeout 330 python3 -P bench/compare.py --cores lif --systems flexsn,sj-lifnode,torch-eager \
  --graph --first-call --flexsn-run /tmp/flexsn-run --out "$OUT/lif" 2>&1 | grep -v "^W\|Warning\|warn(" > "$OUT/lif.log"
echo "lif rc $? after $(( $(date +%s) - start )) s"; tail -3 "$OUT/lif.log"
echo "== 2in2st"
timeout $(( 570 - ($(date +%s) - start) )) python3 -P bench/compare.py --cores 2in2st \
  --systems flexsn,torch-eager --graph --flexsn-run /tmp/flexsn-run --out "$OUT/2in2st" 2>&1 \
  | grep -v "^W\|Warning\|warn(" > "$OUT/2in2st.log"
echo "2in2st rc $? after $(( $(date +%s) - start )) s"; tail -3 "$OUT/2in2st.log"
