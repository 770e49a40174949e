#!/usr/bin/env bash
# run 123: the review mend of the native training node (its binding's id)
# on the GPU: cuda tests of the node on both call paths, and C API.
set -uo pipefail
OUT=${OUT:-/tmp/out}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl .gpu/flexsn-*.whl || exit 1
export PYTHONPATH=/tmp/site FLEXSN_TEST_INSTALLED=1 PYTHONUNBUFFERED=1
cd python-bindings
python3 -P -c 'import flexsn; print(flexsn.call_path())'
python3 -P -m pytest -q -p no:cacheprovider -m cuda tests/test_backward_modes.py \
  tests/test_native.py tests/test_fast_path.py tests/test_compile.py tests/test_flexsn.py \
  tests/test_neuron.py 2>&1 | tail -2 | tee $OUT/pytest.log
FLEXSN_NATIVE=0 python3 -P -m pytest -q -p no:cacheprovider -m cuda tests/test_backward_modes.py \
  tests/test_native.py 2>&1 | tail -1 | tee -a $OUT/pytest.log
