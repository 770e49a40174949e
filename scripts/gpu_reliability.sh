#!/usr/bin/env bash
# On the GPU machine (device tool), from the repository root, with
# .gpu/flexsn-fuzz.xz and .gpu/flexsn-run.xz (stripped, xz) carried:
#   - flexsn-fuzz --cuda: 300 random cores, every kernel variant on the CPU
#     and the GPU against the reference interpreter and adjoint;
#   - compute-sanitizer memcheck and racecheck over the kernels of the
#     first cores of that smoke set;
#   - a scan with no ins (params only) on the GPU, inference and backward.
# Logs go to $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" build/bin
for t in flexsn-fuzz flexsn-run; do
  xz -dc ".gpu/$t.xz" > "build/bin/$t" && chmod +x "build/bin/$t" || exit 1
done
nvidia-smi -L | tee "$OUT/device.txt"
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
JOBS=$(( $(nproc) / 2 ))
echo "== flexsn-fuzz --cuda (300 cores, $JOBS workers)"
build/bin/flexsn-fuzz --count=300 --seed=1 --jobs="$JOBS" --cuda \
  --out="$OUT/fuzz-failures" 2>&1 | tee "$OUT/fuzz-cuda.log" | tail -3
SAN=$CUDA_HOME/bin/compute-sanitizer
for tool in memcheck racecheck; do
  n=$([ $tool = memcheck ] && echo 40 || echo 15)
  echo "== compute-sanitizer --tool $tool (cores #0-#$((n - 1)) of the smoke set)"
  "$SAN" --tool "$tool" --error-exitcode 99 --print-limit 20 \
    build/bin/flexsn-fuzz --count="$n" --seed=1 --cuda --no-minimize \
    --out="$OUT/fuzz-$tool" > "$OUT/$tool.log" 2>&1
  echo "exit $? ($tool)"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|flexsn-fuzz:" "$OUT/$tool.log" | tail -3
done
echo "== params-only scans on the GPU"
for f in no_ins_per_neuron no_ins_scalar scalar per_neuron; do
  for v in inference backward; do
    build/bin/flexsn-run test/Integration/Autodiff/params-only.mlir --func=$f \
      --backend=cuda --variant=$v --T=5 --ncl=1000 --seed=3 --check 2>&1 |
      tail -1 | sed "s/^/$f $v: /"
  done
done | tee "$OUT/params-only.log"
