#!/usr/bin/env bash
# run 130: lif f32 with the saving policy side by side with the peers in
# one run (compare.py --graph, 8 calls a graph): ours, torch.compile of the
# loop (not at T=256: it unrolls past a call), torch.compile of the step,
# SpikingJelly's LIFNode (triton) and FlexSN (not at T=256: it compiles per
# T), at the three shapes.
set -uo pipefail
OUT=${OUT:-/tmp/out}
export PYTHONUNBUFFERED=1 FLEXSN_TEST_INSTALLED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --upgrade --target /tmp/site .whl/*.whl .gpu/flexsn-*.whl || exit 1
nvidia-smi -L | tee $OUT/device.txt
PYTHONPATH=/tmp/site timeout 520 python3 -P bench/compare.py --cores lif \
  --shapes 4x4194304,32x262144,256x65536 --dtypes float32 \
  --systems flexsn,torch-compile,torch-compile-step,sj-lifnode,sj-flexsn \
  --skip 'torch-compile:*:256:*,sj-flexsn:*:256:*' \
  --graph --graph-calls 8 --out $OUT/cmp 2>&1 | grep -v "^W1\|warn" | tail -40
rm -f $OUT/cmp/*.png
cd $OUT && tar czf /tmp/all.tgz . && find . -mindepth 1 -delete && mv /tmp/all.tgz . && ls -la
