//===- Pipelines.h - Named lowering pipelines and targets -------*- C++ -*-===//
//
// The pass pipelines from a flexsn kernel module to CPU-ready LLVM dialect
// and to PTX, and the two products flexsn-translate emits: PTX text and the
// kernel manifest (JSON).
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_PIPELINES_PIPELINES_H
#define FLEXSN_PIPELINES_PIPELINES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/LLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mlir {
namespace flexsn {

/// Options of the GPU path.
struct GPUOptions {
  std::string chip = "sm_90";
  unsigned optLevel = 3;
  unsigned neuronsPerThread = 4;
  unsigned blockSize = 256;
  /// CUDA toolkit root (libdevice); empty: $CUDA_HOME, else /usr/local/cuda.
  std::string cudaHome;
};

/// flexsn kernel module -> LLVM dialect for the CPU (ExecutionEngine).
void buildCPUPipeline(mlir::OpPassManager &pm);

/// flexsn kernel module -> gpu.binary holding PTX.
void buildGPUPipeline(mlir::OpPassManager &pm, const GPUOptions &options);

/// Runs the GPU pipeline on a clone of `module` and returns the PTX. Fails
/// (with a diagnostic) when the PTX still calls an unresolved external
/// function (libdevice not found, or an op with no device implementation).
mlir::FailureOr<std::string> translateToPTX(mlir::ModuleOp module,
                                            const GPUOptions &options);

/// Writes the kernel manifest (JSON) of `module`, before lowering: for every
/// kernel its name, source function, variant, argument roles and dtypes in
/// order, counts, and launch configuration.
mlir::LogicalResult writeManifest(mlir::ModuleOp module,
                                  const GPUOptions &options,
                                  llvm::raw_ostream &os);

/// Registers `flexsn-cpu-pipeline` and `flexsn-gpu-pipeline` for flexsn-opt.
void registerPipelines();

/// Canonicalizes `module` and runs flexsn-differentiate on it (adds the
/// `_forward` and `_backward` kernel functions of every kernel function);
/// `saveOps` is the pass's save-ops option.
mlir::LogicalResult differentiateModule(mlir::ModuleOp module,
                                        llvm::ArrayRef<std::string> saveOps = {});

} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_PIPELINES_PIPELINES_H
