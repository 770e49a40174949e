#!/usr/bin/env bash
# run 116: the review mends' wheel on the GPU (gpu_python.sh), then
# compare.py --graph --graph-calls 8 at lif T=4 NCL=4M (ours, LIFNode).
set -uo pipefail
OUT=${OUT:-/tmp/out}
bash scripts/gpu_python.sh 2>&1 | tee $OUT/gpu_python.txt
export PYTHONPATH=/tmp/site FLEXSN_TEST_INSTALLED=1 PYTHONUNBUFFERED=1
python3 -P bench/compare.py --cores lif --shapes 4x4194304 --systems flexsn,sj-lifnode \
  --graph --graph-calls 8 --out $OUT/cmp 2>&1 | tail -40
python3 -P bench/compare.py --report $OUT/cmp > /dev/null 2>&1; ls $OUT/cmp
cd $OUT && tar czf /tmp/all.tgz . && find . -mindepth 1 -delete && mv /tmp/all.tgz . && ls -la
