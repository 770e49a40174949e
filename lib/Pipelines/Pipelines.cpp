//===- Pipelines.cpp - Named lowering pipelines and targets ---------------===//

#include "flexsn/Pipelines/Pipelines.h"

#include "flexsn/Conversion/Passes.h"
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"

#include <cstdlib>

using namespace mlir;
using namespace mlir::flexsn;

// The l2-prefetch default is written out where the constant cannot reach
// it: the pass option (Passes.td) and the help texts (Pipelines.h,
// flexsn-run, flexsn-fuzz). Change them with it.
static_assert(kDefaultL2Prefetch == 32,
              "update the l2-prefetch defaults written out elsewhere");

std::unique_ptr<PipelineOptions>
PipelineOptions::parse(StringRef text, std::string &error) {
  auto options = std::make_unique<PipelineOptions>();
  // LLVM's option parsers print a bad value to stderr (a library must not):
  // the words are checked here first, so that every error is a message.
  const StringRef all[] = {
      options->chip.ArgStr,      options->optLevel.ArgStr,
      options->neuronsPerThread.ArgStr, options->blockSize.ArgStr,
      options->prefetch.ArgStr,  options->l2Prefetch.ArgStr,
      options->cudaHome.ArgStr,  options->differentiate.ArgStr,
      options->transfer.ArgStr,  options->saveOps.ArgStr};
  const StringRef numeric[] = {
      options->optLevel.ArgStr, options->neuronsPerThread.ArgStr,
      options->blockSize.ArgStr, options->prefetch.ArgStr,
      options->l2Prefetch.ArgStr};
  const StringRef flags[] = {options->differentiate.ArgStr,
                             options->transfer.ArgStr};
  std::string keys = llvm::join(ArrayRef<StringRef>(all), ", ");
  SmallVector<StringRef> words;
  text.split(words, ' ', -1, /*KeepEmpty=*/false);
  for (StringRef word : words) {
    auto [key, value] = word.split('=');
    if (!llvm::is_contained(all, key)) {
      error = ("unknown option '" + key + "' (the options: " + keys +
               "; written as key=value words)")
                  .str();
      return nullptr;
    }
    unsigned n;
    if (llvm::is_contained(numeric, key) && value.getAsInteger(10, n)) {
      error = ("'" + word + "': " + key + " takes an unsigned integer").str();
      return nullptr;
    }
    bool isFlag = llvm::is_contained(flags, key);
    if (isFlag && word.contains('=') &&
        !llvm::is_contained({"true", "false", "1", "0"}, value)) {
      error = ("'" + word + "': " + key + " is true, false, 1 or 0").str();
      return nullptr;
    }
    if (!word.contains('=') && !isFlag) {
      error = ("'" + word + "' takes a value: " + key + "=...").str();
      return nullptr;
    }
  }
  std::string messages;
  llvm::raw_string_ostream os(messages);
  if (failed(options->parseFromString(text, os))) {
    error = ("cannot parse '" + text + "': " + StringRef(messages).trim())
                .str();
    return nullptr;
  }
  error = options->validate();
  if (!error.empty())
    return nullptr;
  return options;
}

std::string PipelineOptions::validate() const {
  // LLVM takes any string as a chip; an NVIDIA one is sm_<digits>[a|f].
  StringRef digits = StringRef(chip);
  if (!digits.consume_front("sm_") || digits.empty() ||
      !llvm::all_of(digits.drop_back(digits.ends_with("a") ||
                                     digits.ends_with("f")),
                    llvm::isDigit))
    return "chip '" + chip + "' is not an NVIDIA GPU architecture (sm_XX, "
           "e.g. sm_80, sm_90, sm_90a)";
  if (optLevel > 3)
    return "O=" + std::to_string(optLevel) + ": the PTX optimization level "
           "is 0, 1, 2 or 3";
  unsigned npt = neuronsPerThread;
  if (npt != 1 && npt != 2 && npt != 4 && npt != 8)
    return "neurons-per-thread=" + std::to_string(npt) + ": 1, 2, 4 or 8";
  if (blockSize < 32 || blockSize > 1024 || blockSize % 32 != 0)
    return "block-size=" + std::to_string(blockSize) +
           ": a multiple of 32 from 32 to 1024";
  if (prefetch > kMaxPrefetchDepth)
    return "prefetch=" + std::to_string(prefetch) +
           ": 0 (chosen per kernel) to " + std::to_string(kMaxPrefetchDepth) +
           " steps";
  if (l2Prefetch > kMaxL2Prefetch)
    return "l2-prefetch=" + std::to_string(l2Prefetch) +
           ": 0 (none) to " + std::to_string(kMaxL2Prefetch) + " steps";
  if (!saveOps.empty() && !differentiate)
    return "save-ops needs differentiate";
  return "";
}

void PipelineOptions::addToCommandLine(llvm::cl::OptionCategory &category,
                                       ArrayRef<StringRef> names) {
  for (StringRef name : names) {
    llvm::cl::Option *option = OptionsMap.lookup(name);
    if (!option)
      llvm::report_fatal_error("addToCommandLine: no pipeline option '" +
                               Twine(name) + "'");
    // Each option is registered with this object's own parser (parse());
    // registered again with the top level too, the tool's parse sets it.
    option->removeArgument();
    option->addSubCommand(llvm::cl::SubCommand::getTopLevel());
    option->addCategory(category);
    option->addArgument();
  }
}

std::string PipelineOptions::getCUDAHome() const {
  if (!cudaHome.empty())
    return cudaHome;
  if (const char *env = std::getenv("CUDA_HOME"))
    return env;
  return "/usr/local/cuda";
}

namespace {
/// Integer-to-bf16 conversions (arith.sitofp / uitofp to bf16) as a
/// conversion to f32 and a truncf, which arith-expand{include-bf16} then
/// turns into integer ops. The canonicalizer makes them of a bf16 store of
/// an integer-valued step (truncf(sitofp)); LLVM lowers a direct
/// integer-to-bfloat conversion to a call of __truncsfbf2 on x86 CPUs
/// without AVX512-BF16, which the JIT cannot resolve (Debian 12's libgcc
/// has no such function): the kernel would fail to load. Through f32 it is
/// the core's own arithmetic (the step computes in f32, the store rounds to
/// bf16). Internal to the CPU pipeline
/// (test/Integration/CPU/bf16-int-valued.mlir).
struct SplitIntToBF16 : PassWrapper<SplitIntToBF16, OperationPass<>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(SplitIntToBF16)
  StringRef getArgument() const override { return "flexsn-split-int-to-bf16"; }
  void runOnOperation() override {
    SmallVector<Operation *> casts;
    getOperation()->walk([&](Operation *op) {
      if (isa<arith::SIToFPOp, arith::UIToFPOp>(op) &&
          getElementTypeOrSelf(op->getResult(0).getType()).isBF16())
        casts.push_back(op);
    });
    for (Operation *op : casts) {
      OpBuilder b(op);
      Type type = op->getResult(0).getType();
      Type f32 = b.getF32Type();
      Type wide = f32;
      if (auto shaped = dyn_cast<ShapedType>(type))
        wide = shaped.clone(f32);
      Value in = op->getOperand(0);
      Value mid =
          isa<arith::SIToFPOp>(op)
              ? arith::SIToFPOp::create(b, op->getLoc(), wide, in).getResult()
              : arith::UIToFPOp::create(b, op->getLoc(), wide, in).getResult();
      Value out = arith::TruncFOp::create(b, op->getLoc(), type, mid);
      op->getResult(0).replaceAllUsesWith(out);
      op->erase();
    }
  }
};
} // namespace

void mlir::flexsn::buildCPUPipeline(OpPassManager &pm, unsigned prefetch) {
  pm.addPass(createCanonicalizerPass());
  ConvertFlexSNToCPUKernelsOptions toCPU;
  toCPU.prefetch = prefetch;
  pm.addPass(createConvertFlexSNToCPUKernels(toCPU));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(std::make_unique<SplitIntToBF16>());
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

void mlir::flexsn::buildGPUPipeline(OpPassManager &pm,
                                    const PipelineOptions &options,
                                    bool serialize) {
  pm.addPass(createCanonicalizerPass());
  ConvertFlexSNToGPUOptions toGPU;
  toGPU.neuronsPerThread = options.neuronsPerThread;
  toGPU.prefetch = options.prefetch;
  toGPU.l2Prefetch = options.l2Prefetch;
  pm.addPass(createConvertFlexSNToGPU(toGPU));
  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  target.optLevel = options.optLevel;
  pm.addPass(createGpuNVVMAttachTarget(target));
  // One gpu.module per kernel entry: the pass manager runs this nested
  // pipeline on them in parallel.
  OpPassManager &gpuPm = pm.nest<gpu::GPUModuleOp>();
  gpuPm.addPass(createCanonicalizerPass());
  gpuPm.addPass(createCSEPass());
  gpuPm.addPass(createFlexSNBoundedReciprocal());
  gpuPm.addPass(createSCFToControlFlowPass());
  gpuPm.addPass(createConvertGpuOpsToNVVMOps());
  gpuPm.addPass(createCanonicalizerPass());
  gpuPm.addPass(createCSEPass());
  gpuPm.addPass(createReconcileUnrealizedCastsPass());
  if (!serialize)
    return;
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "isa";
  binary.toolkitPath = options.getCUDAHome();
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

void mlir::flexsn::buildDifferentiatePipeline(OpPassManager &pm,
                                              ArrayRef<std::string> saveOps) {
  pm.addPass(createCanonicalizerPass());
  FlexSNDifferentiateOptions options;
  options.saveOps = llvm::to_vector(saveOps);
  pm.addPass(createFlexSNDifferentiate(options));
}

LogicalResult mlir::flexsn::differentiateModule(ModuleOp module,
                                                ArrayRef<std::string> saveOps) {
  PassManager pm(module.getContext());
  buildDifferentiatePipeline(pm, saveOps);
  return pm.run(module);
}

static void buildTransferPipeline(OpPassManager &pm) {
  pm.addPass(createCanonicalizerPass());
  FlexSNAffineTransferOptions transfer;
  transfer.replace = true;
  pm.addPass(createFlexSNAffineTransfer(transfer));
}

LogicalResult mlir::flexsn::prepareModule(ModuleOp module,
                                          const PipelineOptions &options) {
  if (std::string error = options.validate(); !error.empty())
    return module.emitError(error);
  if (options.differentiate &&
      failed(differentiateModule(module, llvm::to_vector(options.saveOps))))
    return failure();
  if (!options.transfer)
    return success();
  PassManager pm(module.getContext());
  buildTransferPipeline(pm);
  return pm.run(module);
}

void mlir::flexsn::registerPipelines() {
  PassPipelineRegistration<PipelineOptions>(
      "flexsn-cpu-pipeline",
      "Lower flexsn kernel functions to LLVM dialect for the CPU JIT "
      "(differentiate: flexsn-differentiate first)",
      [](OpPassManager &pm, const PipelineOptions &options) {
        if (options.differentiate)
          buildDifferentiatePipeline(pm, llvm::to_vector(options.saveOps));
        if (options.transfer)
          buildTransferPipeline(pm);
        // prefetch > 1 pipelines the CPU loop as the GPU's (flexsn-run's
        // --prefetch); 0, "chosen per kernel" on the GPU, is 1 here.
        buildCPUPipeline(pm, options.prefetch ? unsigned(options.prefetch) : 1);
      });
  PassPipelineRegistration<PipelineOptions>(
      "flexsn-gpu-pipeline",
      "Lower flexsn kernel functions to a gpu.binary holding PTX "
      "(differentiate: flexsn-differentiate first)",
      [](OpPassManager &pm, const PipelineOptions &options) {
        if (options.differentiate)
          buildDifferentiatePipeline(pm, llvm::to_vector(options.saveOps));
        if (options.transfer)
          buildTransferPipeline(pm);
        buildGPUPipeline(pm, options);
      });
}
