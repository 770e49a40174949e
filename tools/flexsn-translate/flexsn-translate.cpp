//===- flexsn-translate.cpp - flexsn kernels to PTX and manifests ---------===//
//
//   flexsn-translate --flexsn-to-ptx FILE.mlir       PTX text of every kernel
//   flexsn-translate --flexsn-to-manifest FILE.mlir  kernel manifest (JSON)
//
// Options: --chip=sm_90 --neurons-per-thread=4 --block-size=256
//          --cuda-home=/usr/local/cuda
//          --differentiate [--save-ops=flexsn.spike,...]: also the training
//          forward and backward kernels (flexsn-differentiate)
//
//===----------------------------------------------------------------------===//

#include "flexsn/InitAllDialects.h"
#include "flexsn/Pipelines/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"

using namespace mlir;

static llvm::cl::opt<std::string> clChip("chip",
                                         llvm::cl::desc("GPU chip (sm_80, sm_90, ...)"),
                                         llvm::cl::init("sm_90"));
static llvm::cl::opt<unsigned>
    clNeuronsPerThread("neurons-per-thread",
                       llvm::cl::desc("neurons per GPU thread (1, 2, 4, 8)"),
                       llvm::cl::init(4));
static llvm::cl::opt<unsigned>
    clBlockSize("block-size", llvm::cl::desc("threads per block"),
                llvm::cl::init(256));
static llvm::cl::opt<std::string>
    clCudaHome("cuda-home",
               llvm::cl::desc("CUDA toolkit root (default: $CUDA_HOME, else "
                              "/usr/local/cuda)"),
               llvm::cl::init(""));

static llvm::cl::opt<bool> clDifferentiate(
    "differentiate",
    llvm::cl::desc("run flexsn-differentiate first: also emit the training "
                   "forward and backward kernels"));
static llvm::cl::list<std::string> clSaveOps(
    "save-ops", llvm::cl::CommaSeparated,
    llvm::cl::desc("with --differentiate: body ops whose results the "
                   "training forward saves"));

/// The module to translate, with --differentiate applied in place.
static FailureOr<ModuleOp> prepare(Operation *op) {
  auto module = dyn_cast<ModuleOp>(op);
  if (!module)
    return op->emitError("expected a builtin.module");
  if (!clDifferentiate) {
    if (!clSaveOps.empty())
      return module.emitError("--save-ops needs --differentiate");
    return module;
  }
  if (failed(flexsn::differentiateModule(
          module,
          std::vector<std::string>(clSaveOps.begin(), clSaveOps.end()))))
    return failure();
  return module;
}

static flexsn::GPUOptions getOptions() {
  flexsn::GPUOptions options;
  options.chip = clChip;
  options.neuronsPerThread = clNeuronsPerThread;
  options.blockSize = clBlockSize;
  options.cudaHome = clCudaHome;
  return options;
}

int main(int argc, char **argv) {
  auto registerDialects = [](DialectRegistry &registry) {
    flexsn::registerAllDialects(registry);
  };
  TranslateFromMLIRRegistration toPTX(
      "flexsn-to-ptx", "flexsn kernel functions to PTX",
      [](Operation *op, raw_ostream &os) -> LogicalResult {
        FailureOr<ModuleOp> module = prepare(op);
        if (failed(module))
          return failure();
        FailureOr<std::string> ptx =
            flexsn::translateToPTX(*module, getOptions());
        if (failed(ptx))
          return failure();
        os << *ptx;
        return success();
      },
      registerDialects);
  TranslateFromMLIRRegistration toManifest(
      "flexsn-to-manifest", "flexsn kernel functions to a kernel manifest",
      [](Operation *op, raw_ostream &os) -> LogicalResult {
        FailureOr<ModuleOp> module = prepare(op);
        if (failed(module))
          return failure();
        return flexsn::writeManifest(*module, getOptions(), os);
      },
      registerDialects);
  return failed(mlirTranslateMain(argc, argv, "flexsn translation tool"));
}
