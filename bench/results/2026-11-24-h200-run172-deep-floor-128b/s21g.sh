#!/usr/bin/env bash
# Run 172: the floor within 128 bytes (bf16 backwards only): A/B against
# session 19's flexsn-run, the whole gpu_tests.sh, pytest -m cuda, first call.
set -uo pipefail
export PYTHONUNBUFFERED=1
mkdir -p /tmp/a /tmp/b build/lib build/bin
xz -dc .gpu/flexsn-run-old.xz > /tmp/a/flexsn-run; xz -dc .gpu/flexsn-run.xz > /tmp/b/flexsn-run; chmod +x /tmp/a/flexsn-run /tmp/b/flexsn-run
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee $OUT/device.txt
{ CORES=two_in_two_state DTYPES="bf16 f32" VARIANTS=backward SHAPES="256_65536 1024_16384 64_65536" bench/ab_kernels.sh /tmp/a/flexsn-run /tmp/b/flexsn-run
  IR_A=.gpu/tutorial_traced.mlir IR_B=.gpu/tutorial_traced.mlir CORES=tutorial DTYPES="bf16 f32" VARIANTS=backward SHAPES="256_65536" bench/ab_kernels.sh /tmp/a/flexsn-run /tmp/b/flexsn-run
} 2>&1 | tee $OUT/ab.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .gpu/flexsn-*.whl || exit 1
export PYTHONPATH=/tmp/site FLEXSN_TEST_INSTALLED=1
ln -sf /tmp/site/flexsn/libFlexSN.so build/lib/libFlexSN.so; cp .gpu/flexsn-capi-test build/bin/
timeout 100 python3 bench/first_call.py cuda 2>&1 | tee $OUT/first_call.log
build/bin/flexsn-capi-test examples/lif.mlir cuda 2>&1 | tail -1 | tee $OUT/capi.txt
(cd python-bindings && timeout 150 python3 -P -m pytest -q -p no:cacheprovider -m cuda tests 2>&1) > $OUT/pytest-cuda.log; tail -1 $OUT/pytest-cuda.log
echo "== gpu_tests"; timeout 280 scripts/gpu_tests.sh /tmp/b > $OUT/gpu_tests.log 2>&1; tail -1 $OUT/gpu_tests.log; grep -c "^ok" $OUT/gpu_tests.log; grep -A8 "^FAIL" $OUT/gpu_tests.log | head -30
