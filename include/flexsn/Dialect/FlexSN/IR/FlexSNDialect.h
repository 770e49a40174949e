//===- FlexSNDialect.h - FlexSN dialect -------------------------*- C++ -*-===//

#ifndef FLEXSN_DIALECT_FLEXSN_IR_FLEXSNDIALECT_H
#define FLEXSN_DIALECT_FLEXSN_IR_FLEXSNDIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Dialect.h"

#include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.h.inc"

namespace mlir {
namespace flexsn {

/// Discardable attributes of the dialect, shared by flexsn-differentiate,
/// canonicalization, the lowerings, the manifest and flexsn-run.
/// On a generated function: "forward" or "backward".
inline constexpr llvm::StringLiteral kKernelKindAttr = "flexsn.kernel";
/// On a generated function: the primal function's name.
inline constexpr llvm::StringLiteral kPrimalAttr = "flexsn.primal";
/// On arguments/results of generated functions: what the value is (an
/// ArgMeaning, FlexSNAttrs.td) and which one of its kind.
inline constexpr llvm::StringLiteral kRoleAttr = "flexsn.role";
inline constexpr llvm::StringLiteral kIndexAttr = "flexsn.index";
/// On primal arguments/results: no gradient wanted / given.
inline constexpr llvm::StringLiteral kNoGradAttr = "flexsn.no_grad";
/// On a lowered kernel function (func.func, llvm.func, gpu.func): which
/// kernel it is ("inference", "final_state", "forward", "backward").
inline constexpr llvm::StringLiteral kVariantAttr = "flexsn.variant";
/// On a body op: the training forward saves its result.
inline constexpr llvm::StringLiteral kSaveAttr = "flexsn.save";
/// On a scan, from flexsn-affine-states: per state, whether its update is
/// affine in the states, and which states it reads.
inline constexpr llvm::StringLiteral kAffineStatesAttr = "flexsn.affine_states";
inline constexpr llvm::StringLiteral kStateReadsAttr = "flexsn.state_reads";
/// On a flexsn.scan: its sequences hold chunks of steps side by side, each
/// neuron row `flexsn.chunk_width` wide (GPU kernels; see the op's doc).
inline constexpr llvm::StringLiteral kChunkWidthAttr = "flexsn.chunk_width";
/// On a flexsn.scan: the float type its states are stored in outside
/// chunk borders (see the op's doc).
inline constexpr llvm::StringLiteral kStateStorageAttr = "flexsn.state_storage";

} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_DIALECT_FLEXSN_IR_FLEXSNDIALECT_H
