//===- flexsn-translate.cpp - flexsn kernels to PTX and manifests ---------===//
//
//   flexsn-translate --flexsn-to-ptx FILE.mlir           PTX of every kernel
//   flexsn-translate --flexsn-to-manifest FILE.mlir      CUDA kernel manifest
//   flexsn-translate --flexsn-to-cpu-manifest FILE.mlir  CPU kernel manifest
//
// `--options='chip=sm_80 neurons-per-thread=2 differentiate save-ops=...'`:
// the pipeline options (PipelineOptions), as flexsn-gpu-pipeline and the C
// API take them. The translations live in lib/Target.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Target/Translations.h"

#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

int main(int argc, char **argv) {
  mlir::flexsn::registerFlexSNTranslations();
  return mlir::failed(
      mlir::mlirTranslateMain(argc, argv, "flexsn translation tool"));
}
