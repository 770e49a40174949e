//===- PTX.cpp - flexsn kernel modules to PTX -----------------------------===//

#include "flexsn/Target/PTX.h"

#include "flexsn/Runtime/CUDA/PTXText.h"

#include "mlir/Dialect/GPU/IR/CompilationInterfaces.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Threading.h"
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
  buildGPUPipeline(pm, options, /*serialize=*/false);
  if (failed(pm.run(*clone)))
    return failure();
  // Each kernel entry is a gpu.module of its own: LLVM's optimizer and the
  // NVPTX back end (most of the time) run on them in parallel, then the
  // modules' PTX is merged into the program's one module.
  SmallVector<gpu::GPUModuleOp> gpuModules(clone->getOps<gpu::GPUModuleOp>());
  if (gpuModules.empty())
    return module.emitError("no GPU kernel was produced: the module holds no "
                            "flexsn.scan kernel function"),
           failure();
  SymbolTable symbols(*clone);
  gpu::TargetOptions targetOptions(
      options.getCUDAHome(), /*librariesToLink=*/{}, /*cmdOptions=*/"",
      /*elfSection=*/"", gpu::CompilationTarget::Assembly,
      [&]() -> SymbolTable * { return &symbols; });
  SmallVector<std::string> parts(gpuModules.size());
  MLIRContext *ctx = module.getContext();
  ParallelDiagnosticHandler diagnostics(ctx);
  LogicalResult serialized = failableParallelForEachN(
      ctx, 0, gpuModules.size(), [&](size_t i) -> LogicalResult {
        diagnostics.setOrderIDForThread(i);
        gpu::GPUModuleOp m = gpuModules[i];
        auto target = dyn_cast_or_null<gpu::TargetAttrInterface>(
            m.getTargetsAttr() ? m.getTargetsAttr()[0] : Attribute());
        std::optional<SmallVector<char, 0>> object =
            target ? target.serializeToObject(m, targetOptions)
                   : std::nullopt;
        if (object) // PTX text, possibly NUL-terminated
          parts[i] = StringRef(object->data(), object->size())
                         .rtrim(StringRef("\0", 1))
                         .str();
        else
          m.emitError("cannot compile kernel entry '")
              << m.getName() << "' to PTX";
        diagnostics.eraseOrderIDForThread();
        return success(object.has_value());
      });
  if (failed(serialized))
    return failure();
  std::optional<std::string> merged = cuda::mergePTXModules(parts);
  if (!merged)
    return module.emitError("internal error: the PTX of the kernel entries "
                            "does not merge into one module"),
           failure();
  std::string ptx = std::move(*merged);
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

