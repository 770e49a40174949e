//===- PTX.cpp - flexsn kernel modules to PTX -----------------------------===//

#include "flexsn/Target/PTX.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;
using namespace mlir::flexsn;

FailureOr<std::string>
mlir::flexsn::translateToPTX(ModuleOp module, const PipelineOptions &options) {
  // Errors here name their op by location; a note that prints the op would
  // dump the whole (lowered) module after each.
  struct QuietOps {
    MLIRContext *ctx;
    bool saved;
    ~QuietOps() { ctx->printOpOnDiagnostic(saved); }
  } quiet{module.getContext(), module.getContext()->shouldPrintOpOnDiagnostic()};
  quiet.ctx->printOpOnDiagnostic(false);
  if (std::string error = options.validate(); !error.empty())
    return module.emitError(error);
  OwningOpRef<ModuleOp> clone = module.clone();
  PassManager pm(module.getContext());
  buildGPUPipeline(pm, options);
  if (failed(pm.run(*clone)))
    return failure();
  std::string ptx;
  clone->walk([&](gpu::BinaryOp binary) {
    for (Attribute attr : binary.getObjects()) {
      auto object = cast<gpu::ObjectAttr>(attr);
      ptx += object.getObject().getValue().str();
    }
  });
  if (ptx.empty())
    return module.emitError("no GPU kernel was produced: the module holds no "
                            "flexsn.scan kernel function"),
           failure();
  // An unresolved external function cannot be loaded by the driver.
  SmallVector<StringRef> missing;
  StringRef rest = ptx;
  size_t pos;
  while ((pos = rest.find(".extern .func")) != StringRef::npos) {
    StringRef line = rest.substr(pos).split('\n').first;
    missing.push_back(line);
    rest = rest.substr(pos + line.size());
  }
  if (!missing.empty()) {
    InFlightDiagnostic diag = module.emitError()
                              << "the PTX calls " << missing.size()
                              << " unresolved external function(s); is "
                                 "libdevice at "
                              << options.getCUDAHome()
                              << "/nvvm/libdevice? Set CUDA_HOME.";
    for (StringRef m : missing)
      diag.attachNote() << m.trim();
    return failure();
  }
  return ptx;
}

