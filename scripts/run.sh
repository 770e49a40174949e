#!/usr/bin/env bash
# The main job: set up, build, then compile every example neuron with
# flexsn-opt (parse, verify, canonicalize) and print what each one is.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_DIR=${FLEXSN_BUILD_DIR:-build}
OPT="$BUILD_DIR/bin/flexsn-opt"
for f in examples/*.mlir; do
  out=$("$OPT" -canonicalize "$f")
  scans=$(grep -c "flexsn.scan" <<<"$out" || true)
  spikes=$(grep -c "flexsn.spike" <<<"$out" || true)
  ops=$(grep -cE "^ +%[^ ]+ = (arith|math|flexsn)\." <<<"$out" || true)
  printf "%-28s ok: %s scan(s), %s spike(s), %s body op(s) after canonicalize\n" \
    "$f" "$scans" "$spikes" "$ops"
done
echo "Lowering to CPU/GPU kernels is not built yet (see docs/architecture.md)."
