//===- Passes.h - flexsn conversion passes ----------------------*- C++ -*-===//

#ifndef FLEXSN_CONVERSION_PASSES_H
#define FLEXSN_CONVERSION_PASSES_H

#include "mlir/Pass/Pass.h"

// The dialects the passes create ops of: declared here, included where the
// passes are defined (as upstream's Passes.h do).
namespace mlir {
namespace arith {
class ArithDialect;
} // namespace arith
namespace cf {
class ControlFlowDialect;
} // namespace cf
namespace func {
class FuncDialect;
} // namespace func
namespace gpu {
class GPUDialect;
} // namespace gpu
namespace LLVM {
class LLVMDialect;
} // namespace LLVM
namespace memref {
class MemRefDialect;
} // namespace memref
namespace scf {
class SCFDialect;
} // namespace scf
} // namespace mlir

namespace mlir {
namespace flexsn {

/// The most time steps of loads a scan kernel may keep in flight per
/// thread (the passes' and pipelines' `prefetch` option, the tools'
/// --prefetch).
constexpr unsigned kMaxPrefetchDepth = 32;

#define GEN_PASS_DECL
#include "flexsn/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "flexsn/Conversion/Passes.h.inc"

} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_CONVERSION_PASSES_H
