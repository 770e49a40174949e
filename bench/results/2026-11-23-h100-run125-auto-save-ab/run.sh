#!/usr/bin/env bash
# run 125: A/B of session 12's final wheel (old: rematerialize) against the
# auto saving policy (new), alternating: compare.py lif f32/bf16 at the
# issue's three shapes, ours only, eager and replayed (8 calls a graph);
# then network.py T=16 f32 and T=4 f32, ours only (time, peak memory).
set -uo pipefail
OUT=${OUT:-/tmp/out}
export PYTHONUNBUFFERED=1 FLEXSN_TEST_INSTALLED=1
for w in old new; do
  if [ $w = old ]; then W=.gpu/old/flexsn-*.whl; else W=.gpu/flexsn-*.whl; fi
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target /tmp/site_$w .whl/*.whl $W || exit 1
done
nvidia-smi -L | tee $OUT/device.txt
for round in 1 2; do
  for w in old new; do
    echo "== round $round $w: compare lif"
    PYTHONPATH=/tmp/site_$w timeout 200 python3 -P bench/compare.py --cores lif \
      --shapes 4x4194304,32x262144,256x65536 --dtypes float32,bfloat16 --systems flexsn \
      --graph --graph-calls 8 --out $OUT/cmp-$w-$round 2>&1 | grep -v "^W1\|warn" | tail -14
  done
done
for w in old new; do
  echo "== network $w"
  PYTHONPATH=/tmp/site_$w timeout 200 python3 -P bench/network.py --T 4,16 --dtypes float32,bfloat16 \
    --systems flexsn --out $OUT/net-$w 2>&1 | grep -v "^W1\|warn" | tail -12
done
rm -f $OUT/*/*.png
cd $OUT && tar czf /tmp/all.tgz . && find . -mindepth 1 -delete && mv /tmp/all.tgz . && ls -la
