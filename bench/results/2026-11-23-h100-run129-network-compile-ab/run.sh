#!/usr/bin/env bash
# run 129: the network under torch.compile, session 12's wheel (old: the
# ops keep inputs and state sequences) against this session's last (new:
# the ops run the final-state pair); T=4 and T=16, f32 (bf16 does not
# change: the policy rematerializes there).
set -uo pipefail
OUT=${OUT:-/tmp/out}
export PYTHONUNBUFFERED=1 FLEXSN_TEST_INSTALLED=1
for w in old new; do
  if [ $w = old ]; then W=.gpu/old/flexsn-*.whl; else W=.gpu/flexsn-*.whl; fi
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target /tmp/site_$w .whl/*.whl $W || exit 1
done
nvidia-smi -L | tee $OUT/device.txt
for w in old new; do
  echo "== network $w"
  PYTHONPATH=/tmp/site_$w timeout 270 python3 -P bench/network.py --T 4,16 --dtypes float32 \
    --systems flexsn,flexsn-compile --out $OUT/net-$w 2>&1 | grep -v "^W1\|warn" | tail -8
done
rm -f $OUT/*/*.png
cd $OUT && tar czf /tmp/all.tgz . && find . -mindepth 1 -delete && mv /tmp/all.tgz . && ls -la
