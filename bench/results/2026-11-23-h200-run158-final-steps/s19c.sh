#!/usr/bin/env bash
# Session 19, run 158: the wheel with final states from run_plan: the GPU
# suite (scripts/gpu_python.sh), then an A/B against the previous wheel
# (runs 155-157) on the same host: a training step's CUDA-event and
# replayed times (bench/step_timeline.py --no-profile), alternating.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
timeout 400 bash scripts/gpu_python.sh 2>&1 | tail -40
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --upgrade --target /tmp/site-old .whl/*.whl .gpu/old/flexsn-*.whl || exit 1
for r in 1 2; do
  for w in old new; do
    site=/tmp/site; [ $w = old ] && site=/tmp/site-old
    for c in "2in2st 1 1024" "2in2st 4 4194304" "lif 1 1024"; do
      set -- $c
      echo "[$w round $r] $(PYTHONPATH=$site python3 -P bench/step_timeline.py --core $1 --T $2 --N $3 --no-profile 2>&1 | grep -v '^W\|warn' | tr '\n' ' ')"
    done
  done
done 2>&1 | tee "$OUT/ab.log"
