//===- Manifest.h - The kernel manifest -------------------------*- C++ -*-===//
//
// What a caller needs to launch the kernels of a compiled module: for each
// kernel its variant, its arguments in launch order (role, storage type,
// shape rule, byte size, what it holds in the user's terms) and which
// gradients its function wants; for CUDA the chip and launch geometry.
// Built as a typed structure from the module (no PTX and no CUDA needed),
// then serialized as JSON ("flexsn-manifest" version 4) and read back.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_TARGET_MANIFEST_H
#define FLEXSN_TARGET_MANIFEST_H

#include "flexsn/Dialect/FlexSN/Utils/KernelABI.h"
#include "flexsn/Pipelines/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir {
namespace flexsn {

/// One kernel argument, as the manifest describes it.
struct ManifestArg {
  KernelArgRole role = KernelArgRole::Input;
  unsigned index = 0;
  bool isPointer = false;
  /// Storage type ("f32", "bf16", ...) of pointers; "i64" for sizes.
  std::string dtype;
  unsigned elementBytes = 0;
  ArgShape shape = ArgShape::Scalar;
  /// What the pointer holds in the terms of the source function.
  ArgMeaning meaning = ArgMeaning::Input;
  unsigned meaningIndex = 0;
  /// Atomically accumulated into (role sum_state): zero it first.
  bool accumulate = false;
  /// May be null, read as zeros (a gradient the caller does not have).
  bool optional = false;
};

/// One kernel of a module.
struct ManifestKernel {
  std::string name, source, primal, computeType;
  /// "inference", "final_state", "forward" or "backward".
  std::string variant;
  /// A chunk repair kernel (getRepairKernelName): the kernel whose chunks
  /// it repairs, in place, with that kernel's arguments; else empty.
  std::string repairs;
  bool reverse = false;
  unsigned numInputs = 0, numStates = 0, numOutputs = 0, numParams = 0;
  /// Over the primal function's inputs, initial states and params, in that
  /// order: whether a gradient is wanted (no `flexsn.no_grad`; a param
  /// folded to a constant wants none).
  llvm::SmallVector<bool> requiresGrad;
  /// CUDA only.
  std::optional<LaunchGeometry> geometry;
  /// CUDA at more than one neuron per thread: the one-neuron entry
  /// (getScalarEntryName), for the launches the vector entry cannot take.
  std::string scalarEntry;
  /// CUDA, for kernels that read few bytes a step: the one-neuron entry
  /// with `deepPrefetch` steps of reads in flight (getDeepEntryName,
  /// getDeepEntryPrefetch), for launches with few threads per SM and a long
  /// T; empty and 0 when there is none.
  std::string deepEntry;
  unsigned deepPrefetch = 0;
  /// In launch order: pointers, then T and NCL.
  llvm::SmallVector<ManifestArg> args;
  unsigned getNumPointers() const;
};

enum class ManifestTarget { CPU, CUDA };

struct Manifest {
  ManifestTarget target = ManifestTarget::CPU;
  /// CUDA only.
  std::string chip;
  std::vector<ManifestKernel> kernels;
  /// The kernel named `name`, or null.
  const ManifestKernel *lookup(llvm::StringRef name) const;
};

/// Describes every kernel of `module` (prepared, as the targets compile it:
/// after canonicalization). `target` CUDA takes chip and launch geometry
/// from `options`. Fails, with a diagnostic, on a module whose scans are
/// not in kernel form or hold ops without a lowering.
FailureOr<Manifest> buildManifest(ModuleOp module, ManifestTarget target,
                                  const PipelineOptions &options);

/// Writes `manifest` as JSON.
void printManifest(const Manifest &manifest, llvm::raw_ostream &os);

/// Reads back what printManifest wrote; an error names what is malformed.
llvm::Expected<Manifest> parseManifest(llvm::StringRef json);

} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_TARGET_MANIFEST_H
