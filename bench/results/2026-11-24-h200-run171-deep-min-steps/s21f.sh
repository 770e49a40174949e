#!/usr/bin/env bash
# Run 171: the deep entry of at least 8 steps (two_in_two_state's backward,
# the traced tutorial's): kernel A/B against session 19's flexsn-run, then
# correctness (C API, gpu_tests.sh, pytest -m cuda on the wheel), first call.
set -uo pipefail
export PYTHONUNBUFFERED=1
mkdir -p /tmp/a /tmp/b build/lib build/bin
xz -dc .gpu/flexsn-run-old.xz > /tmp/a/flexsn-run; xz -dc .gpu/flexsn-run.xz > /tmp/b/flexsn-run; chmod +x /tmp/a/flexsn-run /tmp/b/flexsn-run
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee $OUT/device.txt
{ echo "== A = session 19, B = kDeepMinSteps"
  CORES=two_in_two_state DTYPES="bf16 f32" VARIANTS=backward SHAPES="256_65536 1024_16384 64_65536 32_65536 256_67584 32_262144" bench/ab_kernels.sh /tmp/a/flexsn-run /tmp/b/flexsn-run
  echo "== traced tutorial (core)"
  IR_A=.gpu/tutorial_traced.mlir IR_B=.gpu/tutorial_traced.mlir CORES=tutorial DTYPES="bf16 f32" VARIANTS=backward SHAPES="256_65536 1024_16384" bench/ab_kernels.sh /tmp/a/flexsn-run /tmp/b/flexsn-run
  echo "== second pass, 2in2st T=256 NCL=64K"
  CORES=two_in_two_state DTYPES="bf16 f32" VARIANTS=backward SHAPES="256_65536" bench/ab_kernels.sh /tmp/a/flexsn-run /tmp/b/flexsn-run
  for dt in bf16 f32; do /tmp/b/flexsn-run examples/two_in_two_state.mlir --backend=cuda --variant=backward --dtype=$dt --T=256 --ncl=65536 --bench --reps=30 2>&1 | grep -E "entry|same-size"; done
} 2>&1 | tee $OUT/ab.txt
echo "== gpu_tests"; timeout 200 scripts/gpu_tests.sh /tmp/b 2>&1 > $OUT/gpu_tests.log; tail -1 $OUT/gpu_tests.log; grep -A8 "^FAIL" $OUT/gpu_tests.log | head -30
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .gpu/flexsn-*.whl || exit 1
export PYTHONPATH=/tmp/site FLEXSN_TEST_INSTALLED=1
ln -sf /tmp/site/flexsn/libFlexSN.so build/lib/libFlexSN.so; cp .gpu/flexsn-capi-test build/bin/
build/bin/flexsn-capi-test examples/lif.mlir cuda 2>&1 | tail -1 | tee $OUT/capi.txt
(cd python-bindings && timeout 200 python3 -P -m pytest -q -p no:cacheprovider -m cuda tests 2>&1) > $OUT/pytest-cuda.log; tail -2 $OUT/pytest-cuda.log
timeout 120 python3 bench/first_call.py cuda 2>&1 | tee $OUT/first_call.log | tail -4
