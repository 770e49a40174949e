//===- flexsn-opt.cpp - flexsn pass driver --------------------------------===//
//
// mlir-opt for flexsn: parses .mlir, runs passes and pipelines, prints the
// result. Diagnostics carry source locations; errors exit with code 1.
//
//===----------------------------------------------------------------------===//

#include "flexsn/InitAllDialects.h"
#include "flexsn/InitAllPasses.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::flexsn::registerAllPasses();
  mlir::DialectRegistry registry;
  mlir::flexsn::registerAllDialects(registry);
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "flexsn optimizer driver\n", registry));
}
