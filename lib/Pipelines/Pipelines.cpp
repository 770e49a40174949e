//===- Pipelines.cpp - Named lowering pipelines and targets ---------------===//

#include "flexsn/Pipelines/Pipelines.h"

#include "flexsn/Conversion/Passes.h"
#include "flexsn/Dialect/FlexSN/Utils/KernelABI.h"
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
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"
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
  pm.addPass(createConvertFlexSNToCPUKernels());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createSCFToControlFlowPass());
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  // Folds the bitcast pairs bf16 stores leave (i16 -> bf16 -> i16).
  pm.addPass(createCanonicalizerPass());
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
  // Errors here name their op by location; a note that prints the op would
  // dump the whole (lowered) module after each.
  struct QuietOps {
    MLIRContext *ctx;
    bool saved;
    ~QuietOps() { ctx->printOpOnDiagnostic(saved); }
  } quiet{module.getContext(), module.getContext()->shouldPrintOpOnDiagnostic()};
  quiet.ctx->printOpOnDiagnostic(false);
  // LLVM takes any string as a chip; an NVIDIA one is sm_<digits>[a|f].
  StringRef digits = StringRef(options.chip);
  if (!digits.consume_front("sm_") || digits.empty() ||
      !llvm::all_of(digits.drop_back(digits.ends_with("a") ||
                                     digits.ends_with("f")),
                    llvm::isDigit))
    return module.emitError() << "chip '" << options.chip
                              << "' is not an NVIDIA GPU architecture "
                                 "(sm_XX, e.g. sm_80, sm_90, sm_90a)";
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

unsigned ManifestKernel::getNumPointers() const {
  return llvm::count_if(args, [](const ManifestArg &a) { return a.isPointer; });
}

FailureOr<std::vector<ManifestKernel>>
mlir::flexsn::collectManifest(ModuleOp module) {
  // The kernels are built after canonicalization: describe them from the
  // same canonical form.
  OwningOpRef<ModuleOp> canonical = module.clone();
  PassManager pm(module.getContext());
  pm.addPass(createCanonicalizerPass());
  if (failed(pm.run(*canonical)))
    return failure();
  SmallVector<ScanOp> scans;
  if (failed(collectKernelScans(*canonical, "GPU", scans)))
    return failure();
  std::vector<ManifestKernel> kernels;
  for (ScanOp scan : scans) {
    auto func = cast<func::FuncOp>(scan->getParentOp());
    auto primal = func->getAttrOfType<FlatSymbolRefAttr>(kPrimalAttr);
    for (const KernelSpec &spec : getKernelSpecs(scan)) {
      ManifestKernel &k = kernels.emplace_back();
      k.name = spec.name;
      k.source = func.getSymName().str();
      if (primal)
        k.primal = primal.getValue().str();
      k.variant = spec.kind;
      k.reverse = scan.getReverse();
      k.computeType = typeName(scan.getComputeType());
      k.numInputs = scan.getNumInputs();
      k.numStates = scan.getNumStates();
      k.numOutputs = scan.getNumOutputs();
      k.numParams = scan.getNumParams();
      for (const KernelArg &arg :
           getKernelABI(scan, spec.variant, /*cpu=*/false)) {
        ManifestArg &a = k.args.emplace_back();
        a.role = stringifyKernelArgRole(arg.role).str();
        a.index = arg.index;
        a.isPointer = arg.isPointer();
        a.dtype = typeName(arg.type);
        a.elementBytes = arg.type.getIntOrFloatBitWidth() / 8;
        if (!a.isPointer)
          continue;
        a.shape = getArgShape(arg.role);
        ArgDescription m = describeKernelArg(scan, arg);
        a.meaning = m.meaning;
        a.meaningIndex = m.index;
        a.accumulate = arg.role == KernelArgRole::SumState;
      }
    }
  }
  return kernels;
}

void mlir::flexsn::serializeManifest(ArrayRef<ManifestKernel> kernels,
                                     const GPUOptions *gpu,
                                     llvm::raw_ostream &os) {
  llvm::json::OStream j(os, 2);
  j.object([&] {
    j.attribute("format", "flexsn-manifest");
    j.attribute("version", 3);
    j.attribute("target", gpu ? "cuda" : "cpu");
    if (gpu)
      j.attribute("chip", gpu->chip);
    j.attributeArray("kernels", [&] {
      for (const ManifestKernel &k : kernels) {
        j.object([&] {
          j.attribute("name", k.name);
          j.attribute("source", k.source);
          if (!k.primal.empty())
            j.attribute("primal", k.primal);
          j.attribute("variant", k.variant);
          j.attribute("reverse", k.reverse);
          j.attribute("compute_type", k.computeType);
          j.attribute("num_inputs", k.numInputs);
          j.attribute("num_states", k.numStates);
          j.attribute("num_outputs", k.numOutputs);
          j.attribute("num_params", k.numParams);
          j.attribute("num_pointers", k.getNumPointers());
          if (gpu) {
            j.attribute("block_size", gpu->blockSize);
            j.attribute("neurons_per_thread", gpu->neuronsPerThread);
            j.attribute("grid",
                        "ceil(NCL / (block_size * neurons_per_thread))");
          }
          // In launch order; `meaning` says what each pointer holds (for a
          // backward: which forward tensor or gradient it reads); `shape`
          // and `bytes` how large its buffer is.
          j.attributeArray("args", [&] {
            for (const ManifestArg &a : k.args) {
              j.object([&] {
                j.attribute("role", a.role);
                j.attribute("index", a.index);
                j.attribute("kind", a.isPointer ? "ptr" : "i64");
                j.attribute("dtype", a.dtype);
                if (!a.isPointer)
                  return;
                j.attribute("meaning", stringifyArgMeaning(a.meaning));
                j.attribute("meaning_index", a.meaningIndex);
                j.attribute("shape", stringifyArgShape(a.shape));
                std::string elems = a.shape == ArgShape::Sequence ? "T * NCL * "
                                    : a.shape == ArgShape::PerNeuron ? "NCL * "
                                                                     : "";
                j.attribute("bytes", elems + std::to_string(a.elementBytes));
                if (a.accumulate)
                  j.attribute("accumulate", true);
              });
            }
          });
        });
      }
    });
  });
  os << "\n";
}

bool mlir::flexsn::parseManifest(StringRef json,
                                 std::vector<ManifestKernel> &kernels,
                                 GPUOptions &gpu, bool &isCUDA,
                                 std::string &error) {
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(json);
  if (!value) {
    error = "the manifest is not JSON: " + llvm::toString(value.takeError());
    return false;
  }
  auto fail = [&](const Twine &what) {
    error = ("malformed manifest: " + what).str();
    return false;
  };
  const llvm::json::Object *root = value->getAsObject();
  if (!root || root->getString("format") != "flexsn-manifest")
    return fail("no \"format\": \"flexsn-manifest\"");
  if (root->getInteger("version") != 3)
    return fail("version is not 3");
  std::optional<StringRef> target = root->getString("target");
  if (!target || (*target != "cpu" && *target != "cuda"))
    return fail("target is neither cpu nor cuda");
  isCUDA = *target == "cuda";
  if (isCUDA) {
    std::optional<StringRef> chip = root->getString("chip");
    if (!chip)
      return fail("a cuda manifest without chip");
    gpu.chip = chip->str();
  }
  const llvm::json::Array *list = root->getArray("kernels");
  if (!list)
    return fail("no kernels");
  kernels.clear();
  for (const llvm::json::Value &kv : *list) {
    const llvm::json::Object *ko = kv.getAsObject();
    std::optional<StringRef> name = ko ? ko->getString("name") : std::nullopt;
    const llvm::json::Array *args = ko ? ko->getArray("args") : nullptr;
    if (!name || !args)
      return fail("a kernel without name or args");
    ManifestKernel &k = kernels.emplace_back();
    k.name = name->str();
    k.source = ko->getString("source").value_or("").str();
    k.primal = ko->getString("primal").value_or("").str();
    k.variant = ko->getString("variant").value_or("").str();
    k.computeType = ko->getString("compute_type").value_or("").str();
    k.reverse = ko->getBoolean("reverse").value_or(false);
    k.numInputs = ko->getInteger("num_inputs").value_or(0);
    k.numStates = ko->getInteger("num_states").value_or(0);
    k.numOutputs = ko->getInteger("num_outputs").value_or(0);
    k.numParams = ko->getInteger("num_params").value_or(0);
    if (isCUDA) {
      std::optional<int64_t> block = ko->getInteger("block_size");
      std::optional<int64_t> npt = ko->getInteger("neurons_per_thread");
      if (!block || !npt || *block <= 0 || *npt <= 0)
        return fail("kernel '" + k.name + "' without its launch geometry");
      gpu.blockSize = *block;
      gpu.neuronsPerThread = *npt;
    }
    for (const llvm::json::Value &av : *args) {
      const llvm::json::Object *ao = av.getAsObject();
      if (!ao)
        return fail("an argument of '" + k.name + "' is not an object");
      ManifestArg &a = k.args.emplace_back();
      a.role = ao->getString("role").value_or("").str();
      a.index = ao->getInteger("index").value_or(0);
      a.isPointer = ao->getString("kind") == "ptr";
      a.dtype = ao->getString("dtype").value_or("").str();
      if (!a.isPointer)
        continue;
      a.elementBytes = a.dtype == "f64" ? 8 : a.dtype == "f32" ? 4
                       : (a.dtype == "f16" || a.dtype == "bf16") ? 2 : 0;
      if (!a.elementBytes)
        return fail("pointer of '" + k.name + "' with dtype '" + a.dtype + "'");
      std::optional<StringRef> shape = ao->getString("shape");
      if (shape == stringifyArgShape(ArgShape::Sequence))
        a.shape = ArgShape::Sequence;
      else if (shape == stringifyArgShape(ArgShape::PerNeuron))
        a.shape = ArgShape::PerNeuron;
      else if (shape == stringifyArgShape(ArgShape::Scalar))
        a.shape = ArgShape::Scalar;
      else
        return fail("pointer of '" + k.name + "' without a known shape");
      std::optional<ArgMeaning> meaning =
          symbolizeArgMeaning(ao->getString("meaning").value_or(""));
      if (!meaning)
        return fail("pointer of '" + k.name + "' without a known meaning");
      a.meaning = *meaning;
      a.meaningIndex = ao->getInteger("meaning_index").value_or(0);
      a.accumulate = ao->getBoolean("accumulate").value_or(false);
    }
  }
  return true;
}

LogicalResult mlir::flexsn::writeManifest(ModuleOp module,
                                          const GPUOptions &options,
                                          llvm::raw_ostream &os) {
  FailureOr<std::vector<ManifestKernel>> kernels = collectManifest(module);
  if (failed(kernels))
    return failure();
  serializeManifest(*kernels, &options, os);
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
