#!/usr/bin/env bash
# Run 169: per-warp bulk-copy rings beside the block ring and the register ring.
set -uo pipefail
for b in staging_probe staging_probe_trivial; do
  echo "== $b"; .gpu/$b 1024 16384 256 65536 32 262144
done 2>&1 | tee $OUT/probe.txt
