#!/usr/bin/env bash
# Session 19, run 161: the wheel after review (stream getter, JIT setup):
# the C API test in cuda mode and the CUDA pytest subsets on both call paths.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build/lib build/bin
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --upgrade --target /tmp/site .whl/*.whl .gpu/flexsn-*.whl || exit 1
export PYTHONPATH=/tmp/site FLEXSN_TEST_INSTALLED=1
ln -sf /tmp/site/flexsn/libFlexSN.so build/lib/libFlexSN.so
cp .gpu/flexsn-capi-test build/bin/
nvidia-smi -L | tee "$OUT/device.txt"
build/bin/flexsn-capi-test examples/lif.mlir cuda 2>&1 | tee "$OUT/capi.log" | tail -1
(cd python-bindings && python3 -P -m pytest -q -p no:cacheprovider -m cuda tests 2>&1) | tee "$OUT/pytest-cuda.log" | tail -1
(cd python-bindings && FLEXSN_NATIVE=0 python3 -P -m pytest -q -p no:cacheprovider -m cuda \
   tests/test_flexsn.py tests/test_native.py tests/test_fast_path.py 2>&1) | tee "$OUT/pytest-ctypes.log" | tail -1
python3 examples/python/tutorial_neuron.py 2>&1 | tee "$OUT/main.log" | tail -3
