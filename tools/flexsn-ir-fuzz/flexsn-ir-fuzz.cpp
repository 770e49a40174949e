//===- flexsn-ir-fuzz.cpp - libFuzzer target over the compiler ------------===//
//
// Feeds arbitrary bytes through what a user's IR meets: parse, verify,
// canonicalize, flexsn-differentiate, the manifest (and its JSON round
// trip), the CPU pipeline (to the LLVM
// dialect) and the GPU pipeline (to PTX, when libdevice is installed);
// and flexsn-affine-transfer (replace) with the CPU pipeline after it.
// Every stage may reject its input with a diagnostic; none may crash, hang
// or trip a sanitizer. Built with clang only (cmake
// -DFLEXSN_BUILD_IR_FUZZER=ON); see docs/testing.md for the command.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"
#include "flexsn/InitAllDialects.h"
#include "flexsn/Pipelines/Pipelines.h"
#include "flexsn/Target/Manifest.h"
#include "flexsn/Target/PTX.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include <cstdint>
#include <cstdlib>
#include <string>

#include <unistd.h>

using namespace mlir;
using namespace mlir::flexsn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // Modules past 16 KiB add time, not coverage.
  if (size > (16u << 10))
    return 0;
  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry, MLIRContext::Threading::DISABLED);
  context.printOpOnDiagnostic(false);
  context.printStackTraceOnDiagnostic(false);
  context.loadAllAvailableDialects();
  // Diagnostics are the expected outcome of most inputs: drop them.
  ScopedDiagnosticHandler quiet(&context, [](Diagnostic &) {
    return success();
  });
  std::string text(reinterpret_cast<const char *>(data), size);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
  if (!module || failed(verify(*module)))
    return 0;

  PassManager canon(&context);
  canon.addPass(createCanonicalizerPass());
  if (failed(canon.run(*module)))
    return 0;
  // The primal and the differentiated module both go down both pipelines.
  OwningOpRef<ModuleOp> trained = module->clone();
  bool differentiated = succeeded(differentiateModule(*trained));
  for (ModuleOp m : {*module, differentiated ? *trained : ModuleOp()}) {
    if (!m)
      continue;
    // The manifest, and a round trip through its JSON.
    PipelineOptions options;
    if (FailureOr<Manifest> manifest =
            buildManifest(m, ManifestTarget::CUDA, options);
        succeeded(manifest)) {
      std::string json;
      llvm::raw_string_ostream os(json);
      printManifest(*manifest, os);
      llvm::Expected<Manifest> back = parseManifest(json);
      if (!back || back->kernels.size() != manifest->kernels.size())
        __builtin_trap();
    }
    OwningOpRef<ModuleOp> cpu = m.clone();
    PassManager pm(&context);
    buildCPUPipeline(pm);
    (void)pm.run(*cpu);
    // The transfer functions of its affine scans (chunked_time's), lowered.
    OwningOpRef<ModuleOp> transfer = m.clone();
    PassManager tpm(&context);
    FlexSNAffineTransferOptions only;
    only.replace = true;
    tpm.addPass(createFlexSNAffineTransfer(only));
    buildCPUPipeline(tpm);
    (void)tpm.run(*transfer);
    static const bool hasLibdevice = [] {
      const char *home = std::getenv("CUDA_HOME");
      std::string path = std::string(home ? home : "/usr/local/cuda") +
                         "/nvvm/libdevice/libdevice.10.bc";
      return std::getenv("FLEXSN_FUZZ_NO_PTX") == nullptr &&
             access(path.c_str(), R_OK) == 0;
    }();
    if (hasLibdevice)
      (void)translateToPTX(m, options);
  }
  return 0;
}
