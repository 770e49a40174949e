//===- FlexSNCAPI.cpp - C API of FlexSN-MLIR -------------------------------===//

#include "flexsn-c/FlexSN.h"

#include "flexsn/InitAllDialects.h"
#include "flexsn/Pipelines/Pipelines.h"
#include "flexsn/Runtime/CPU/CPUBackend.h"
#include "flexsn/Runtime/CUDA/CUDARuntime.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <cstring>

using namespace mlir;
using namespace mlir::flexsn;

struct flexsn_program {
  std::string ptx, manifest;
};

struct flexsn_cpu_kernels {
  std::unique_ptr<MLIRContext> context;
  std::unique_ptr<CPUKernels> kernels;
};

struct flexsn_cuda_device {
  std::unique_ptr<cuda::Device> device;
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

/// Parsed `key=value` options.
struct Options {
  GPUOptions gpu;
  bool differentiate = false;
  std::vector<std::string> saveOps;
};

int parseOptions(const char *text, Options &o, char **error) {
  llvm::SmallVector<llvm::StringRef> words;
  llvm::StringRef(text ? text : "").split(words, ' ', -1, false);
  for (llvm::StringRef word : words) {
    auto [key, value] = word.split('=');
    unsigned n = 0;
    if (key == "chip")
      o.gpu.chip = value.str();
    else if (key == "cuda-home")
      o.gpu.cudaHome = value.str();
    else if (key == "neurons-per-thread" && !value.getAsInteger(10, n))
      o.gpu.neuronsPerThread = n;
    else if (key == "block-size" && !value.getAsInteger(10, n))
      o.gpu.blockSize = n;
    else if (key == "differentiate" && (value == "1" || value == "0"))
      o.differentiate = value == "1";
    else if (key == "save-ops")
      for (llvm::StringRef op : llvm::split(value, ','))
        o.saveOps.push_back(op.str());
    else
      return failWith(error, ("unknown or malformed option '" + word +
                              "' (keys: chip, neurons-per-thread, block-size, "
                              "cuda-home, differentiate=0|1, save-ops)")
                                 .str());
  }
  if (!o.saveOps.empty() && !o.differentiate)
    return failWith(error, "save-ops needs differentiate=1");
  return 0;
}

std::unique_ptr<MLIRContext> makeContext() {
  DialectRegistry registry;
  registerAllDialects(registry);
  auto context = std::make_unique<MLIRContext>(registry);
  context->loadAllAvailableDialects();
  return context;
}

/// Parses `source` (and differentiates on request), collecting diagnostics
/// into `diagnostics`.
OwningOpRef<ModuleOp> load(MLIRContext &context, const char *source,
                           const Options &o) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(
      source ? source : "", ParserConfig(&context), "<flexsn source>");
  if (module && o.differentiate &&
      failed(differentiateModule(*module, o.saveOps)))
    return nullptr;
  return module;
}

/// Runs `fn` with MLIR diagnostics captured as text.
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
} // namespace

extern "C" {

const char *flexsn_version(void) { return "flexsn-mlir 0.3, MLIR 22"; }

void flexsn_free(void *ptr) { std::free(ptr); }

int flexsn_compile(const char *mlir_source, const char *options,
                   flexsn_program **program, char **error) {
  Options o;
  if (int r = parseOptions(options, o, error))
    return r;
  std::unique_ptr<MLIRContext> context = makeContext();
  auto result = std::make_unique<flexsn_program>();
  int r = withDiagnostics(*context, error, [&]() -> LogicalResult {
    OwningOpRef<ModuleOp> module = load(*context, mlir_source, o);
    if (!module)
      return failure();
    FailureOr<std::string> ptx = translateToPTX(*module, o.gpu);
    if (failed(ptx))
      return failure();
    result->ptx = std::move(*ptx);
    llvm::raw_string_ostream os(result->manifest);
    return writeManifest(*module, o.gpu, os);
  });
  if (r == 0)
    *program = result.release();
  return r;
}

const char *flexsn_program_ptx(const flexsn_program *program) {
  return program->ptx.c_str();
}

const char *flexsn_program_manifest(const flexsn_program *program) {
  return program->manifest.c_str();
}

void flexsn_program_destroy(flexsn_program *program) { delete program; }

int flexsn_cpu_compile(const char *mlir_source, const char *options,
                       flexsn_cpu_kernels **kernels, char **error) {
  Options o;
  if (int r = parseOptions(options, o, error))
    return r;
  auto result = std::make_unique<flexsn_cpu_kernels>();
  result->context = makeContext();
  int r = withDiagnostics(*result->context, error, [&]() -> LogicalResult {
    OwningOpRef<ModuleOp> module = load(*result->context, mlir_source, o);
    if (!module)
      return failure();
    auto compiled = CPUKernels::compile(*module);
    if (failed(compiled))
      return failure();
    result->kernels = std::move(*compiled);
    return success();
  });
  if (r == 0)
    *kernels = result.release();
  return r;
}

int flexsn_cpu_run(flexsn_cpu_kernels *kernels, const char *name,
                   void *const *ptrs, size_t num_ptrs, int64_t T, int64_t NCL,
                   unsigned threads, char **error) {
  if (T < 0 || NCL < 0)
    return failWith(error, "T and NCL must be >= 0");
  auto fn = kernels->kernels->lookup(name ? name : "");
  if (failed(fn))
    return failWith(error, std::string("no CPU kernel named '") +
                               (name ? name : "") + "'");
  CPUKernels::run(*fn, llvm::ArrayRef<void *>(ptrs, num_ptrs), T, NCL,
                  threads);
  return 0;
}

void flexsn_cpu_destroy(flexsn_cpu_kernels *kernels) { delete kernels; }

int flexsn_cuda_open(int ordinal, flexsn_cuda_device **device,
                     char **error) {
  auto opened = cuda::Device::open(ordinal);
  if (!opened)
    return failWith(error, opened.takeError());
  *device = new flexsn_cuda_device{std::move(*opened)};
  return 0;
}

char *flexsn_cuda_describe(const flexsn_cuda_device *device) {
  return copyString(device->device->describe());
}

int flexsn_cuda_capability(const flexsn_cuda_device *device) {
  return device->device->computeCapability();
}

int flexsn_cuda_launch(flexsn_cuda_device *device, const char *ptx,
                       const char *name, const uint64_t *ptrs,
                       size_t num_ptrs, int64_t T, int64_t NCL,
                       unsigned block_size, unsigned neurons_per_thread,
                       void *stream, char **error) {
  if (T < 0 || NCL < 0)
    return failWith(error, "T and NCL must be >= 0");
  if (block_size == 0 || neurons_per_thread == 0)
    return failWith(error, "block_size and neurons_per_thread must be > 0");
  auto module = device->device->loadPTX(ptx ? ptx : "");
  if (!module)
    return failWith(error, module.takeError());
  auto fn = device->device->getFunction(*module, name ? name : "");
  if (!fn)
    return failWith(error, fn.takeError());
  uint64_t perBlock = uint64_t(block_size) * neurons_per_thread;
  uint64_t grid = (uint64_t(NCL) + perBlock - 1) / perBlock;
  if (grid == 0)
    return 0;
  if (grid > 0x7fffffffu)
    return failWith(error, "NCL too large for one launch");
  std::vector<uint64_t> values(ptrs, ptrs + num_ptrs);
  std::vector<void *> args;
  for (uint64_t &v : values)
    args.push_back(&v);
  args.push_back(&T);
  args.push_back(&NCL);
  if (llvm::Error e = device->device->launch(
          *fn, grid, block_size, args, static_cast<cuda::Stream>(stream),
          name))
    return failWith(error, std::move(e));
  return 0;
}

int flexsn_cuda_synchronize(flexsn_cuda_device *device, char **error) {
  if (llvm::Error e = device->device->synchronize())
    return failWith(error, std::move(e));
  return 0;
}

void flexsn_cuda_close(flexsn_cuda_device *device) { delete device; }

} // extern "C"
