#!/usr/bin/env bash
# On the GPU machine (device tool), from the repository root, with .gpu/
# (libFlexSN.so.xz, flexsn-capi-test) and .whl/ (spikingjelly 2.0.0, loguru)
# carried: the C API v2 test in cuda mode, the whole pytest suite (cpu and
# cuda backends, SpikingJelly compatibility included) and the main job.
# Logs go to $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build/lib build/bin
xz -dc .gpu/libFlexSN.so.xz > build/lib/libFlexSN.so
cp .gpu/flexsn-capi-test build/bin/
export FLEXSN_LIBRARY=$PWD/build/lib/libFlexSN.so PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/python-bindings
nvidia-smi -L | tee "$OUT/device.txt"
python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name())' | tee -a "$OUT/device.txt"
echo "== C API v2 (cuda mode)"
build/bin/flexsn-capi-test examples/lif.mlir cuda 2>&1 | tee "$OUT/capi.log" | grep -v '^ok'
echo "== pytest (cpu + cuda)"
(cd python-bindings && python3 -m pytest -q -p no:cacheprovider tests 2>&1) | tee "$OUT/pytest.log" | tail -15
echo "== main job"
python3 examples/python/tutorial_neuron.py 2>&1 | tee "$OUT/main.log"
