//===- Passes.h - flexsn dialect transforms ---------------------*- C++ -*-===//

#ifndef FLEXSN_DIALECT_FLEXSN_TRANSFORMS_PASSES_H
#define FLEXSN_DIALECT_FLEXSN_TRANSFORMS_PASSES_H

#include "mlir/Pass/Pass.h"

// The dialects the passes create ops of: declared here, included where the
// passes are defined (as upstream's Passes.h do).
namespace mlir {
namespace arith {
class ArithDialect;
} // namespace arith
namespace func {
class FuncDialect;
} // namespace func
namespace math {
class MathDialect;
} // namespace math
namespace tensor {
class TensorDialect;
} // namespace tensor
} // namespace mlir

namespace mlir {
namespace flexsn {

#define GEN_PASS_DECL
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h.inc"

} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_DIALECT_FLEXSN_TRANSFORMS_PASSES_H
