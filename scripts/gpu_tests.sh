#!/usr/bin/env bash
# Runs the GPU integration tests on a machine without lit/FileCheck (the GPU
# machine): the RUN lines of test/Integration/CUDA/*.mlir, and every checked
# CPU execution test (test/Integration/{CPU,Autodiff}) again with
# --backend=cuda. Each command must print "check: ok" and no "FAIL" (a
# --bench line without --check: its kernel median).
# Usage: scripts/gpu_tests.sh [dir-with-flexsn-run]   (default build/bin)
# ONLY="test/Integration/CUDA/a.mlir ...": those files' RUN lines alone.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build/bin}
pass=0; fail=0

# run_line FILE "RUN line" [extra flags]
run_line() {
  local cmd=${2#// RUN: }
  cmd=${cmd%%|*}
  cmd=${cmd//%flexsn_src_root/.}
  cmd=${cmd//%s/$1}
  cmd="${cmd/flexsn-run/$BIN/flexsn-run} ${3:-}"
  local out rc
  out=$(eval "$cmd" 2>&1); rc=$?
  local want="check: ok"
  [[ $cmd == *--bench* && $cmd != *--check* ]] && want="bench: kernel median"
  if [ $rc -eq 0 ] && grep -q "$want" <<<"$out" && ! grep -q FAIL <<<"$out"; then
    pass=$((pass + 1)); echo "ok    ${cmd#$BIN/}"
  else
    fail=$((fail + 1)); echo "FAIL  ${cmd#$BIN/}"; echo "$out" | tail -8
  fi
}

for f in ${ONLY:-test/Integration/CUDA/*.mlir}; do
  while IFS= read -r line; do run_line "$f" "$line"; done \
    < <(grep '^// RUN: flexsn-run' "$f")
done
[ -n "${ONLY:-}" ] || for f in test/Integration/CPU/*.mlir test/Integration/Autodiff/*.mlir; do
  while IFS= read -r line; do run_line "$f" "$line" --backend=cuda; done \
    < <(grep '^// RUN: flexsn-run' "$f" | grep -E '^[^|]*--check( |$)')
done
echo "GPU tests: $pass passed, $fail failed"
[ $fail -eq 0 ]
