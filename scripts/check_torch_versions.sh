#!/usr/bin/env bash
# The wheel against older PyTorch versions (the pinned 2.11.0 is the test
# command's own, tests/test_wheel.py): per version a venv of its own
# (build/venv-torch-<version>) with that torch from PyPI, the manylinux
# wheel scripts/wheel.sh built, and the package's pytest suite run against
# the installed wheel (its operators are built for that torch on first use,
# in the venv's own cache). The adapters' tests need their libraries and
# are left to the test command.
#   scripts/check_torch_versions.sh [version ...]   (default: 2.9.1)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
WHEEL=${FLEXSN_TEST_WHEEL:-$(ls build/dist/flexsn-*manylinux*.whl 2>/dev/null | head -1)}
[ -n "$WHEEL" ] || WHEEL=$(scripts/wheel.sh build/dist | tail -1)
[ $# -gt 0 ] || set -- 2.9.1
for v in "$@"; do
  venv=$PWD/build/venv-torch-$v
  [ -x "$venv/bin/python" ] || $PY -m venv "$venv"
  "$venv/bin/python" -m pip install -q "torch==$v" numpy pytest
  "$venv/bin/python" -m pip install -q --no-deps --force-reinstall "$WHEEL"
  echo "== torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)')"
  (cd python-bindings &&
   FLEXSN_TEST_INSTALLED=1 FLEXSN_CACHE_DIR="$venv/flexsn-cache" \
     "$venv/bin/python" -P -m pytest -q -p no:cacheprovider tests \
     --ignore=tests/test_convert.py --ignore=tests/test_interop_snntorch.py \
     --ignore=tests/test_interop_norse.py --ignore=tests/test_interop_nir.py \
     --ignore=tests/test_wheel.py | tail -1)
done
