//===- flexsn-run.cpp - Run, check and time compiled flexsn kernels -------===//
//
//   flexsn-run FILE.mlir --backend=cpu --T=64 --ncl=4099
//              [--variant=inference|final_state|forward|backward|
//                         forward_final|backward_final]
//              [--dtype=f32|f16|bf16|f64] [--save-ops=OP,...]
//              [--check] [--bench] [--func=NAME] [--seed=N] [--threads=N]
//              [--transfer=primal|forward|backward|forward_final|
//                          backward_final] [--chunk-width=W]
//
// Fills the kernel's inputs, initial states and params with seeded random
// values, poisons the results with NaN, runs the kernel, and with --check
// compares every result with the reference interpreter (exit 1 above the
// tolerance). --bench prints the median time and the bandwidth.
//
// forward/backward run flexsn-differentiate first. The backward reads what
// the training forward kernel wrote (state sequences, saved values) and
// random output gradients; --check compares its gradients with the
// interpreter's independent adjoint and, for an f64 body without spikes,
// with central finite differences of the interpreter's forward.
//
// --transfer runs the transfer function flexsn-affine-transfer builds of
// the kernel function's scan (primal) or of its training forward or
// backward scan, with --variant=inference or final_state: an error names
// the state that is not affine where there is none.
//
// Everything but the command line lives in lib/Execution (Harness.h).
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"
#include "flexsn/Dialect/FlexSN/Utils/AffineStates.h"
#include "flexsn/Pipelines/Pipelines.h"
#include "flexsn/Execution/Harness.h"
#include "flexsn/InitAllDialects.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace mlir;
using namespace mlir::flexsn;
namespace cl = llvm::cl;

/// Only these options show in --help (not LLVM's own).
static cl::OptionCategory runCategory("flexsn-run options");

static cl::opt<std::string> clInput(cl::cat(runCategory), cl::Positional,
                                    cl::desc("<input .mlir>"), cl::Required);
static cl::opt<std::string> clBackend(cl::cat(runCategory), "backend",
                                      cl::desc("cpu or cuda"), cl::init("cpu"));
static cl::opt<int64_t> clT(cl::cat(runCategory), "T", cl::desc("time steps"),
                            cl::init(8));
static cl::opt<int64_t> clNCL(cl::cat(runCategory), "ncl",
                              cl::desc("neurons (N*C*L flattened)"),
                              cl::init(1024));
static cl::opt<std::string>
    clVariant(cl::cat(runCategory), "variant",
              cl::desc("inference | final_state | forward | backward | "
                       "forward_final | backward_final (the final-state "
                       "pair of --save-ops=auto)"),
              cl::init("inference"));
static cl::opt<std::string>
    clDtype(cl::cat(runCategory), "dtype",
            cl::desc("storage type of every sequence and state: f32, f16, "
                     "bf16, f64 (default: as written)"),
            cl::init(""));
static cl::opt<bool>
    clCheck(cl::cat(runCategory), "check",
            cl::desc("compare with the reference interpreter"));
static cl::opt<bool> clBench(cl::cat(runCategory), "bench",
                             cl::desc("time the kernel"));
static cl::opt<std::string>
    clFunc(cl::cat(runCategory), "func",
           cl::desc("kernel function (default: the only one)"), cl::init(""));
static cl::opt<std::string> clTransfer(
    cl::cat(runCategory), "transfer",
    cl::desc("run the affine transfer function of the primal scan, or of the "
             "training forward, backward, forward_final or backward_final "
             "scan (with --variant=inference or final_state)"),
    cl::init(""));
static cl::opt<int64_t> clChunkWidth(
    cl::cat(runCategory), "chunk-width",
    cl::desc("give the scans flexsn.chunk_width W: sequences hold chunks of "
             "steps side by side, W neurons a row (0: rows of NCL)"),
    cl::init(0));
static cl::opt<bool> clRepair(
    cl::cat(runCategory), "repair",
    cl::desc("after the inference, final_state or forward kernel of a scan with "
             "flexsn.chunk_width (each chunk from a random start), run it "
             "again from the chunk ends it gave, then its chunk repair "
             "kernel, and check the chunks as one sequential scan of each "
             "neuron"),
    cl::init(false));
static cl::opt<uint64_t> clSeed(cl::cat(runCategory), "seed",
                                cl::desc("random seed"), cl::init(0));
static cl::opt<unsigned> clThreads(cl::cat(runCategory), "threads",
                                   cl::desc("CPU threads (0: all)"),
                                   cl::init(0));
static cl::opt<unsigned> clReps(cl::cat(runCategory), "reps",
                                cl::desc("timed repetitions"), cl::init(20));
static cl::opt<bool> clFiniteDifferences(
    cl::cat(runCategory), "finite-differences",
    cl::desc("backward --check: also compare with central finite "
             "differences when storage and compute are f64 and the body has "
             "no spike (default on; turn off for bodies with kinks or jumps, "
             "such as max, abs, floor, select)"),
    cl::init(true));
static cl::opt<double>
    clTolerance(cl::cat(runCategory), "tolerance",
                cl::desc("max relative error for --check (default: by the "
                         "coarser of storage and compute type: f64 1e-12, "
                         "f32 1e-5, f16/bf16 1e-2)"),
                cl::init(-1.0));

static cl::opt<double> clTieMargin(
    cl::cat(runCategory), "tie-margin",
    cl::desc("--check: leave out neurons whose reference run passes a switch "
             "point (threshold, max/min, rounding jump) within this relative "
             "margin (flexsn-fuzz's reproducers set it)"),
    cl::init(0.0));

/// Builds the transfer functions of `module` (flexsn-affine-transfer) and
/// returns the name of the one of `func`'s `which` scan (primal, forward,
/// backward, ...); else sets `error`, naming the state that is not affine.
static std::string addTransfer(ModuleOp module, StringRef func,
                               StringRef which, std::string &error) {
  MLIRContext *context = module.getContext();
  std::string of = (func + (which == "primal" ? "" : "_" + which)).str();
  auto scanned = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
      module, StringAttr::get(context, of));
  PassManager pm(context);
  pm.addPass(createFlexSNAffineTransfer());
  if (!scanned || failed(pm.run(module))) {
    error = "no function " + of + " to build a transfer function of";
    return "";
  }
  std::string name = of + "_transfer";
  if (SymbolTable::lookupNearestSymbolFrom(module,
                                           StringAttr::get(context, name)))
    return name;
  std::string why = "it has no states";
  scanned.walk([&](ScanOp scan) {
    for (auto [i, u] : llvm::enumerate(analyzeAffineStates(scan)))
      if (!u.affine) {
        why = "state #" + std::to_string(i) + " is not affine (" + u.reason + ")";
        break;
      }
  });
  error = ("--transfer=" + which + ": " + of + " has no transfer function: " + why).str();
  return "";
}

/// What is wrong with --transfer=`transfer` beside --variant=`kind`.
static std::string checkTransfer(StringRef transfer, StringRef kind) {
  if (transfer.empty())
    return "";
  if (!llvm::is_contained({"primal", "forward", "backward", "forward_final",
                           "backward_final"},
                          transfer))
    return ("unknown --transfer '" + transfer +
            "' (expected primal, forward, backward, forward_final or "
            "backward_final)")
        .str();
  if (kind != "inference" && kind != "final_state")
    return ("--transfer runs a transfer function's inference or final_state "
            "kernel, not --variant=" + kind)
        .str();
  return "";
}

static int fail(const Twine &message) {
  llvm::errs() << "flexsn-run: error: " << message << "\n";
  return 2;
}

/// Prints `error` (unless the context already reported it); returns `code`.
static int report(llvm::Error error, int code) {
  bool diagnosed = false;
  llvm::handleAllErrors(
      std::move(error), [&](const DiagnosedError &) { diagnosed = true; },
      [&](const llvm::ErrorInfoBase &e) {
        llvm::errs() << "flexsn-run: error: " << e.message() << "\n";
      });
  return diagnosed ? 1 : code;
}

/// --T and --ncl: non-negative, and every buffer (at most T * NCL elements
/// of 8 bytes) a byte count that fits in 64 bits (a wrapped size would pass
/// the memory guard); else the error.
static std::string checkSizes() {
  if (clT < 0 || clNCL < 0)
    return "--T and --ncl must be >= 0";
  int64_t elements, bytes;
  if (__builtin_mul_overflow(int64_t(clT), int64_t(clNCL), &elements) ||
      __builtin_mul_overflow(elements, int64_t(8), &bytes))
    return "--T=" + std::to_string(clT) + " times --ncl=" +
           std::to_string(clNCL) + " overflows 64-bit buffer sizes";
  return "";
}

/// --tie-margin in [0, 1) and a given --tolerance finite and >= 0; else
/// the error.
static std::string checkTolerances() {
  if (!(clTieMargin >= 0 && clTieMargin < 1))
    return "--tie-margin must be in [0, 1), not " + std::to_string(clTieMargin);
  if (clTolerance.getNumOccurrences() &&
      !(clTolerance >= 0 && std::isfinite(clTolerance)))
    return "--tolerance must be a finite number >= 0, not " +
           std::to_string(clTolerance);
  return "";
}

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  // The compilation's flags, declared once, by PipelineOptions.
  static PipelineOptions pipeline;
  pipeline.addToCommandLine(runCategory,
                            {"prefetch", "l2-prefetch", "neurons-per-thread",
                             "block-size", "save-ops"});
  cl::HideUnrelatedOptions(runCategory);
  cl::ParseCommandLineOptions(argc, argv, "flexsn kernel runner\n");

  if (clBackend != "cpu" && clBackend != "cuda")
    return fail("unknown backend '" + clBackend + "' (expected cpu or cuda)");
  std::string kind = clVariant;
  std::string transfer = clTransfer;
  if (std::string error = checkTransfer(transfer, kind); !error.empty())
    return fail(error);
  bool finalPair = kind == "forward_final" || kind == "backward_final" ||
                   StringRef(transfer).ends_with("_final");
  bool training = kind == "forward" || kind == "backward" || finalPair ||
                  (!transfer.empty() && transfer != "primal");
  if (!training && !symbolizeKernelVariant(kind))
    return fail("unknown variant '" + kind +
                "' (expected inference, final_state, forward, backward, "
                "forward_final or backward_final)");
  if (!training && !pipeline.saveOps.empty() && transfer.empty())
    return fail("--save-ops applies to --variant=forward|backward|"
                "forward_final|backward_final");
  if (finalPair && !llvm::is_contained(pipeline.saveOps, "auto"))
    return fail((transfer.empty() ? "--variant=" + kind : "--transfer=" + transfer) +
                " runs the final-state pair, which only --save-ops=auto "
                "builds");
  if (std::string error = checkSizes(); !error.empty())
    return fail(error);
  pipeline.differentiate = training;
  if (std::string error = pipeline.validate(); !error.empty())
    return fail("--" + error);
  if (std::string error = checkTolerances(); !error.empty())
    return fail(error);

  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  // Errors name their op by location; no dump of the (lowered) module.
  context.printOpOnDiagnostic(false);
  context.loadAllAvailableDialects();
  Type storage;
  if (!clDtype.empty()) {
    storage = llvm::StringSwitch<Type>(clDtype)
                  .Case("f32", Float32Type::get(&context))
                  .Case("f16", Float16Type::get(&context))
                  .Case("bf16", BFloat16Type::get(&context))
                  .Case("f64", Float64Type::get(&context))
                  .Default(Type());
    if (!storage)
      return fail("unknown --dtype '" + clDtype +
                  "' (expected f32, f16, bf16 or f64)");
  }
  llvm::SourceMgr sourceMgr;
  std::string errorMessage;
  auto file = openInputFile(clInput, &errorMessage);
  if (!file)
    return fail(errorMessage);
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  SourceMgrDiagnosticHandler diagHandler(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;

  auto funcName = prepareKernelModule(
      *module, clFunc, storage, training,
      std::vector<std::string>(pipeline.saveOps.begin(),
                               pipeline.saveOps.end()));
  if (!funcName)
    return report(funcName.takeError(), 2);
  if (clChunkWidth < 0)
    return fail("--chunk-width must be >= 0 (0: rows of NCL)");
  if (clChunkWidth > 0)
    module->walk([&](ScanOp scan) {
      scan->setAttr(kChunkWidthAttr,
                    IntegerAttr::get(IntegerType::get(&context, 64), clChunkWidth));
    });
  if (!transfer.empty()) {
    std::string error;
    funcName = addTransfer(*module, *funcName, transfer, error);
    if (!error.empty())
      return fail(error);
  }
  if (llvm::Error e = checkHostMemory(*module, kind, clT, clNCL))
    return report(std::move(e), 2);

  HarnessOptions options;
  options.threads = clThreads;
  options.reps = clReps;
  options.tolerance = clTolerance;
  options.finiteDifferences = clFiniteDifferences;
  options.tieMargin = clTieMargin;
  options.repair = clRepair;
  auto runner = clBackend == "cpu"
                    ? createCPURunner(*module, options, pipeline)
                    : createCUDARunner(*module, options, pipeline);
  if (!runner)
    return report(runner.takeError(), 2);
  auto result = runKernelCase(*module, *funcName, kind, clT, clNCL, clSeed,
                              **runner, options, clCheck, clBench, llvm::outs());
  if (!result)
    return report(result.takeError(), 2);
  if (!clCheck)
    return 0;
  llvm::outs() << (result->ok ? "check: ok" : "check: FAIL")
               << " (max relative error " << result->worst << ")\n";
  return result->ok ? 0 : 1;
}
