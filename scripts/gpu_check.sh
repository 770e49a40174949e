#!/usr/bin/env bash
# The GPU checks, on any machine with an NVIDIA GPU and this repository:
#   1. every GPU integration test (the RUN lines of test/Integration/CUDA)
#      and every checked CPU execution test again with --backend=cuda,
#      through flexsn-run: each must print "check: ok";
#   2. flexsn-fuzz --cuda: 300 random cores, every kernel variant on the CPU
#      and the GPU against the reference interpreter and adjoint;
#   3. compute-sanitizer memcheck and racecheck over the first cores of that
#      set (where the CUDA toolkit has compute-sanitizer);
#   4. the Python package's pytest suite, cpu and cuda backends;
#   5. the SpikingJelly tutorial's examples with flexsn, the per-call
#      overhead bench, and with two GPUs or more the DDP check.
# The tools come from BIN (default build/bin; built by scripts/setup.sh
# when missing). The Python package is the installed one where Python
# imports flexsn outside this checkout, else this checkout's over
# build/lib. Logs go to $OUT (default build/gpu-check); the exit status is
# that of the first failing step.
#   scripts/gpu_check.sh [BIN]          ONLY="a.mlir ...": step 1 for those files
#                                       STEPS="1 2 3": only those steps
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=${1:-build/bin}
OUT=${OUT:-build/gpu-check}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
status=0
STEPS=${STEPS:-1 2 3 4 5}
wants() { [[ " $STEPS " == *" $1 "* ]]; }
step() { echo "== $*"; }
record() { [ "$1" -eq 0 ] || { [ $status -ne 0 ] || status=$1; }; }

nvidia-smi -L > /dev/null 2>&1 || { echo "gpu_check.sh: no NVIDIA GPU (nvidia-smi -L)"; exit 2; }
nvidia-smi -L | tee "$OUT/device.txt"
if [ ! -x "$BIN/flexsn-run" ]; then
  scripts/python_deps.sh && scripts/setup.sh || exit 1
fi
INSTALLED=1
if ! (cd /tmp && $PY -P -c 'import flexsn' 2>/dev/null); then
  INSTALLED=
  export PYTHONPATH=$ROOT/python-bindings${PYTHONPATH:+:$PYTHONPATH}
  export FLEXSN_LIBRARY=${FLEXSN_LIBRARY:-$ROOT/build/lib/libFlexSN.so}
fi
$PY -P -c 'import torch, flexsn; print("torch", torch.__version__, torch.cuda.get_device_name(),
      "| flexsn", flexsn.__file__, "|", flexsn.call_path())' | tee -a "$OUT/device.txt"

if wants 1; then
step "1. GPU integration tests ($BIN/flexsn-run)"
pass=0; fail=0
run_line() {  # FILE "RUN line" [extra flags]
  local cmd=${2#// RUN: }
  cmd=${cmd%%|*}; cmd=${cmd//%flexsn_src_root/.}; cmd=${cmd//%s/$1}
  cmd="${cmd/flexsn-run/$BIN/flexsn-run} ${3:-}"
  local out rc want="check: ok"
  out=$(eval "$cmd" 2>&1); rc=$?
  [[ $cmd == *--bench* && $cmd != *--check* ]] && want="bench: kernel median"
  if [ $rc -eq 0 ] && grep -q "$want" <<<"$out" && ! grep -q FAIL <<<"$out"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1)); echo "FAIL  ${cmd#$BIN/}"; echo "$out" | tail -8
  fi
}
{
  for f in ${ONLY:-test/Integration/CUDA/*.mlir}; do
    while IFS= read -r line; do run_line "$f" "$line"; done \
      < <(grep '^// RUN: flexsn-run' "$f")
  done
  [ -n "${ONLY:-}" ] || for f in test/Integration/CPU/*.mlir test/Integration/Autodiff/*.mlir; do
    while IFS= read -r line; do run_line "$f" "$line" --backend=cuda; done \
      < <(grep '^// RUN: flexsn-run' "$f" | grep -E '^[^|]*--check( |$)')
  done
  echo "GPU tests: $pass passed, $fail failed"
} 2>&1 | tee "$OUT/gpu-tests.log" | tail -3
grep -q " 0 failed" "$OUT/gpu-tests.log"; record $?
fi
[ -z "${ONLY:-}" ] || exit $status

JOBS=$(( $(nproc) > 1 ? $(nproc) / 2 : 1 ))
if wants 2; then
step "2. flexsn-fuzz --cuda (300 cores, $JOBS workers)"
"$BIN/flexsn-fuzz" --count=300 --seed=1 --jobs="$JOBS" --cuda \
  --out="$OUT/fuzz-failures" > "$OUT/fuzz-cuda.log" 2>&1; record $?
tail -1 "$OUT/fuzz-cuda.log"
fi

if wants 3; then
SAN=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
if [ -x "$SAN" ]; then
  for tool in memcheck racecheck; do
    n=$([ $tool = memcheck ] && echo 40 || echo 15)
    step "3. compute-sanitizer --tool $tool (cores #0-#$((n - 1)))"
    "$SAN" --tool "$tool" --error-exitcode 99 --print-limit 20 \
      "$BIN/flexsn-fuzz" --count="$n" --seed=1 --cuda --no-minimize \
      --out="$OUT/fuzz-$tool" > "$OUT/$tool.log" 2>&1; record $?
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/$tool.log" | tail -1
  done
else
  step "3. compute-sanitizer: not found, skipped"
fi
fi

if wants 4; then
step "4. pytest, cpu and cuda backends"
(cd python-bindings && FLEXSN_TEST_INSTALLED=$INSTALLED \
  $PY -P -m pytest -q -p no:cacheprovider tests) > "$OUT/pytest.log" 2>&1; record $?
tail -1 "$OUT/pytest.log"
fi

if wants 5; then
step "5. the tutorial, per-call overhead$( [ "$(nvidia-smi -L | wc -l)" -ge 2 ] && echo ", DDP")"
$PY -P examples/python/sj_tutorial.py > "$OUT/tutorial.log" 2>&1; record $?
tail -1 "$OUT/tutorial.log"
$PY -P bench/overhead.py cuda > "$OUT/overhead.log" 2>&1; record $?
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  $PY -P bench/ddp_check.py > "$OUT/ddp.log" 2>&1; record $?
  tail -2 "$OUT/ddp.log"
fi
fi
echo "gpu_check.sh: $([ $status -eq 0 ] && echo ok || echo "failed ($status)"); logs in $OUT"
exit $status
