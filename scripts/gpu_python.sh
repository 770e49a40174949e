#!/usr/bin/env bash
# On the GPU machine (device tool), from the repository root, with .gpu/
# (the flexsn wheel from `pip wheel .`, and flexsn-capi-test) and .whl/
# (spikingjelly 2.0.0, loguru) carried: installs the wheel with
# --no-index, then runs the C API v2 test in cuda mode (against the wheel's
# libFlexSN.so), the whole pytest suite against the installed package (cpu
# and cuda backends, SpikingJelly compatibility included), the first-call
# bench and the main job. Logs go to $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build/lib build/bin
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --upgrade --target /tmp/site .whl/*.whl .gpu/flexsn-*.whl || exit 1
export PYTHONPATH=/tmp/site FLEXSN_TEST_INSTALLED=1
# the C API test links build/lib/libFlexSN.so: the wheel's library
ln -sf /tmp/site/flexsn/libFlexSN.so build/lib/libFlexSN.so
cp .gpu/flexsn-capi-test build/bin/
nvidia-smi -L | tee "$OUT/device.txt"
python3 -c 'import torch, flexsn; print("torch", torch.__version__, torch.cuda.get_device_name(), "| flexsn from", flexsn.__file__, "|", flexsn.call_path())' | tee -a "$OUT/device.txt"
echo "== C API v2 (cuda mode)"
build/bin/flexsn-capi-test examples/lif.mlir cuda 2>&1 | tee "$OUT/capi.log" | grep -v '^ok'
echo "== pytest (cpu + cuda), installed wheel"
# -P: the working directory is not put on sys.path, so the tests import the
# installed package, not the checkout's python-bindings/flexsn.
(cd python-bindings && python3 -P -c 'import flexsn; print("tests import", flexsn.__file__)' &&
 python3 -P -m pytest -q -p no:cacheprovider tests 2>&1) | tee "$OUT/pytest.log" | tail -4
echo "== first call"
python3 bench/first_call.py cuda 2>&1 | tee "$OUT/first_call.log"
echo "== main job"
python3 examples/python/tutorial_neuron.py 2>&1 | tee "$OUT/main.log"
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  echo "== DDP on two GPUs vs one"
  python3 bench/ddp_check.py 2>&1 | grep -v "^W\|warn" | tee "$OUT/ddp.log"
fi
echo "== per-call overhead"
python3 -P bench/overhead.py cuda 2>&1 | tee "$OUT/overhead.log"
