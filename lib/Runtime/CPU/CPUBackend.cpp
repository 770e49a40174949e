//===- CPUBackend.cpp - JIT-compiled CPU kernels --------------------------===//

#include "flexsn/Runtime/CPU/CPUBackend.h"

#include "flexsn/Conversion/Passes.h"
#include "flexsn/Pipelines/Pipelines.h"
#include "flexsn/Support/PerProcess.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/ExecutionEngine/Orc/CompileUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/SelfExecutorProcessControl.h"
#include "llvm/ExecutionEngine/Orc/TaskDispatch.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/SystemLibraries.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/DynamicLibrary.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <unistd.h>
#include <vector>

#include <dlfcn.h>
#include <pthread.h>
#include <sys/stat.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

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

  OwningOpRef<ModuleOp> lowered = module.clone();
  PassManager pm(module.getContext());
  buildCPUPipeline(pm, prefetch);
  if (failed(pm.run(*lowered)))
    return failure();

  // The optimizer gets the host's target machine: without one, LLVM's cost
  // models know no vector registers and the loop vectorizer leaves the
  // kernels' neuron loops (emitBlockScan) scalar. Detected here, so that a
  // host LLVM cannot target fails the program, not its first lookup.
  auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder)
    return module.emitError() << "JIT compilation failed: "
                              << llvm::toString(builder.takeError());
  // Also the code generator's (lookup compiles each kernel to an object
  // file with it): LLVM's most aggressive code generation.
  builder->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  auto host = builder->createTargetMachine();
  if (!host)
    return module.emitError() << "JIT compilation failed: "
                              << llvm::toString(host.takeError());
  auto kernels = std::unique_ptr<CPUKernels>(new CPUKernels);
  kernels->lowered = std::move(lowered);
  kernels->targetMachine = std::move(*host);
  return kernels;
}

namespace {
/// The process's one JIT: every program's kernels are linked into it, each
/// kernel into a JITDylib of its own (programs reuse kernel names), which
/// the program removes when it is destroyed. One JIT, not an MLIR
/// ExecutionEngine per kernel: the same compile times, and less memory
/// kept (40 lif configurations held 7.1 MiB of RSS each with an engine per
/// kernel, 4.7 MiB with this). It links the
/// object files CPUKernels::lookup generates (or reads from its cache) on
/// the calling thread (no JIT threads), under `mutex`, which a fork waits
/// for: a forked child finds the JIT between links and keeps using it.
struct SharedJIT {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  uint64_t nextDylib = 0;

  static std::mutex mutex;
  /// With `mutex` held: the JIT, made on first use.
  static llvm::Expected<SharedJIT *> get() {
    static bool registered = [] {
      pthread_atfork([] { mutex.lock(); }, [] { mutex.unlock(); },
                     [] { mutex.unlock(); });
      return true;
    }();
    (void)registered;
    static SharedJIT *current = nullptr; // never deleted: programs may be
                                         // destroyed after static destructors
    if (current)
      return current;
    auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (!builder)
      return builder.takeError();
    auto control = llvm::orc::SelfExecutorProcessControl::Create(
        nullptr, std::make_unique<llvm::orc::InPlaceTaskDispatcher>());
    if (!control)
      return control.takeError();
    auto jit = llvm::orc::LLJITBuilder()
                   .setJITTargetMachineBuilder(std::move(*builder))
                   .setExecutorProcessControl(std::move(*control))
                   .setPlatformSetUp(llvm::orc::setUpInactivePlatform)
                   .create();
    if (!jit)
      return jit.takeError();
    current = new SharedJIT;
    current->jit = std::move(*jit);
    return current;
  }
};
std::mutex SharedJIT::mutex;
} // namespace

CPUKernels::~CPUKernels() {
  if (dylibs.empty())
    return;
  std::lock_guard<std::mutex> lock(SharedJIT::mutex);
  auto shared = SharedJIT::get();
  if (!shared) { // it existed when the dylibs were made
    llvm::consumeError(shared.takeError());
    return;
  }
  llvm::orc::ExecutionSession &session = (*shared)->jit->getExecutionSession();
  std::vector<llvm::orc::JITDylibSP> all(dylibs.begin(), dylibs.end());
  llvm::consumeError(session.removeJITDylibs(std::move(all)));
}

/// A clone of `lowered` that defines `name` and only what it uses: the
/// other kernels' functions are erased (a kernel calls no other kernel;
/// one that is used stays), so that LLVM optimizes and generates code for
/// one kernel, not the whole program.
static OwningOpRef<ModuleOp> kernelModule(ModuleOp lowered, StringRef name) {
  OwningOpRef<ModuleOp> one = lowered.clone();
  SmallVector<LLVM::LLVMFuncOp> others;
  for (auto fn : one->getOps<LLVM::LLVMFuncOp>())
    if (!fn.isExternal() && fn.getSymName() != name &&
        SymbolTable::symbolKnownUseEmpty(fn, *one))
      others.push_back(fn);
  for (LLVM::LLVMFuncOp fn : others)
    fn.erase();
  return one;
}

/// Adds `packed`, the entry point CPUKernels::run calls: `void packed(void
/// **args)`, where args[i] points to the kernel's i-th argument.
static llvm::Error addPackedEntry(llvm::Module &module, StringRef name,
                                  StringRef packed) {
  llvm::Function *kernel = module.getFunction(name);
  if (!kernel || kernel->isDeclaration())
    return llvm::createStringError("no function '" + name +
                                   "' in the translated module");
  if (!kernel->getReturnType()->isVoidTy())
    return llvm::createStringError("kernel '" + name + "' returns a value");
  llvm::LLVMContext &ctx = module.getContext();
  llvm::Type *ptr = llvm::PointerType::getUnqual(ctx);
  auto *entry = llvm::Function::Create(
      llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr}, false),
      llvm::GlobalValue::ExternalLinkage, packed, module);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", entry));
  SmallVector<llvm::Value *> args;
  for (llvm::Argument &param : kernel->args()) {
    llvm::Value *slot =
        b.CreateConstGEP1_64(ptr, entry->getArg(0), param.getArgNo());
    args.push_back(b.CreateLoad(param.getType(), b.CreateLoad(ptr, slot)));
  }
  b.CreateCall(kernel, args);
  b.CreateRetVoid();
  return llvm::Error::success();
}

void CPUKernels::setObjectCacheDir(StringRef dir) {
  std::lock_guard<std::mutex> lock(mutex);
  objectCacheDir = dir.str();
}

/// Which build of this code runs: the path, size and modification time of
/// the file it was loaded from (libFlexSN.so, or an executable that links
/// it statically). Every step from a lowered module to its object file
/// that is not LLVM's is this file's code, so a rebuild must not reuse an
/// older build's objects.
static const std::string &buildIdentity() {
  static const std::string identity = [] {
    Dl_info info{};
    if (!dladdr(reinterpret_cast<void *>(&buildIdentity), &info) ||
        !info.dli_fname)
      return std::string("unknown build");
    struct stat st {};
    if (stat(info.dli_fname, &st) != 0)
      return std::string(info.dli_fname);
    return std::string(info.dli_fname) + ":" + std::to_string(st.st_size) +
           ":" + std::to_string(int64_t(st.st_mtim.tv_sec)) + "." +
           std::to_string(int64_t(st.st_mtim.tv_nsec));
  }();
  return identity;
}

/// The object-cache key of `one` (a kernel's module) for `machine`.
static std::string objectKey(ModuleOp one, const llvm::TargetMachine &machine) {
  std::string text;
  llvm::raw_string_ostream os(text);
  one.print(os, OpPrintingFlags().enableDebugInfo(false));
  llvm::SHA256 hash;
  for (StringRef part :
       {StringRef(CPUKernels::kObjectFormat), StringRef(buildIdentity()),
        StringRef(LLVM_VERSION_STRING),
        StringRef(machine.getTargetTriple().str()), machine.getTargetCPU(),
        machine.getTargetFeatureString(),
        StringRef(vectorMathLibrary() == llvm::VectorLibrary::LIBMVEC
                      ? "libmvec"
                      : "no vector library"),
        StringRef(text)}) {
    hash.update(part);
    hash.update(StringRef("\0", 1));
  }
  return llvm::toHex(hash.final(), /*LowerCase=*/true).substr(0, 40);
}

// A cached object file ends with a trailer: this marker, then the SHA-256
// of the object before it in hex. A file cut short, or changed after it was
// written, fails the check and is compiled again.
static constexpr llvm::StringLiteral kTrailerMark = "\nflexsn-sha256:";
static constexpr size_t kTrailerSize = kTrailerMark.size() + 64;

static std::string sha256Hex(StringRef bytes) {
  return llvm::toHex(llvm::SHA256::hash(llvm::arrayRefFromStringRef(bytes)),
                     /*LowerCase=*/true);
}

/// Whether `path` is an entry this process may trust: a regular file (not a
/// symbolic link) owned by this user and writable by no one else.
static bool trustedEntry(StringRef path) {
  llvm::sys::fs::file_status st;
  if (llvm::sys::fs::status(path, st, /*Follow=*/false) ||
      st.type() != llvm::sys::fs::file_type::regular_file ||
      st.getUser() != ::geteuid())
    return false;
  return (st.permissions() &
          (llvm::sys::fs::group_write | llvm::sys::fs::others_write)) == 0;
}

/// The object file cached at `path` when it is whole, trusted and defines
/// `symbol`; a file there that is not says so on stderr (it is compiled
/// again and replaced).
static std::unique_ptr<llvm::MemoryBuffer> readObject(StringRef path,
                                                      StringRef symbol) {
  if (!llvm::sys::fs::exists(path))
    return nullptr;
  auto refuse = [&](StringRef why) -> std::unique_ptr<llvm::MemoryBuffer> {
    llvm::errs() << "flexsn: the cached CPU kernel " << path << " " << why
                 << "; compiling it again\n";
    return nullptr;
  };
  if (!trustedEntry(path))
    return refuse("is not a regular file of this user writable by it alone");
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!file)
    return nullptr;
  StringRef bytes = (*file)->getBuffer();
  if (bytes.size() < kTrailerSize ||
      !bytes.substr(bytes.size() - kTrailerSize).starts_with(kTrailerMark))
    return refuse("has no checksum (damaged, or written by another version)");
  StringRef body = bytes.drop_back(kTrailerSize);
  if (sha256Hex(body) != bytes.take_back(64))
    return refuse("fails its checksum (damaged)");
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(body, path);
  auto object =
      llvm::object::ObjectFile::createObjectFile(buffer->getMemBufferRef());
  if (!object) {
    llvm::consumeError(object.takeError());
    return refuse("is not an object file");
  }
  for (const llvm::object::SymbolRef &sym : (*object)->symbols()) {
    auto flags = sym.getFlags();
    auto name = sym.getName();
    if (!flags || !name) {
      llvm::consumeError(flags.takeError());
      llvm::consumeError(name.takeError());
      continue;
    }
    if (*name == symbol && !(*flags & llvm::object::SymbolRef::SF_Undefined))
      return buffer;
  }
  return refuse("does not define its kernel");
}

/// Writes `object` and its trailer to `path` (readable and writable by this
/// user only), whole or not at all: a failure only costs a later process
/// the compile.
static void writeObject(StringRef dir, StringRef path,
                        llvm::MemoryBufferRef object) {
  if (llvm::sys::fs::create_directories(dir, /*IgnoreExisting=*/true,
                                        llvm::sys::fs::owner_all))
    return;
  llvm::SmallString<256> model(dir), temporary;
  llvm::sys::path::append(model, ".tmp-cpu-%%%%%%%%.o");
  int fd = -1;
  if (llvm::sys::fs::createUniqueFile(
          model, fd, temporary, llvm::sys::fs::OF_None,
          llvm::sys::fs::owner_read | llvm::sys::fs::owner_write))
    return;
  llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
  os << object.getBuffer() << kTrailerMark << sha256Hex(object.getBuffer());
  os.close();
  if (os.has_error() || llvm::sys::fs::rename(temporary, path)) {
    os.clear_error();
    llvm::sys::fs::remove(temporary);
  }
}

llvm::Expected<CPUKernels::KernelFn>
CPUKernels::link(std::unique_ptr<llvm::MemoryBuffer> object, StringRef packed) {
  std::lock_guard<std::mutex> jitLock(SharedJIT::mutex);
  auto shared = SharedJIT::get();
  if (!shared)
    return shared.takeError();
  llvm::orc::LLJIT &jit = *(*shared)->jit;
  auto dylib =
      jit.createJITDylib("flexsn." + std::to_string((*shared)->nextDylib++));
  if (!dylib)
    return dylib.takeError();
  auto address = [&]() -> llvm::Expected<llvm::orc::ExecutorAddr> {
    if (llvm::Error e = jit.addObjectFile(*dylib, std::move(object)))
      return std::move(e);
    return jit.lookup(*dylib, packed);
  }();
  if (!address) {
    llvm::consumeError(jit.getExecutionSession().removeJITDylib(*dylib));
    return address.takeError();
  }
  dylibs.push_back(&*dylib);
  return address->toPtr<KernelFn>();
}

llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
CPUKernels::compile(ModuleOp one, StringRef name, StringRef packed) {
  // Translation reports through the context's diagnostics: kept for the
  // error message.
  std::string diagnostics;
  auto context = std::make_unique<llvm::LLVMContext>();
  std::unique_ptr<llvm::Module> module;
  {
    ScopedDiagnosticHandler handler(one->getContext(), [&](Diagnostic &d) {
      diagnostics += (diagnostics.empty() ? "" : "; ") + d.str();
      return success();
    });
    module = translateModuleToLLVMIR(one, *context, name);
  }
  if (!module)
    return llvm::createStringError(
        "cannot translate it to LLVM IR" +
        (diagnostics.empty() ? std::string() : " (" + diagnostics + ")"));
  module->setDataLayout(targetMachine->createDataLayout());
  module->setTargetTriple(targetMachine->getTargetTriple());
  if (llvm::Error e = addPackedEntry(*module, name, packed))
    return std::move(e);

  // LLVM's optimizer, with the host's target machine and libraries.
  {
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
    // O2, not O3: the same kernel speed (flexsn-run --bench, lif, plif and
    // two_in_two_state, every variant measured; a generated 300-op core's
    // training and inference steps) for half the JIT time of a large core
    // (0.23 -> 0.12 s for the 300-op core's forward).
    passes.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2)
        .run(*module, mam);
  }
  llvm::orc::SimpleCompiler compiler(*targetMachine);
  return compiler(*module);
}

llvm::Expected<CPUKernels::KernelFn> CPUKernels::lookup(StringRef name) {
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = entries.find(name); it != entries.end())
    return it->second;
  auto fn = lowered->lookupSymbol<LLVM::LLVMFuncOp>(name);
  if (!fn || fn.isExternal())
    return llvm::createStringError("no CPU kernel named '" + name + "'");
  auto failed = [&](llvm::Error e) {
    return llvm::createStringError("JIT compilation of CPU kernel '" + name +
                                   "' failed: " + llvm::toString(std::move(e)));
  };
  OwningOpRef<ModuleOp> one = kernelModule(*lowered, name);
  std::string packed = ("_mlir_" + name).str();

  // From the object cache, when this program has one and it holds the
  // kernel.
  std::string cachePath;
  if (!objectCacheDir.empty()) {
    llvm::SmallString<256> path(objectCacheDir);
    llvm::sys::path::append(path,
                            "cpu-" + objectKey(*one, *targetMachine) + ".o");
    cachePath = std::string(path);
    if (auto object = readObject(cachePath, packed)) {
      auto entry = link(std::move(object), packed);
      if (entry) {
        entries[name] = *entry;
        return *entry;
      }
      llvm::consumeError(entry.takeError()); // compiled again below
    }
  }

  // Compiled, then linked (and the object cached, when the program has a
  // cache).
  auto object = compile(*one, name, packed);
  if (!object)
    return failed(object.takeError());
  if (!cachePath.empty())
    writeObject(objectCacheDir, cachePath, (*object)->getMemBufferRef());
  auto entry = link(std::move(*object), packed);
  if (!entry)
    return failed(entry.takeError());
  entries[name] = *entry;
  return *entry;
}

namespace {
/// The process's kernel worker threads, started on first need and kept:
/// a launch wakes waiting workers instead of starting threads (starting and
/// joining two std::threads cost about 60 us on the build machine, 15 times
/// the kernel at T=1 NCL=8192). The calling thread and the workers claim a
/// launch's chunks under the pool's mutex alike, so a launch finishes even
/// while every worker runs another launch's chunks, and several threads
/// may launch at once. A forked child starts a pool of its own (the
/// parent's workers do not exist there).
class WorkerPool {
public:
  static WorkerPool &get() {
    // Never deleted: its workers wait forever.
    return PerProcess<WorkerPool>::get([] { return new WorkerPool; });
  }

  /// Runs body(0) .. body(chunks - 1) on the calling thread and up to
  /// chunks - 1 workers; returns when every chunk has run.
  void parallelFor(unsigned chunks, llvm::function_ref<void(unsigned)> body) {
    Job job{body, chunks};
    std::unique_lock<std::mutex> lock(mutex);
    for (; numWorkers + 1 < std::min(chunks, kMaxWorkers + 1); ++numWorkers)
      std::thread([this] { work(); }).detach();
    queue.push_back(&job);
    for (unsigned i = 1; i < chunks; ++i)
      wake.notify_one();
    while (claim(job))
      runChunk(job, lock);
    finished.wait(lock, [&] { return job.done == job.chunks; });
  }

private:
  struct Job {
    llvm::function_ref<void(unsigned)> body;
    unsigned chunks;
    unsigned next = 0; // the next chunk to claim
    unsigned done = 0; // chunks run
  };
  static constexpr unsigned kMaxWorkers = 255;

  /// With `mutex` held: claims `job`'s next chunk, if any, and takes the
  /// job off the queue when that was its last.
  bool claim(Job &job) {
    if (job.next == job.chunks)
      return false;
    if (++job.next == job.chunks)
      queue.erase(std::find(queue.begin(), queue.end(), &job));
    return true;
  }

  /// Runs the chunk just claimed with `lock` released. Nothing touches the
  /// job after its last chunk's `done` increment: its caller may then
  /// return and free it.
  void runChunk(Job &job, std::unique_lock<std::mutex> &lock) {
    unsigned chunk = job.next - 1;
    lock.unlock();
    job.body(chunk);
    lock.lock();
    if (++job.done == job.chunks)
      finished.notify_all();
  }

  void work() {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      wake.wait(lock, [&] { return !queue.empty(); });
      Job &job = *queue.front();
      if (claim(job))
        runChunk(job, lock);
    }
  }

  std::mutex mutex;
  std::condition_variable wake, finished;
  std::deque<Job *> queue;
  unsigned numWorkers = 0;
};
} // namespace

void CPUKernels::adviseHugePages(void *ptr, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  static const bool enabled = [] {
    const char *v = std::getenv("FLEXSN_HUGE_PAGES");
    if (!v)
      return true;
    llvm::StringRef s = llvm::StringRef(v).trim();
    return !(s == "0" || s.equals_insensitive("off") ||
             s.equals_insensitive("no") || s.equals_insensitive("false"));
  }();
  if (!enabled || !ptr || bytes < kHugePageAdviceBytes)
    return;
  constexpr uintptr_t kHuge = uintptr_t(2) << 20;
  uintptr_t begin = reinterpret_cast<uintptr_t>(ptr);
  uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1);
  uintptr_t last = (begin + bytes) & ~(kHuge - 1);
  if (last > first)
    (void)madvise(reinterpret_cast<void *>(first), last - first, MADV_HUGEPAGE);
#else
  (void)ptr;
  (void)bytes;
#endif
}

void CPUKernels::run(KernelFn fn, ArrayRef<void *> ptrs, int64_t T,
                     int64_t NCL, unsigned threads) {
  if (threads == 0)
    threads = std::max(1u, std::thread::hardware_concurrency());
  // Chunks of whole neuron blocks (the kernels' vector loops stay whole),
  // each worth waking a worker for: at least kMinChunkWork neuron-steps.
  int64_t blocks = (NCL + kCPUBlockNeurons - 1) / kCPUBlockNeurons;
  int64_t work = std::max<int64_t>(T, 1) * NCL;
  int64_t chunks = std::max<int64_t>(
      1, std::min<int64_t>({threads, blocks, work / kMinChunkWork}));
  auto runRange = [&](int64_t begin, int64_t end) {
    // The packed entry takes a pointer to each argument.
    llvm::SmallVector<void *, 32> values(ptrs.begin(), ptrs.end());
    int64_t scalars[4] = {T, NCL, begin, end};
    llvm::SmallVector<void *, 36> args;
    for (void *&p : values)
      args.push_back(&p);
    for (int64_t &s : scalars)
      args.push_back(&s);
    fn(args.data());
  };
  if (chunks == 1) { // NCL = 0 included: final states still copy through
    runRange(0, NCL);
    return;
  }
  int64_t perBlocks = (blocks + chunks - 1) / chunks;
  chunks = (blocks + perBlocks - 1) / perBlocks; // none left empty
  int64_t per = perBlocks * kCPUBlockNeurons;
  WorkerPool::get().parallelFor(unsigned(chunks), [&](unsigned c) {
    int64_t begin = c * per;
    runRange(begin, std::min(NCL, begin + per));
  });
}
