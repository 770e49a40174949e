//===- flexsn-run.cpp - Run, check and time compiled flexsn kernels -------===//
//
//   flexsn-run FILE.mlir --backend=cpu --T=64 --ncl=4099
//              [--variant=inference|final_state] [--dtype=f32|f16|bf16|f64]
//              [--check] [--bench] [--func=NAME] [--seed=N] [--threads=N]
//
// Fills the kernel's inputs, initial states and params with seeded random
// values, poisons the results with NaN, runs the kernel, and with --check
// compares every result with the reference interpreter (exit 1 above the
// tolerance). --bench prints the median time and the bandwidth.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Conversion/ScanKernel.h"
#include "flexsn/InitAllDialects.h"
#include "flexsn/Interpreter/Interpreter.h"
#include "flexsn/Runtime/CPU/CPUBackend.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace mlir;
using namespace mlir::flexsn;
namespace cl = llvm::cl;

static cl::opt<std::string> clInput(cl::Positional, cl::desc("<input .mlir>"),
                                    cl::Required);
static cl::opt<std::string> clBackend("backend",
                                      cl::desc("cpu or cuda"),
                                      cl::init("cpu"));
static cl::opt<int64_t> clT("T", cl::desc("time steps"), cl::init(8));
static cl::opt<int64_t> clNCL("ncl", cl::desc("neurons (N*C*L flattened)"),
                              cl::init(1024));
static cl::opt<std::string>
    clVariant("variant",
              cl::desc("inference | final_state | forward | backward"),
              cl::init("inference"));
static cl::opt<std::string>
    clDtype("dtype",
            cl::desc("storage type of every sequence and state: f32, f16, "
                     "bf16, f64 (default: as written)"),
            cl::init(""));
static cl::opt<bool> clCheck("check",
                             cl::desc("compare with the reference interpreter"));
static cl::opt<bool> clBench("bench", cl::desc("time the kernel"));
static cl::opt<std::string> clFunc("func",
                                   cl::desc("kernel function (default: the only one)"),
                                   cl::init(""));
static cl::opt<uint64_t> clSeed("seed", cl::desc("random seed"), cl::init(0));
static cl::opt<unsigned> clThreads("threads",
                                   cl::desc("CPU threads (0: all)"),
                                   cl::init(0));
static cl::opt<unsigned> clReps("reps", cl::desc("timed repetitions"),
                                cl::init(20));
static cl::opt<double>
    clTolerance("tolerance",
                cl::desc("max relative error for --check (default: by the "
                         "coarser of storage and compute type: f64 1e-12, "
                         "f32 1e-5, f16/bf16 1e-2)"),
                cl::init(-1.0));

static int fail(const Twine &message) {
  llvm::errs() << "flexsn-run: error: " << message << "\n";
  return 2;
}

/// Rewrites the storage element type of every tensor of `func` (arguments,
/// the scan's results, the function's results) to `storage`.
static void setStorageType(func::FuncOp func, ScanOp scan, Type storage) {
  auto retype = [&](Type t) -> Type {
    if (auto tensor = dyn_cast<RankedTensorType>(t))
      return tensor.clone(storage);
    return t;
  };
  for (BlockArgument arg : func.getArguments())
    arg.setType(retype(arg.getType()));
  for (OpResult r : scan->getResults())
    r.setType(retype(r.getType()));
  SmallVector<Type> ins, outs;
  for (Type t : func.getArgumentTypes())
    ins.push_back(retype(t));
  for (Type t : func.getResultTypes())
    outs.push_back(retype(t));
  func.setFunctionType(FunctionType::get(func.getContext(), ins, outs));
}

static unsigned byteWidth(Type t) { return t.getIntOrFloatBitWidth() / 8; }

static void encode(double x, Type t, uint8_t *dst) {
  if (t.isF64()) {
    std::memcpy(dst, &x, 8);
  } else if (t.isF32()) {
    float f = static_cast<float>(x);
    std::memcpy(dst, &f, 4);
  } else {
    llvm::APFloat v(x);
    bool lost;
    v.convert(cast<FloatType>(t).getFloatSemantics(),
              llvm::APFloat::rmNearestTiesToEven, &lost);
    uint16_t bits = static_cast<uint16_t>(v.bitcastToAPInt().getZExtValue());
    std::memcpy(dst, &bits, 2);
  }
}

static double decode(const uint8_t *src, Type t) {
  if (t.isF64()) {
    double d;
    std::memcpy(&d, src, 8);
    return d;
  }
  if (t.isF32()) {
    float f;
    std::memcpy(&f, src, 4);
    return f;
  }
  uint16_t bits;
  std::memcpy(&bits, src, 2);
  llvm::APFloat v(cast<FloatType>(t).getFloatSemantics(),
                  llvm::APInt(16, bits));
  bool lost;
  v.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven,
            &lost);
  return v.convertToDouble();
}

static int64_t elementCount(KernelArgRole role, int64_t T, int64_t NCL) {
  switch (role) {
  case KernelArgRole::Input:
  case KernelArgRole::Output:
  case KernelArgRole::StateSeq:
    return T * NCL;
  case KernelArgRole::ParamScalar:
    return 1;
  default:
    return NCL;
  }
}

static bool isResultRole(KernelArgRole role) {
  return role == KernelArgRole::Output || role == KernelArgRole::StateSeq ||
         role == KernelArgRole::FinalState;
}

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "flexsn kernel runner\n");

  if (clBackend == "cuda")
    return fail("the cuda backend needs the CUDA runtime (lib/Runtime/CUDA), "
                "which is not built yet; use --backend=cpu");
  if (clBackend != "cpu")
    return fail("unknown backend '" + clBackend + "' (expected cpu or cuda)");
  if (clVariant == "forward" || clVariant == "backward")
    return fail("variant '" + clVariant +
                "' needs the flexsn-differentiate pass, which is not built "
                "yet; available: inference, final_state");
  std::optional<KernelVariant> variant = symbolizeKernelVariant(clVariant);
  if (!variant)
    return fail("unknown variant '" + clVariant +
                "' (expected inference or final_state)");
  if (clT < 0 || clNCL < 0)
    return fail("--T and --ncl must be >= 0");

  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
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

  // Kernel ABIs are read after canonicalization, as every pipeline sees them.
  PassManager canon(&context);
  canon.addPass(createCanonicalizerPass());
  if (failed(canon.run(*module)))
    return 1;

  SmallVector<ScanOp> scans;
  if (failed(collectKernelScans(*module, "CPU", scans)))
    return 1;
  ScanOp scan;
  for (ScanOp s : scans) {
    auto f = cast<func::FuncOp>(s->getParentOp());
    if (clFunc.empty() || f.getSymName() == clFunc) {
      if (scan && clFunc.empty())
        return fail("the module has several kernel functions; pick one with "
                    "--func");
      scan = s;
    }
  }
  if (!scan)
    return fail(clFunc.empty() ? "the module has no flexsn.scan kernel"
                               : "no kernel function named '" + clFunc + "'");
  auto func = cast<func::FuncOp>(scan->getParentOp());
  std::string funcName = func.getSymName().str();
  // Keep only the chosen kernel function.
  for (auto other :
       llvm::make_early_inc_range(module->getOps<func::FuncOp>()))
    if (other != func)
      other.erase();

  if (!clDtype.empty()) {
    Type storage = llvm::StringSwitch<Type>(clDtype)
                       .Case("f32", Float32Type::get(&context))
                       .Case("f16", Float16Type::get(&context))
                       .Case("bf16", BFloat16Type::get(&context))
                       .Case("f64", Float64Type::get(&context))
                       .Default(Type());
    if (!storage)
      return fail("unknown --dtype '" + clDtype +
                  "' (expected f32, f16, bf16 or f64)");
    setStorageType(func, scan, storage);
    if (failed(verify(*module)))
      return 1;
  }

  int64_t T = clT, NCL = clNCL;
  SmallVector<KernelArg> abi = getKernelABI(scan, *variant, /*cpu=*/true);
  std::vector<std::vector<uint8_t>> buffers;
  std::vector<void *> ptrs;
  std::mt19937_64 rng(clSeed);
  std::vector<std::vector<double>> operands; // decoded, for the interpreter
  int64_t totalBytes = 0;
  for (const KernelArg &arg : abi) {
    if (!arg.isPointer())
      continue;
    int64_t count = elementCount(arg.role, T, NCL);
    unsigned width = byteWidth(arg.type);
    buffers.emplace_back(std::max<int64_t>(count * width, 1));
    std::vector<uint8_t> &buf = buffers.back();
    totalBytes += count * width;
    if (isResultRole(arg.role)) {
      std::memset(buf.data(), 0xFF, buf.size()); // NaN in every float type
    } else {
      double lo = -0.5, hi = 0.5;
      if (arg.role == KernelArgRole::Input)
        lo = -1.0, hi = 3.0;
      else if (arg.role != KernelArgRole::InitState)
        lo = -1.0, hi = 1.0;
      std::uniform_real_distribution<double> dist(lo, hi);
      std::vector<double> decoded(count);
      for (int64_t i = 0; i < count; ++i) {
        encode(dist(rng), arg.type, buf.data() + i * width);
        decoded[i] = decode(buf.data() + i * width, arg.type);
      }
      operands.push_back(std::move(decoded));
    }
    ptrs.push_back(buf.data());
  }

  auto kernels = CPUKernels::compile(*module);
  if (failed(kernels))
    return 1;
  std::string kernelName = getKernelName(funcName, *variant);
  auto fn = (*kernels)->lookup(kernelName);
  if (failed(fn))
    return fail("kernel '" + kernelName + "' not found after compilation");

  CPUKernels::run(*fn, ptrs, T, NCL, clThreads);
  llvm::outs() << "kernel " << kernelName << ": T=" << T << " NCL=" << NCL
               << " backend=cpu\n";

  int status = 0;
  if (clCheck) {
    std::vector<std::vector<double>> expected;
    if (failed(interpretScan(scan, *variant, T, NCL, operands, expected)))
      return 1;
    double tolerance = clTolerance;
    unsigned resultIdx = 0;
    double worst = 0.0;
    for (auto [argIdx, arg] : llvm::enumerate(
             llvm::make_filter_range(abi, [](const KernelArg &a) {
               return a.isPointer();
             }))) {
      if (!isResultRole(arg.role))
        continue;
      // Default: the tolerance of the coarser of storage and compute type.
      auto tolOf = [](Type t) {
        return t.isF64() ? 1e-12 : t.isF32() ? 1e-5 : 1e-2;
      };
      double tol = tolerance;
      if (tol < 0)
        tol = std::max(tolOf(arg.type), tolOf(scan.getComputeType()));
      const std::vector<double> &ref = expected[resultIdx++];
      const uint8_t *data = buffers[argIdx].data();
      unsigned width = byteWidth(arg.type);
      double maxErr = 0.0, maxRef = 0.0;
      int64_t bad = 0;
      for (size_t i = 0; i < ref.size(); ++i) {
        double got = decode(data + i * width, arg.type);
        double err = std::fabs(got - ref[i]);
        if (!(err <= maxErr)) // NaN-propagating max
          maxErr = err;
        maxRef = std::max(maxRef, std::fabs(ref[i]));
        if (!(err <= tol * std::max(1.0, std::fabs(ref[i]))))
          ++bad;
      }
      double rel = maxErr / std::max(maxRef, 1.0);
      bool ok = rel <= tol;
      worst = std::isnan(rel) ? rel : std::max(worst, rel);
      llvm::outs() << "  " << stringifyKernelArgRole(arg.role) << " #"
                   << arg.index << " (" << arg.type << ", " << ref.size()
                   << " values): max relative error " << rel
                   << (ok ? " ok" : " FAIL") << " (tolerance " << tol;
      if (bad)
        llvm::outs() << ", " << bad << " value(s) off";
      llvm::outs() << ")\n";
      if (!ok)
        status = 1;
    }
    llvm::outs() << (status ? "check: FAIL" : "check: ok")
                 << " (max relative error " << worst << ")\n";
  }

  if (clBench) {
    for (int i = 0; i < 2; ++i)
      CPUKernels::run(*fn, ptrs, T, NCL, clThreads);
    std::vector<double> times;
    for (unsigned i = 0; i < std::max(1u, (unsigned)clReps); ++i) {
      auto start = std::chrono::steady_clock::now();
      CPUKernels::run(*fn, ptrs, T, NCL, clThreads);
      times.push_back(std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - start)
                          .count());
    }
    std::sort(times.begin(), times.end());
    double median = times[times.size() / 2];
    llvm::outs() << "bench: median " << median << " ms over " << times.size()
                 << " runs, " << totalBytes << " bytes moved, "
                 << (median > 0 ? totalBytes / (median * 1e6) : 0.0)
                 << " GB/s\n";
  }
  return status;
}
