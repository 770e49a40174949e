//===- FlexSNCAPI.cpp - C API of FlexSN-MLIR (version 3) ------------------===//
//
// Programs own the compiled module (the CPU kernels, JIT-compiled one by
// one into the process's shared JIT, or PTX), its manifest as a typed
// structure and its kernel handles. A kernel handle carries what a
// launch needs (entry point, pointer shapes, launch geometry) so that a
// launch only validates its arguments and runs.
//
//===----------------------------------------------------------------------===//

#include "flexsn-c/FlexSN.h"

#include "flexsn/InitAllDialects.h"
#include "flexsn/Pipelines/Pipelines.h"
#include "flexsn/Target/Manifest.h"
#include "flexsn/Target/PTX.h"
#include "flexsn/Runtime/CPU/CPUBackend.h"
#include "flexsn/Runtime/CUDA/CUDARuntime.h"
#include "flexsn/Support/PerProcess.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

using namespace mlir;
using namespace mlir::flexsn;

struct flexsn_kernel {
  const ManifestKernel *info = nullptr;
  flexsn_target target = FLEXSN_TARGET_CPU;
  /// Each pointer argument, in launch order.
  struct Pointer {
    ArgShape shape;
    unsigned elementBytes;
    /// May be null: the kernel reads zeros.
    bool optional;
    /// Written by the kernel (a result), not only read.
    bool written;
  };
  llvm::SmallVector<Pointer> pointers;
  CPUKernels::KernelFn cpuFn = nullptr;
  /// Its entries, each compiled by the driver on the first launch that
  /// takes it.
  std::unique_ptr<cuda::ScanKernel> cuda;
};

struct flexsn_program {
  flexsn_target target = FLEXSN_TARGET_CPU;
  std::unique_ptr<MLIRContext> context;
  std::unique_ptr<CPUKernels> cpu;
  std::string ptx, manifestText;
  Manifest manifest;
  std::mutex mutex; // guards `kernels`
  std::map<std::pair<std::string, int>, std::unique_ptr<flexsn_kernel>>
      kernels;
};

namespace {
char *copyString(llvm::StringRef s) {
  char *out = static_cast<char *>(std::malloc(s.size() + 1));
  if (!out)
    return nullptr;
  std::memcpy(out, s.data(), s.size());
  out[s.size()] = '\0';
  return out;
}

int failWith(char **error, llvm::StringRef message) {
  if (error)
    *error = copyString(message);
  return 1;
}

int failWith(char **error, llvm::Error e) {
  return failWith(error, llvm::toString(std::move(e)));
}

/// The worker threads every program's context compiles on (MLIR's parallel
/// passes, the PTX of kernel entries in parallel). A context made with
/// threading on starts a pool of its own, one thread per hardware thread,
/// and keeps it while the program lives: 40 CPU configurations of one core
/// left 160 threads in a process of the 2-core build machine, and on a
/// 128-core host each program would hold 128.
llvm::ThreadPoolInterface &sharedThreadPool() {
  return PerProcess<llvm::DefaultThreadPool>::get([] {
    return new llvm::DefaultThreadPool(llvm::hardware_concurrency());
  });
}

std::unique_ptr<MLIRContext> makeContext() {
  DialectRegistry registry;
  registerAllDialects(registry);
  auto context = std::make_unique<MLIRContext>(
      registry, MLIRContext::Threading::DISABLED);
  context->setThreadPool(sharedThreadPool());
  context->loadAllAvailableDialects();
  // An error names its op through its location; a note that prints the op
  // would dump the whole (lowered) module into the message.
  context->printOpOnDiagnostic(false);
  return context;
}

/// Runs `fn` with MLIR diagnostics captured as text: the location and
/// message of each, and of its notes.
template <typename Fn>
int withDiagnostics(MLIRContext &context, char **error, Fn fn) {
  std::string messages;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    llvm::raw_string_ostream os(messages);
    auto where = [&](Location loc) {
      if (auto file = dyn_cast<FileLineColLoc>(loc))
        os << file.getFilename().getValue() << ":" << file.getLine() << ":"
           << file.getColumn();
      else
        os << loc;
    };
    where(diag.getLocation());
    os << (diag.getSeverity() == DiagnosticSeverity::Error ? ": error: "
                                                            : ": ")
       << diag << "\n";
    for (Diagnostic &note : diag.getNotes()) {
      where(note.getLocation());
      os << ": note: " << note << "\n";
    }
    return success();
  });
  if (succeeded(fn()))
    return 0;
  return failWith(error, messages.empty() ? "compilation failed" : messages);
}

/// The process's CUDA devices, opened once each (their primary contexts
/// and module caches live as long as the process).
llvm::Expected<cuda::Device *> getDevice(int ordinal) {
  static std::mutex mutex;
  // Never destroyed: a kernel's preload may still be compiling on its own
  // thread when the process exits, and the driver releases contexts at
  // exit anyway.
  static auto *devices = new std::map<int, std::unique_ptr<cuda::Device>>;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = devices->find(ordinal);
  if (it != devices->end())
    return it->second.get();
  auto opened = cuda::Device::open(ordinal);
  if (!opened)
    return opened.takeError();
  cuda::Device *device = opened->get();
  devices->emplace(ordinal, std::move(*opened));
  return device;
}

/// Byte size of a pointer argument of `shape`, or failure on overflow.
bool bufferBytes(ArgShape shape, unsigned elementBytes, int64_t T,
                 int64_t NCL, int64_t &bytes) {
  std::optional<int64_t> elements = getElementCount(shape, T, NCL);
  return elements &&
         !__builtin_mul_overflow(*elements, int64_t(elementBytes), &bytes);
}
} // namespace

extern "C" {

int flexsn_api_version(void) { return FLEXSN_API_VERSION; }

const char *flexsn_version(void) { return "flexsn-mlir 0.5, MLIR 22"; }

void flexsn_free(void *ptr) { std::free(ptr); }

int flexsn_program_create(const char *mlir_source, flexsn_target target,
                          const char *options, flexsn_program **program,
                          char **error) {
  if (!program)
    return failWith(error, "program must not be NULL");
  *program = nullptr;
  if (!mlir_source)
    return failWith(error, "mlir_source must not be NULL");
  if (target != FLEXSN_TARGET_CPU && target != FLEXSN_TARGET_CUDA)
    return failWith(error, "unknown target " + std::to_string(int(target)) +
                               " (FLEXSN_TARGET_CPU or FLEXSN_TARGET_CUDA)");
  std::string message;
  std::unique_ptr<PipelineOptions> o =
      PipelineOptions::parse(options ? options : "", message);
  if (!o)
    return failWith(error, "options: " + message);
  auto result = std::make_unique<flexsn_program>();
  result->target = target;
  result->context = makeContext();
  MLIRContext &context = *result->context;
  int r = withDiagnostics(context, error, [&]() -> LogicalResult {
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(
        mlir_source, ParserConfig(&context), "<flexsn source>");
    if (!module)
      return failure();
    if (failed(prepareModule(*module, *o)))
      return failure();
    FailureOr<Manifest> manifest = buildManifest(
        *module,
        target == FLEXSN_TARGET_CUDA ? ManifestTarget::CUDA
                                     : ManifestTarget::CPU,
        *o);
    if (failed(manifest))
      return failure();
    result->manifest = std::move(*manifest);
    llvm::raw_string_ostream os(result->manifestText);
    printManifest(result->manifest, os);
    if (target == FLEXSN_TARGET_CPU) {
      auto compiled = CPUKernels::compile(*module);
      if (failed(compiled))
        return failure();
      result->cpu = std::move(*compiled);
      return success();
    }
    FailureOr<std::string> ptx = translateToPTX(*module, *o);
    if (failed(ptx))
      return failure();
    result->ptx = std::move(*ptx);
    return success();
  });
  if (r == 0)
    *program = result.release();
  return r;
}

int flexsn_program_load_cuda(const char *ptx, const char *manifest,
                             flexsn_program **program, char **error) {
  if (!program)
    return failWith(error, "program must not be NULL");
  *program = nullptr;
  if (!ptx || !manifest)
    return failWith(error, "ptx and manifest must not be NULL");
  auto result = std::make_unique<flexsn_program>();
  result->target = FLEXSN_TARGET_CUDA;
  llvm::Expected<Manifest> parsed = parseManifest(manifest);
  if (!parsed)
    return failWith(error, parsed.takeError());
  if (parsed->target != ManifestTarget::CUDA)
    return failWith(error, "the manifest is not a CUDA program's");
  result->manifest = std::move(*parsed);
  if (!llvm::StringRef(ptx).contains(".entry"))
    return failWith(error, "the PTX holds no kernel entry");
  result->ptx = ptx;
  result->manifestText = manifest;
  *program = result.release();
  return 0;
}

const char *flexsn_program_manifest(const flexsn_program *program) {
  return program ? program->manifestText.c_str() : "";
}

const char *flexsn_program_ptx(const flexsn_program *program) {
  return program ? program->ptx.c_str() : "";
}

int flexsn_program_set_cpu_cache_dir(flexsn_program *program,
                                     const char *dir, char **error) {
  if (!program)
    return failWith(error, "flexsn_program_set_cpu_cache_dir: null program");
  if (program->target != FLEXSN_TARGET_CPU || !program->cpu)
    return failWith(error, "flexsn_program_set_cpu_cache_dir: not a CPU "
                           "program (a CUDA program's PTX is what a cache "
                           "keeps: flexsn_program_ptx)");
  program->cpu->setObjectCacheDir(dir ? dir : "");
  return 0;
}

flexsn_target flexsn_program_target(const flexsn_program *program) {
  return program ? program->target : FLEXSN_TARGET_CPU;
}

void flexsn_program_destroy(flexsn_program *program) { delete program; }

int flexsn_kernel_get(flexsn_program *program, const char *name, int device,
                      flexsn_kernel **kernel, char **error) {
  if (!program || !name || !kernel)
    return failWith(error, "program, name and kernel must not be NULL");
  *kernel = nullptr;
  const ManifestKernel *info = program->manifest.lookup(name);
  if (!info) {
    std::string known;
    for (const ManifestKernel &k : program->manifest.kernels)
      known += (known.empty() ? "" : ", ") + k.name;
    return failWith(error, std::string("no kernel named '") + name +
                               "' in the program (it has: " + known + ")");
  }
  if (program->target == FLEXSN_TARGET_CPU && device != 0)
    return failWith(error, "a CPU program runs on device 0 only, not " +
                               std::to_string(device));
  if (device < 0)
    return failWith(error, "device must be >= 0, not " + std::to_string(device));

  std::lock_guard<std::mutex> lock(program->mutex);
  auto &slot = program->kernels[{std::string(name), device}];
  if (slot) {
    *kernel = slot.get();
    return 0;
  }
  auto k = std::make_unique<flexsn_kernel>();
  k->info = info;
  k->target = program->target;
  for (const ManifestArg &a : info->args)
    if (a.isPointer)
      k->pointers.push_back(
          {a.shape, a.elementBytes, a.optional, isResultRole(a.role)});
  if (program->target == FLEXSN_TARGET_CPU) {
    // The kernel's first lookup compiles it (CPUKernels::lookup).
    auto fn = program->cpu->lookup(name);
    if (!fn)
      return failWith(error, fn.takeError());
    k->cpuFn = *fn;
  } else {
    auto dev = getDevice(device);
    if (!dev)
      return failWith(error, dev.takeError());
    const LaunchGeometry &geometry = *info->geometry;
    llvm::SmallVector<cuda::ScanKernel::Pointer> pointers;
    for (const auto &p : k->pointers)
      pointers.push_back(
          {p.elementBytes, p.shape != ArgShape::Scalar});
    auto scan = cuda::ScanKernel::create(**dev, program->ptx, name,
                                         info->scalarEntry, info->deepEntry,
                                         info->deepPrefetch, geometry.blockSize,
                                         geometry.neuronsPerThread, pointers);
    if (!scan)
      return failWith(error, scan.takeError());
    k->cuda = std::move(*scan);
  }
  slot = std::move(k);
  *kernel = slot.get();
  return 0;
}

size_t flexsn_kernel_num_pointers(const flexsn_kernel *kernel) {
  return kernel ? kernel->pointers.size() : 0;
}

int flexsn_kernel_pointer(const flexsn_kernel *kernel, size_t index,
                          int *shape, unsigned *element_bytes, int *written,
                          int *optional, char **error) {
  if (!kernel || !shape || !element_bytes || !written || !optional)
    return failWith(error, "kernel and the results must not be NULL");
  if (index >= kernel->pointers.size())
    return failWith(error, "kernel '" + kernel->info->name + "' has " +
                               std::to_string(kernel->pointers.size()) +
                               " pointers, not #" + std::to_string(index));
  const flexsn_kernel::Pointer &p = kernel->pointers[index];
  *shape = p.shape == ArgShape::Sequence    ? 0
           : p.shape == ArgShape::PerNeuron ? 1
                                            : 2;
  *element_bytes = p.elementBytes;
  *written = p.written;
  *optional = p.optional;
  return 0;
}

int flexsn_kernel_preload(const flexsn_kernel *kernel, int64_t NCL,
                          char **error) {
  if (!kernel)
    return failWith(error, "kernel must not be NULL");
  if (kernel->cuda)
    kernel->cuda->preload(NCL);
  return 0;
}

int flexsn_kernel_launch(const flexsn_kernel *kernel, void *const *ptrs,
                         size_t num_ptrs, int64_t T, int64_t NCL,
                         void *stream, unsigned threads, char **error) {
  if (!kernel)
    return failWith(error, "kernel must not be NULL");
  const std::string &name = kernel->info->name;
  if (num_ptrs != kernel->pointers.size())
    return failWith(error, "kernel '" + name + "' takes " +
                               std::to_string(kernel->pointers.size()) +
                               " pointers, got " + std::to_string(num_ptrs));
  if (num_ptrs && !ptrs)
    return failWith(error, "ptrs must not be NULL");
  if (T < 0 || NCL < 0)
    return failWith(error, "T and NCL must be >= 0 (got T=" +
                               std::to_string(T) +
                               ", NCL=" + std::to_string(NCL) + ")");
  llvm::SmallVector<int64_t, 16> sizes;
  for (auto [i, p] : llvm::enumerate(kernel->pointers)) {
    int64_t bytes;
    if (!bufferBytes(p.shape, p.elementBytes, T, NCL, bytes))
      return failWith(error, "the buffer of pointer #" + std::to_string(i) +
                                 " of kernel '" + name +
                                 "' overflows 64 bits at T=" +
                                 std::to_string(T) +
                                 ", NCL=" + std::to_string(NCL));
    if (bytes > 0 && !ptrs[i] && !p.optional)
      return failWith(error, "pointer #" + std::to_string(i) + " of kernel '" +
                                 name + "' is NULL but its buffer holds " +
                                 std::to_string(bytes) + " bytes");
    sizes.push_back(bytes);
  }
  if (kernel->target == FLEXSN_TARGET_CPU) {
    for (auto [i, p] : llvm::enumerate(kernel->pointers))
      if (p.written)
        CPUKernels::adviseHugePages(ptrs[i], size_t(sizes[i]));
    CPUKernels::run(kernel->cpuFn, llvm::ArrayRef<void *>(ptrs, num_ptrs), T,
                    NCL, threads);
    return 0;
  }
  if (llvm::Error e = kernel->cuda->launch(
          llvm::ArrayRef<void *>(ptrs, num_ptrs), T, NCL,
          static_cast<cuda::Stream>(stream)))
    return failWith(error, std::move(e));
  return 0;
}

int flexsn_cuda_device_count(int *count, char **error) {
  if (!count)
    return failWith(error, "count must not be NULL");
  auto n = cuda::Device::count();
  if (!n)
    return failWith(error, n.takeError());
  *count = *n;
  return 0;
}

int flexsn_cuda_device_info(int device, int *capability, char **description,
                            char **error) {
  if (device < 0)
    return failWith(error, "device must be >= 0, not " + std::to_string(device));
  auto dev = getDevice(device);
  if (!dev)
    return failWith(error, dev.takeError());
  if (capability)
    *capability = (*dev)->computeCapability();
  if (description)
    *description = copyString((*dev)->describe());
  return 0;
}

int flexsn_cuda_synchronize(int device, char **error) {
  auto dev = getDevice(device);
  if (!dev)
    return failWith(error, dev.takeError());
  if (llvm::Error e = (*dev)->synchronize())
    return failWith(error, std::move(e));
  return 0;
}

} // extern "C"
