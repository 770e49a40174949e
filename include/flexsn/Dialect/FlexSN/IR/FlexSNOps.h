//===- FlexSNOps.h - FlexSN operations --------------------------*- C++ -*-===//

#ifndef FLEXSN_DIALECT_FLEXSN_IR_FLEXSNOPS_H
#define FLEXSN_DIALECT_FLEXSN_IR_FLEXSNOPS_H

#include "flexsn/Dialect/FlexSN/IR/FlexSNAttrs.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNInterfaces.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir {
namespace flexsn {
class YieldOp;
} // namespace flexsn
} // namespace mlir

#define GET_OP_CLASSES
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h.inc"

#endif // FLEXSN_DIALECT_FLEXSN_IR_FLEXSNOPS_H
