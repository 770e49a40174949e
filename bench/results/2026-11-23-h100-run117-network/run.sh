#!/usr/bin/env bash
# run 117: the keeper-tensor native node on the GPU (backward modes, compile,
# native, fast path; both paths), per-call overhead, then bench/network.py.
set -uo pipefail
OUT=${OUT:-/tmp/out}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl .gpu/flexsn-*.whl || exit 1
export PYTHONPATH=/tmp/site FLEXSN_TEST_INSTALLED=1 PYTHONUNBUFFERED=1
nvidia-smi -L
(cd python-bindings && python3 -P -m pytest -q -p no:cacheprovider -m cuda \
  tests/test_backward_modes.py tests/test_compile.py tests/test_native.py tests/test_fast_path.py \
  tests/test_flexsn.py tests/test_api.py 2>&1 | tail -3
 FLEXSN_NATIVE=0 python3 -P -m pytest -q -p no:cacheprovider -m cuda tests/test_backward_modes.py 2>&1 | tail -2) | tee $OUT/pytest.log
python3 -P bench/overhead.py cuda 2>&1 | tee $OUT/overhead.log
timeout 400 python3 -P bench/network.py --out $OUT/net 2>&1 | grep -v "^W1\|warn" | tee $OUT/network.log
