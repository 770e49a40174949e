#!/usr/bin/env bash
# Session 19, run 157: two_in_two_state's peers at T=32 and T=256.
# SpikingJelly's FlexSN compiles per T (anchors: its 2in2st T=32 training
# build took 326 s): two --first-only processes fill Triton's disk cache
# (f32 and bf16, in the background, CPU only) while torch.compile (T=32)
# and its step (T=256) are timed in the foreground; then sj-flexsn is
# timed with the cache warm.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
start=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --upgrade --target /tmp/site .whl/*.whl .gpu/flexsn-*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton-cache
nvidia-smi -L | tee "$OUT/device.txt"; nproc >> "$OUT/device.txt"
filt() { grep -v "^W\|Warning\|warn(" ; }
for dt in float32 bfloat16; do
  timeout 540 python3 -P bench/compare.py --cores 2in2st --shapes 32x262144 --dtypes $dt \
    --systems sj-flexsn --first-only --out "$OUT/sj-first-$dt" 2>&1 | filt > "$OUT/sj-first-$dt.log" &
done
timeout 330 python3 -P bench/compare.py --cores 2in2st --shapes 32x262144,256x65536 \
  --systems torch-compile,torch-compile-step --graph \
  --skip 'torch-compile:*:256:*,torch-compile-step:*:32:*' --out "$OUT/tc" 2>&1 | filt > "$OUT/tc.log"
echo "torch.compile rc $? after $(( $(date +%s) - start )) s"; tail -12 "$OUT/tc.log"
wait
echo "sj warm-up done after $(( $(date +%s) - start )) s"; cat "$OUT"/sj-first-*.log | tail -6
left=$(( 580 - ($(date +%s) - start) ))
[ $left -lt 40 ] && exit 0
timeout $left python3 -P bench/compare.py --cores 2in2st --shapes 32x262144 \
  --systems sj-flexsn --graph --out "$OUT/sj" 2>&1 | filt > "$OUT/sj.log"
echo "sj rc $? after $(( $(date +%s) - start )) s"; tail -6 "$OUT/sj.log"
