#!/usr/bin/env bash
# run 128: the wheel with the torch.compile ops on the saving policy
# through gpu_python.sh (C API, pytest cpu+cuda on the installed wheel,
# ctypes cuda subset, first call, main job, overhead).
set -uo pipefail
OUT=${OUT:-/tmp/out}
bash scripts/gpu_python.sh > $OUT/gpu_python.txt 2>&1
grep -E "ALL OK|passed|failed|error|Error|first training|flexsn \(cuda\)|train step|inference  " $OUT/gpu_python.txt | head -40
cd $OUT && tar czf /tmp/all.tgz . && find . -mindepth 1 -delete && mv /tmp/all.tgz . && ls -la
