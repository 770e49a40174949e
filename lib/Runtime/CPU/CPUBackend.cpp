//===- CPUBackend.cpp - JIT-compiled CPU kernels --------------------------===//

#include "flexsn/Runtime/CPU/CPUBackend.h"

#include "flexsn/Pipelines/Pipelines.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/SystemLibraries.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/DynamicLibrary.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"

#include <algorithm>
#include <functional>
#include <thread>
#include <vector>

using namespace mlir;
using namespace mlir::flexsn;

/// glibc's vector math library (libmvec) when it loads into the process,
/// for the JIT to resolve the vector functions the optimizer calls; else
/// none (a vectorized loop then calls the scalar functions lane by lane).
static llvm::VectorLibrary vectorMathLibrary() {
  static const llvm::VectorLibrary library = [] {
#if defined(__linux__) && defined(__x86_64__)
    std::string error;
    if (!llvm::sys::DynamicLibrary::LoadLibraryPermanently("libmvec.so.1",
                                                           &error))
      return llvm::VectorLibrary::LIBMVEC;
#endif
    return llvm::VectorLibrary::NoLibrary;
  }();
  return library;
}

FailureOr<std::unique_ptr<CPUKernels>> CPUKernels::compile(ModuleOp module,
                                                           unsigned prefetch) {
  static bool initialized = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    return true;
  }();
  (void)initialized;

  OwningOpRef<ModuleOp> clone = module.clone();
  PassManager pm(module.getContext());
  buildCPUPipeline(pm, prefetch);
  if (failed(pm.run(*clone)))
    return failure();

  // The optimizer gets the host's target machine: without one, LLVM's cost
  // models know no vector registers and the loop vectorizer leaves the
  // kernels' neuron loops (emitBlockScan) scalar.
  auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder)
    return module.emitError() << "JIT compilation failed: "
                              << llvm::toString(builder.takeError());
  auto host = builder->createTargetMachine();
  if (!host)
    return module.emitError() << "JIT compilation failed: "
                              << llvm::toString(host.takeError());
  std::shared_ptr<llvm::TargetMachine> targetMachine = std::move(*host);
  // ExecutionEngineOptions::transformer is a function_ref: the
  // std::function it refers to must outlive ExecutionEngine::create (a
  // temporary here was a stack-use-after-scope, found by ASan).
  std::function<llvm::Error(llvm::Module *)> optimize =
      [targetMachine](llvm::Module *m) -> llvm::Error {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder passes(targetMachine.get());
    // glibc's vector math library, where the process has it: a vectorized
    // loop then calls its 8-wide exp, log, ... (the surrogate gradients'
    // exp) instead of the scalar function once per lane.
    llvm::TargetLibraryInfoImpl libraries(targetMachine->getTargetTriple(),
                                          vectorMathLibrary());
    fam.registerPass([&] { return llvm::TargetLibraryAnalysis(libraries); });
    passes.registerModuleAnalyses(mam);
    passes.registerCGSCCAnalyses(cgam);
    passes.registerFunctionAnalyses(fam);
    passes.registerLoopAnalyses(lam);
    passes.crossRegisterProxies(lam, fam, cgam, mam);
    passes.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3)
        .run(*m, mam);
    return llvm::Error::success();
  };
  ExecutionEngineOptions options;
  options.transformer = optimize;
  options.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Aggressive;
  auto engine = ExecutionEngine::create(*clone, options);
  if (!engine) {
    std::string message = llvm::toString(engine.takeError());
    return module.emitError() << "JIT compilation failed: " << message;
  }
  auto kernels = std::make_unique<CPUKernels>();
  kernels->engine = std::move(*engine);
  return kernels;
}

FailureOr<CPUKernels::KernelFn> CPUKernels::lookup(StringRef name) {
  auto fn = engine->lookupPacked(name);
  if (!fn) {
    llvm::consumeError(fn.takeError());
    return failure();
  }
  return *fn;
}

void CPUKernels::run(KernelFn fn, ArrayRef<void *> ptrs, int64_t T,
                     int64_t NCL, unsigned threads) {
  if (threads == 0)
    threads = std::max(1u, std::thread::hardware_concurrency());
  // Small problems are not worth a thread each.
  int64_t minChunk = 4096;
  int64_t chunks = std::max<int64_t>(
      1, std::min<int64_t>(threads, (NCL + minChunk - 1) / minChunk));
  auto runRange = [&](int64_t begin, int64_t end) {
    std::vector<void *> ptrCopies(ptrs.begin(), ptrs.end());
    int64_t scalars[4] = {T, NCL, begin, end};
    std::vector<void *> args;
    for (void *&p : ptrCopies)
      args.push_back(&p);
    for (int64_t &s : scalars)
      args.push_back(&s);
    fn(args.data());
  };
  if (chunks == 1) {
    runRange(0, NCL);
    return;
  }
  std::vector<std::thread> pool;
  int64_t per = (NCL + chunks - 1) / chunks;
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t begin = c * per, end = std::min(NCL, begin + per);
    if (begin < end)
      pool.emplace_back(runRange, begin, end);
  }
  for (std::thread &t : pool)
    t.join();
}
