#!/usr/bin/env bash
# Run 168: the probe's step against a trivial one (where does its time go?)
set -uo pipefail
for b in staging_probe staging_probe_trivial; do
  echo "== $b"; .gpu/$b 1024 16384 256 65536
done 2>&1 | tee $OUT/probe.txt
