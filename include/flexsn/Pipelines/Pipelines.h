//===- Pipelines.h - Named lowering pipelines and targets -------*- C++ -*-===//
//
// The pass pipelines from a flexsn kernel module to CPU-ready LLVM dialect
// and to PTX, and the two products flexsn-translate emits: PTX text and the
// kernel manifest (JSON).
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_PIPELINES_PIPELINES_H
#define FLEXSN_PIPELINES_PIPELINES_H

#include "flexsn/Dialect/FlexSN/Utils/KernelABI.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

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

/// One kernel argument, as the manifest describes it.
struct ManifestArg {
  /// ABI role ("input", "state_seq", ..., "T", "NCL").
  std::string role;
  unsigned index = 0;
  bool isPointer = false;
  /// Storage type ("f32", "bf16", ...) of pointers; "i64" for sizes.
  std::string dtype;
  unsigned elementBytes = 0;
  ArgShape shape = ArgShape::Scalar;
  /// What the pointer holds in the terms of the source function
  /// (input #0, grad_output #1, ...).
  ArgMeaning meaning = ArgMeaning::Input;
  unsigned meaningIndex = 0;
  /// Atomically accumulated into (role sum_state): zero it first.
  bool accumulate = false;
};

/// One kernel of a module, as the manifest describes it.
struct ManifestKernel {
  std::string name, source, primal, variant, computeType;
  bool reverse = false;
  unsigned numInputs = 0, numStates = 0, numOutputs = 0, numParams = 0;
  /// In launch order: pointers, then T and NCL.
  llvm::SmallVector<ManifestArg> args;
  unsigned getNumPointers() const;
};

/// Describes every kernel of `module` (after canonicalization, as the
/// lowerings see it). Fails, with a diagnostic, on a module whose scans are
/// not in kernel form or hold ops without a lowering.
mlir::FailureOr<std::vector<ManifestKernel>>
collectManifest(mlir::ModuleOp module);

/// Serializes `kernels` as the kernel manifest (JSON, format
/// "flexsn-manifest" version 3). `gpu` is the launch configuration of CUDA
/// kernels; null for the CPU target.
void serializeManifest(llvm::ArrayRef<ManifestKernel> kernels,
                       const GPUOptions *gpu, llvm::raw_ostream &os);

/// Reads back a manifest serializeManifest wrote: its kernels, and in `gpu`
/// the chip and launch geometry of a CUDA manifest. Returns false and sets
/// `error` when the text is not such a manifest.
bool parseManifest(llvm::StringRef json, std::vector<ManifestKernel> &kernels,
                   GPUOptions &gpu, bool &isCUDA, std::string &error);

/// collectManifest + serializeManifest for the CUDA target.
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
