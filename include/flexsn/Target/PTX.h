//===- PTX.h - flexsn kernel modules to PTX ---------------------*- C++ -*-===//

#ifndef FLEXSN_TARGET_PTX_H
#define FLEXSN_TARGET_PTX_H

#include "flexsn/Pipelines/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace mlir {
namespace flexsn {

/// Runs the GPU pipeline on a clone of `module` (already prepared:
/// differentiated when wanted) and returns the PTX of every kernel. Fails
/// with a diagnostic on a chip that is not an NVIDIA architecture, and
/// when the PTX still calls an unresolved external function (libdevice not
/// found, or an op with no device implementation).
FailureOr<std::string> translateToPTX(ModuleOp module,
                                      const PipelineOptions &options);

} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_TARGET_PTX_H
