//===- FlexSNDialect.h - FlexSN dialect -------------------------*- C++ -*-===//

#ifndef FLEXSN_DIALECT_FLEXSN_IR_FLEXSNDIALECT_H
#define FLEXSN_DIALECT_FLEXSN_IR_FLEXSNDIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Dialect.h"

#include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.h.inc"

#endif // FLEXSN_DIALECT_FLEXSN_IR_FLEXSNDIALECT_H
