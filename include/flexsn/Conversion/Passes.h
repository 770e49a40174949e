//===- Passes.h - flexsn conversion passes ----------------------*- C++ -*-===//

#ifndef FLEXSN_CONVERSION_PASSES_H
#define FLEXSN_CONVERSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
namespace flexsn {

#define GEN_PASS_DECL
#include "flexsn/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "flexsn/Conversion/Passes.h.inc"

} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_CONVERSION_PASSES_H
