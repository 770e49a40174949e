//===- Passes.h - flexsn dialect transforms ---------------------*- C++ -*-===//

#ifndef FLEXSN_DIALECT_FLEXSN_TRANSFORMS_PASSES_H
#define FLEXSN_DIALECT_FLEXSN_TRANSFORMS_PASSES_H

#include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
namespace flexsn {

#define GEN_PASS_DECL
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h.inc"

} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_DIALECT_FLEXSN_TRANSFORMS_PASSES_H
