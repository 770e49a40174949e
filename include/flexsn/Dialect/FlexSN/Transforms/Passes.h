//===- Passes.h - flexsn dialect transforms ---------------------*- C++ -*-===//

#ifndef FLEXSN_DIALECT_FLEXSN_TRANSFORMS_PASSES_H
#define FLEXSN_DIALECT_FLEXSN_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
namespace flexsn {

/// Attribute names shared by flexsn-differentiate, the lowerings, the
/// manifest and flexsn-run.
/// On a generated function: "forward" or "backward".
inline constexpr llvm::StringLiteral kKernelKindAttr = "flexsn.kernel";
/// On a generated function: the primal function's name.
inline constexpr llvm::StringLiteral kPrimalAttr = "flexsn.primal";
/// On arguments/results of generated functions: what the value is.
inline constexpr llvm::StringLiteral kRoleAttr = "flexsn.role";
inline constexpr llvm::StringLiteral kIndexAttr = "flexsn.index";
/// On primal arguments/results: no gradient wanted / given.
inline constexpr llvm::StringLiteral kNoGradAttr = "flexsn.no_grad";
/// On a body op: the training forward saves its result.
inline constexpr llvm::StringLiteral kSaveAttr = "flexsn.save";

#define GEN_PASS_DECL
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h.inc"

} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_DIALECT_FLEXSN_TRANSFORMS_PASSES_H
