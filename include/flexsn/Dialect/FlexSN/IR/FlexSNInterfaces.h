//===- FlexSNInterfaces.h - FlexSN op interfaces ----------------*- C++ -*-===//

#ifndef FLEXSN_DIALECT_FLEXSN_IR_FLEXSNINTERFACES_H
#define FLEXSN_DIALECT_FLEXSN_IR_FLEXSNINTERFACES_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"

#include "flexsn/Dialect/FlexSN/IR/FlexSNInterfaces.h.inc"

namespace mlir {
class DialectRegistry;
namespace flexsn {
/// Attaches the adjoint rules of the arith and math ops a scan body may use.
void registerAdjointExternalModels(DialectRegistry &registry);
} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_DIALECT_FLEXSN_IR_FLEXSNINTERFACES_H
