#!/usr/bin/env bash
# run 131: the review mend (the native node without the passed-leaf
# bitmask; the compile backward op's stand-in) on cuda: the training
# tests of six files on both call paths.
set -uo pipefail
OUT=${OUT:-/tmp/out}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --upgrade --target /tmp/site .whl/*.whl .gpu/flexsn-*.whl || exit 1
export PYTHONPATH=/tmp/site FLEXSN_TEST_INSTALLED=1
nvidia-smi -L | tee "$OUT/device.txt"
F="tests/test_save_policy.py tests/test_backward_modes.py tests/test_compile.py tests/test_flexsn.py tests/test_native.py tests/test_fast_path.py"
(cd python-bindings && python3 -P -m pytest -q -p no:cacheprovider -m cuda $F 2>&1) | tee "$OUT/pytest.log" | tail -2
(cd python-bindings && FLEXSN_NATIVE=0 python3 -P -m pytest -q -p no:cacheprovider -m cuda $F 2>&1) | tee "$OUT/pytest-ctypes.log" | tail -2
