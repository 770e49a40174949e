//===- FlexSNDialect.cpp - FlexSN dialect ---------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"

using namespace mlir;
using namespace mlir::flexsn;

#include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.cpp.inc"

void FlexSNDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.cpp.inc"
      >();
  registerAttributes();
}

Operation *FlexSNDialect::materializeConstant(OpBuilder &builder,
                                              Attribute value, Type type,
                                              Location loc) {
  return arith::ConstantOp::materialize(builder, value, type, loc);
}
