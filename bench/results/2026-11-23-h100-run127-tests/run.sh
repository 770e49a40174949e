#!/usr/bin/env bash
# run 127: the session's last test changes on the GPU with run 124's wheel
# (the package code is unchanged since): test_save_policy (the final-state
# pair under compiled autograd and save_on_cpu among them) and
# test_backward_modes on cuda, both call paths; then the mended
# gpu_tests.sh judgement of CUDA/bench.mlir's --bench line.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build/bin
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --upgrade --target /tmp/site .whl/*.whl .gpu/flexsn-*.whl || exit 1
export PYTHONPATH=/tmp/site FLEXSN_TEST_INSTALLED=1
nvidia-smi -L | tee "$OUT/device.txt"
(cd python-bindings && python3 -P -m pytest -q -p no:cacheprovider -m cuda \
   tests/test_save_policy.py tests/test_backward_modes.py 2>&1) | tee "$OUT/pytest.log" | tail -3
(cd python-bindings && FLEXSN_NATIVE=0 python3 -P -m pytest -q -p no:cacheprovider -m cuda \
   tests/test_save_policy.py tests/test_backward_modes.py 2>&1) | tee "$OUT/pytest-ctypes.log" | tail -3
xz -dc .gpu/flexsn-run.xz > build/bin/flexsn-run && chmod +x build/bin/flexsn-run
# gpu_tests.sh's loop over the CUDA files only (the CPU files' lines ran in run 126)
sed -e 's|^for f in test/Integration/CPU/\*.mlir test/Integration/Autodiff/\*.mlir; do|for f in; do|' \
  scripts/gpu_tests.sh > /tmp/gpu_tests_cuda.sh
bash /tmp/gpu_tests_cuda.sh build/bin > "$OUT/gpu_tests_cuda.log" 2>&1
grep -E "bench|GPU tests" "$OUT/gpu_tests_cuda.log" | head
cd $OUT && tar czf /tmp/all.tgz . && find . -mindepth 1 -delete && mv /tmp/all.tgz . && ls -la
