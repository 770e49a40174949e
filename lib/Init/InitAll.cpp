//===- InitAll.cpp - Registration of dialects and passes ------------------===//

#include "flexsn/InitAllDialects.h"
#include "flexsn/InitAllPasses.h"

#include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"

void flexsn::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<mlir::flexsn::FlexSNDialect, mlir::arith::ArithDialect,
                  mlir::func::FuncDialect, mlir::math::MathDialect,
                  mlir::tensor::TensorDialect>();
}

void flexsn::registerAllPasses() {
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
}
