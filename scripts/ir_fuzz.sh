#!/usr/bin/env bash
# The IR fuzzer: libFuzzer (clang) over parse -> verify -> canonicalize ->
# flexsn-differentiate -> CPU pipeline -> GPU pipeline/PTX, with ASan and
# UBSan. Seeds: examples/ and every lit test input (split at `// -----`).
#   scripts/ir_fuzz.sh [SECONDS]      (default 600)
# Builds build-fuzz/ with clang-22 (installs clang-22 and its libFuzzer
# runtime from Debian if missing). Crashes, hangs (> 60 s on one input:
# the largest seeds take about 10 s under ASan+UBSan)
# and sanitizer reports land in build-fuzz/ir-fuzz/ as crash-*/timeout-*.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${1:-600}
for p in clang-22 libclang-rt-22-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || {
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$p"; }
done
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang-22 CXX=clang++-22 cmake -G Ninja -S . -B build-fuzz \
    -DCMAKE_BUILD_TYPE=Release -DFLEXSN_BUILD_IR_FUZZER=ON \
    -DFLEXSN_ENABLE_SANITIZERS=ON \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit
fi
ninja -C build-fuzz flexsn-ir-fuzz
WORK=build-fuzz/ir-fuzz
mkdir -p "$WORK/corpus" "$WORK/seeds"
python3 - "$WORK/seeds" <<'PY'
import pathlib, sys
out = pathlib.Path(sys.argv[1]); n = 0
for f in sorted(pathlib.Path('examples').glob('*.mlir')) + sorted(pathlib.Path('test').rglob('*.mlir')):
    for part in f.read_text().split('// -----'):
        if 'func.func' in part and len(part) < 16384:
            (out / f'seed{n:04d}.mlir').write_text(part); n += 1
print(f'{n} seeds')
PY
cat > "$WORK/mlir.dict" <<'DICT'
"flexsn.scan"
"flexsn.yield"
"flexsn.spike"
"flexsn.detach"
"surrogate"
"ins("
"states("
"params("
"lagged("
"lagged_init("
"reverse"
"final_states"
"sum_states"
"tensor<?x?xf32>"
"tensor<?xf32>"
"tensor<?x?xbf16>"
"tensor<?xf16>"
"tensor<f32>"
"f64"
"bf16"
"arith.addf"
"arith.mulf"
"arith.divf"
"arith.cmpf"
"arith.select"
"math.exp"
"math.atan2"
"func.func"
"return"
"^bb0("
"<atan>"
"<sigmoid, alpha = "
"{flexsn.kernel = \"forward\"}"
"flexsn.role"
"flexsn.index"
"flexsn.primal"
DICT
cd "$WORK"
# Findings of an earlier run are not this run's: keep them aside.
mkdir -p earlier
mv crash-* timeout-* oom-* slow-unit-* earlier/ 2>/dev/null || true
ASAN_OPTIONS=allow_user_poisoning=0:detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  ../bin/flexsn-ir-fuzz corpus seeds -dict=mlir.dict -max_total_time="$SECONDS_TO_RUN" \
  -timeout=60 -rss_limit_mb=6144 -max_len=16384 -print_final_stats=1 2>&1 | tee ir-fuzz.log | \
  grep -E "^#[0-9]+ +(INITED|DONE|pulse)|ERROR|SUMMARY|crash-|timeout-|stat::" || true
# allow_user_poisoning=0: LLVM's headers poison BumpPtrAllocator slabs in
# our instrumented code while the uninstrumented LLVM archives do not
# unpoison them (a false use-after-poison on the first MLIRContext).
if compgen -G "crash-*" > /dev/null || compgen -G "timeout-*" > /dev/null ||
   compgen -G "oom-*" > /dev/null; then
  ls crash-* timeout-* oom-* 2>/dev/null
  echo "ir-fuzz: FINDINGS above"; exit 1
fi
echo "ir-fuzz: ${SECONDS_TO_RUN} s, no crash, no hang, no sanitizer report"
