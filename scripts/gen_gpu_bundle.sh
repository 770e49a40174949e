#!/usr/bin/env bash
# Compiles every example (inference and training kernels) to PTX and a
# manifest, with f32 and bf16 storage,
# into .gpu/ for bench/gpu_ptx_check.py on the GPU machine (which has no
# MLIR). Usage: scripts/gen_gpu_bundle.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OUT=.gpu
rm -rf "$OUT"; mkdir -p "$OUT"
for f in examples/*.mlir; do
  name=$(basename "$f" .mlir)
  for dt in f32 bf16; do
    src="$OUT/$name.$dt.mlir"
    if [ "$dt" = f32 ]; then cp "$f" "$src"; else sed 's/xf32>/xbf16>/g' "$f" > "$src"; fi
    "$BUILD/bin/flexsn-translate" --flexsn-to-ptx --options='differentiate' "$src" -o "$OUT/$name.$dt.ptx"
    "$BUILD/bin/flexsn-translate" --flexsn-to-manifest --options='differentiate' "$src" -o "$OUT/$name.$dt.json"
  done
done
ls "$OUT" | wc -l
