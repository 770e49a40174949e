//===- FlexSNAttrs.h - FlexSN attributes ------------------------*- C++ -*-===//

#ifndef FLEXSN_DIALECT_FLEXSN_IR_FLEXSNATTRS_H
#define FLEXSN_DIALECT_FLEXSN_IR_FLEXSNATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include "flexsn/Dialect/FlexSN/IR/FlexSNEnums.h.inc"

namespace mlir {
namespace flexsn {

/// What a surrogate parameter may be.
enum class ParamRange { Any, Positive, GreaterThanOne, PositiveInteger };

struct SurrogateParamInfo {
  llvm::StringLiteral name;
  double defaultValue;
  ParamRange range;
};

/// One row of the surrogate table: the family's parameters in order.
struct SurrogateInfo {
  SurrogateKind kind;
  llvm::ArrayRef<SurrogateParamInfo> params;
};

/// The table row of `kind`.
const SurrogateInfo &getSurrogateInfo(SurrogateKind kind);

/// Human-readable statement of a range ("> 0", ...), for diagnostics.
llvm::StringRef describeParamRange(ParamRange range);

/// Whether `value` lies in `range`.
bool isInParamRange(ParamRange range, double value);

} // namespace flexsn
} // namespace mlir

#define GET_ATTRDEF_CLASSES
#include "flexsn/Dialect/FlexSN/IR/FlexSNAttrs.h.inc"

#endif // FLEXSN_DIALECT_FLEXSN_IR_FLEXSNATTRS_H
