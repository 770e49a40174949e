#!/usr/bin/env bash
# Run 167: staging probe with cursors, fast reciprocal, parallel refills.
set -uo pipefail
.gpu/staging_probe 2>&1 | tee $OUT/probe.txt
