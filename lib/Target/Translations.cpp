//===- Translations.cpp - flexsn translations -----------------------------===//

#include "flexsn/Target/Translations.h"

#include "flexsn/InitAllDialects.h"
#include "flexsn/Target/Manifest.h"
#include "flexsn/Target/PTX.h"
#include "flexsn/Runtime/CUDA/PTXText.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/ManagedStatic.h"

using namespace mlir;
using namespace mlir::flexsn;

namespace {
struct TranslationCLOptions {
  llvm::cl::opt<std::string> options{
      "options",
      llvm::cl::desc("pipeline options as key=value words, e.g. "
                     "'chip=sm_80 neurons-per-thread=2 differentiate "
                     "save-ops=flexsn.spike' (the keys of "
                     "flexsn-gpu-pipeline)"),
      llvm::cl::init("")};
  llvm::cl::opt<std::string> ptxEntry{
      "ptx-entry",
      llvm::cl::desc("with --flexsn-to-ptx: print the module the runtime "
                     "loads for this one entry (the other entries left out)"),
      llvm::cl::init("")};
};
} // namespace

static llvm::ManagedStatic<TranslationCLOptions> clOptions;

/// The options of `--options` and the module they prepare (differentiated
/// in place when asked).
static FailureOr<std::pair<ModuleOp, std::unique_ptr<PipelineOptions>>>
prepare(Operation *op) {
  // Errors name their op by location; a note that prints the op would
  // dump the whole module.
  op->getContext()->printOpOnDiagnostic(false);
  auto module = dyn_cast<ModuleOp>(op);
  if (!module)
    return op->emitError("expected a builtin.module");
  std::string error;
  std::unique_ptr<PipelineOptions> options =
      PipelineOptions::parse(clOptions->options, error);
  if (!options)
    return module.emitError("--options: ") << error;
  if (failed(prepareModule(module, *options)))
    return failure();
  return std::make_pair(module, std::move(options));
}

static LogicalResult writeManifest(Operation *op, raw_ostream &os,
                                   ManifestTarget target) {
  auto prepared = prepare(op);
  if (failed(prepared))
    return failure();
  FailureOr<Manifest> manifest =
      buildManifest(prepared->first, target, *prepared->second);
  if (failed(manifest))
    return failure();
  printManifest(*manifest, os);
  return success();
}

void mlir::flexsn::registerFlexSNTranslations() {
  *clOptions; // registers --options
  auto dialects = [](DialectRegistry &registry) {
    registerAllDialects(registry);
  };
  TranslateFromMLIRRegistration(
      "flexsn-to-ptx", "flexsn kernel functions to PTX",
      [](Operation *op, raw_ostream &os) -> LogicalResult {
        auto prepared = prepare(op);
        if (failed(prepared))
          return failure();
        FailureOr<std::string> ptx =
            translateToPTX(prepared->first, *prepared->second);
        if (failed(ptx))
          return failure();
        if (clOptions->ptxEntry.empty()) {
          os << *ptx;
          return success();
        }
        std::optional<std::string> only =
            cuda::extractPTXEntry(*ptx, clOptions->ptxEntry);
        if (!only)
          return op->emitError() << "--ptx-entry: the PTX has no entry '"
                                 << clOptions->ptxEntry << "'";
        os << *only;
        return success();
      },
      dialects);
  TranslateFromMLIRRegistration(
      "flexsn-to-manifest",
      "flexsn kernel functions to the CUDA kernel manifest (JSON)",
      [](Operation *op, raw_ostream &os) {
        return writeManifest(op, os, ManifestTarget::CUDA);
      },
      dialects);
  TranslateFromMLIRRegistration(
      "flexsn-to-cpu-manifest",
      "flexsn kernel functions to the CPU kernel manifest (JSON)",
      [](Operation *op, raw_ostream &os) {
        return writeManifest(op, os, ManifestTarget::CPU);
      },
      dialects);
}
