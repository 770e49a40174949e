//===- Pipelines.cpp - Named lowering pipelines and targets ---------------===//

#include "flexsn/Pipelines/Pipelines.h"

#include "flexsn/Conversion/Passes.h"
#include "flexsn/Conversion/ScanKernel.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/JSON.h"

#include <cstdlib>

using namespace mlir;
using namespace mlir::flexsn;

static std::string cudaHomeOf(const GPUOptions &options) {
  if (!options.cudaHome.empty())
    return options.cudaHome;
  if (const char *env = std::getenv("CUDA_HOME"))
    return env;
  return "/usr/local/cuda";
}

void mlir::flexsn::buildCPUPipeline(OpPassManager &pm) {
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createConvertFlexSNToSCF());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createSCFToControlFlowPass());
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  // LLVM intrinsics where they exist; libm calls for the rest (erf, tan,
  // atan, ...), which the JIT resolves from the process.
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void mlir::flexsn::buildGPUPipeline(OpPassManager &pm, const GPUOptions &options) {
  pm.addPass(createCanonicalizerPass());
  ConvertFlexSNToGPUOptions toGPU;
  toGPU.neuronsPerThread = options.neuronsPerThread;
  toGPU.blockSize = options.blockSize;
  pm.addPass(createConvertFlexSNToGPU(toGPU));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  target.optLevel = options.optLevel;
  pm.addPass(createGpuNVVMAttachTarget(target));
  OpPassManager &gpuPm = pm.nest<gpu::GPUModuleOp>();
  gpuPm.addPass(createSCFToControlFlowPass());
  gpuPm.addPass(createConvertGpuOpsToNVVMOps());
  gpuPm.addPass(createCanonicalizerPass());
  gpuPm.addPass(createCSEPass());
  gpuPm.addPass(createReconcileUnrealizedCastsPass());
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "isa";
  binary.toolkitPath = cudaHomeOf(options);
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

FailureOr<std::string> mlir::flexsn::translateToPTX(ModuleOp module,
                                              const GPUOptions &options) {
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
                              << cudaHomeOf(options)
                              << "/nvvm/libdevice? Set CUDA_HOME.";
    for (StringRef m : missing)
      diag.attachNote() << m.trim();
    return failure();
  }
  return ptx;
}

static std::string typeName(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  type.print(os);
  return s;
}

LogicalResult mlir::flexsn::writeManifest(ModuleOp module, const GPUOptions &options,
                                    llvm::raw_ostream &os) {
  // The kernels are built after canonicalization (which may drop unused
  // operands): describe them from the same canonical form.
  OwningOpRef<ModuleOp> canonical = module.clone();
  PassManager pm(module.getContext());
  pm.addPass(createCanonicalizerPass());
  if (failed(pm.run(*canonical)))
    return failure();
  SmallVector<ScanOp> scans;
  if (failed(collectKernelScans(*canonical, "GPU", scans)))
    return failure();
  llvm::json::OStream j(os, 2);
  j.object([&] {
    j.attribute("format", "flexsn-manifest");
    j.attribute("version", 2);
    j.attribute("chip", options.chip);
    j.attributeArray("kernels", [&] {
      for (ScanOp scan : scans) {
        auto func = cast<func::FuncOp>(scan->getParentOp());
        auto primal = func->getAttrOfType<FlatSymbolRefAttr>(kPrimalAttr);
        for (const KernelSpec &spec : getKernelSpecs(scan)) {
          j.object([&] {
            j.attribute("name", spec.name);
            j.attribute("source", func.getSymName());
            if (primal)
              j.attribute("primal", primal.getValue());
            j.attribute("variant", spec.kind);
            j.attribute("reverse", scan.getReverse());
            j.attribute("compute_type", typeName(scan.getComputeType()));
            j.attribute("num_inputs", scan.getNumInputs());
            j.attribute("num_states", scan.getNumStates());
            j.attribute("num_outputs", scan.getNumOutputs());
            j.attribute("num_params", scan.getNumParams());
            j.attribute("block_size", options.blockSize);
            j.attribute("neurons_per_thread", options.neuronsPerThread);
            j.attribute("grid", "ceil(NCL / (block_size * neurons_per_thread))");
            // In launch order; `meaning` says what each pointer holds (for
            // a backward: which forward tensor or gradient it reads).
            j.attributeArray("args", [&] {
              for (const KernelArg &arg :
                   getKernelABI(scan, spec.variant, /*cpu=*/false)) {
                j.object([&] {
                  j.attribute("role", stringifyKernelArgRole(arg.role));
                  j.attribute("index", arg.index);
                  j.attribute("kind", arg.isPointer() ? "ptr" : "i64");
                  j.attribute("dtype", typeName(arg.type));
                  if (!arg.isPointer())
                    return;
                  ArgMeaning m = describeKernelArg(scan, arg);
                  j.attribute("meaning", m.role);
                  j.attribute("meaning_index", m.index);
                  if (arg.role == KernelArgRole::SumState)
                    j.attribute("accumulate", true);
                });
              }
            });
          });
        }
      }
    });
  });
  os << "\n";
  return success();
}

namespace {
struct GPUPipelineOptions : public PassPipelineOptions<GPUPipelineOptions> {
  Option<std::string> chip{*this, "chip", llvm::cl::desc("target chip"),
                           llvm::cl::init("sm_90")};
  Option<unsigned> optLevel{*this, "O", llvm::cl::desc("PTX opt level"),
                            llvm::cl::init(3)};
  Option<unsigned> neuronsPerThread{*this, "neurons-per-thread",
                                    llvm::cl::desc("neurons per thread"),
                                    llvm::cl::init(4)};
  Option<unsigned> blockSize{*this, "block-size",
                             llvm::cl::desc("threads per block"),
                             llvm::cl::init(256)};
  Option<std::string> cudaHome{*this, "cuda-home",
                               llvm::cl::desc("CUDA toolkit root"),
                               llvm::cl::init("")};
};
} // namespace

void mlir::flexsn::registerPipelines() {
  PassPipelineRegistration<>(
      "flexsn-cpu-pipeline",
      "Lower flexsn kernel functions to LLVM dialect for the CPU JIT",
      [](OpPassManager &pm) { buildCPUPipeline(pm); });
  PassPipelineRegistration<GPUPipelineOptions>(
      "flexsn-gpu-pipeline",
      "Lower flexsn kernel functions to a gpu.binary holding PTX",
      [](OpPassManager &pm, const GPUPipelineOptions &o) {
        GPUOptions options;
        options.chip = o.chip;
        options.optLevel = o.optLevel;
        options.neuronsPerThread = o.neuronsPerThread;
        options.blockSize = o.blockSize;
        options.cudaHome = o.cudaHome;
        buildGPUPipeline(pm, options);
      });
}

LogicalResult mlir::flexsn::differentiateModule(ModuleOp module,
                                                ArrayRef<std::string> saveOps) {
  PassManager pm(module.getContext());
  pm.addPass(createCanonicalizerPass());
  FlexSNDifferentiateOptions options;
  options.saveOps = llvm::to_vector(saveOps);
  pm.addPass(createFlexSNDifferentiate(options));
  return pm.run(module);
}
