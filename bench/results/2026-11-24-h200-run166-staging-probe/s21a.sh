#!/usr/bin/env bash
# Run 166: staging probe (bench/staging_probe.cu) beside our lif backward.
set -uo pipefail
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv | tee $OUT/gpu.txt
xz -dc .gpu/flexsn-run.xz > /tmp/flexsn-run && chmod +x /tmp/flexsn-run
.gpu/staging_probe 2>&1 | tee $OUT/probe.txt
for s in 256_65536 32_262144 1024_16384; do
  read -r T N <<<"${s/_/ }"
  for dt in bf16 f32; do
    for v in backward inference; do
      echo "== lif $dt $v T=$T NCL=$N"
      /tmp/flexsn-run examples/lif.mlir --backend=cuda --variant=$v --T=$T --ncl=$N --dtype=$dt --bench --reps=30 2>&1 | grep -E "entry|median|same-size"
    done
  done
done 2>&1 | tee $OUT/ours.txt
.gpu/staging_probe 256 65536 2>&1 | tee $OUT/probe2.txt
