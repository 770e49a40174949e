//===- Harness.cpp - Run and check compiled flexsn kernels ----------------===//

#include "flexsn/Execution/Harness.h"

#include "flexsn/Execution/Storage.h"
#include "flexsn/Interpreter/Interpreter.h"
#include "flexsn/Pipelines/Pipelines.h"
#include "flexsn/Runtime/CPU/CPUBackend.h"
#include "flexsn/Runtime/CUDA/CUDARuntime.h"
#include "flexsn/Target/Manifest.h"
#include "flexsn/Target/PTX.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>

#include <unistd.h>

using namespace mlir;
using namespace mlir::flexsn;
using llvm::Error;
using llvm::Expected;

char DiagnosedError::ID = 0;
void DiagnosedError::log(llvm::raw_ostream &os) const {
  os << "(reported as a diagnostic)";
}
std::error_code DiagnosedError::convertToErrorCode() const {
  return llvm::inconvertibleErrorCode();
}
Error mlir::flexsn::makeDiagnosedError() {
  return llvm::make_error<DiagnosedError>();
}

static Error makeError(const Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

unsigned HostBuffer::width() const { return storageBytes(arg.type); }
double HostBuffer::at(int64_t i) const {
  return decodeStorage(bytes.data() + i * width(), arg.type);
}
std::vector<double> HostBuffer::decoded() const {
  std::vector<double> out(count);
  for (int64_t i = 0; i < count; ++i)
    out[i] = at(i);
  return out;
}
void HostBuffer::fill(std::mt19937_64 &rng, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < count; ++i)
    encodeStorage(dist(rng), arg.type, bytes.data() + i * width());
}

/// Buffers for every pointer argument: results poisoned with NaN (sums are
/// zeroed before each run: the kernel adds to them), operands zero.
static std::vector<HostBuffer> makeBuffers(ArrayRef<KernelArg> abi, int64_t T,
                                           int64_t NCL) {
  std::vector<HostBuffer> buffers;
  for (const KernelArg &arg : abi) {
    if (!arg.isPointer())
      continue;
    HostBuffer buf{arg, getElementCount(arg.role, T, NCL), {}};
    buf.bytes.assign(std::max<int64_t>(buf.count * buf.width(), 1), 0);
    if (isResultRole(arg.role) && arg.role != KernelArgRole::SumState)
      std::memset(buf.bytes.data(), 0xFF, buf.bytes.size()); // NaN
    buffers.push_back(std::move(buf));
  }
  return buffers;
}

/// Random operands: inputs in [-1, 3), states in [-0.5, 0.5), params and
/// gradients in [-1, 1).
static void fillOperand(HostBuffer &buf, ArgMeaning meaning,
                        std::mt19937_64 &rng) {
  if (meaning == ArgMeaning::Input)
    buf.fill(rng, -1.0, 3.0);
  else if (meaning == ArgMeaning::InitState)
    buf.fill(rng, -0.5, 0.5);
  else
    buf.fill(rng, -1.0, 1.0);
}

static void zeroSums(std::vector<HostBuffer> &buffers) {
  for (HostBuffer &b : buffers)
    if (b.arg.role == KernelArgRole::SumState)
      std::memset(b.bytes.data(), 0, b.bytes.size());
}

static int64_t totalBytes(const std::vector<HostBuffer> &buffers) {
  int64_t bytes = 0;
  for (const HostBuffer &b : buffers)
    bytes += b.count * b.width();
  return bytes;
}

static double median(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

//===----------------------------------------------------------------------===//
// Runners
//===----------------------------------------------------------------------===//

KernelRunner::~KernelRunner() = default;

namespace {
class CPURunner : public KernelRunner {
public:
  CPURunner(std::unique_ptr<CPUKernels> kernels, const HarnessOptions &options)
      : kernels(std::move(kernels)), options(options) {}
  StringRef backend() const override { return "cpu"; }

  Error run(StringRef name, std::vector<HostBuffer> &buffers, int64_t T,
            int64_t NCL) override {
    auto fn = kernels->lookup(name);
    if (!fn)
      return fn.takeError();
    zeroSums(buffers);
    CPUKernels::run(*fn, pointers(buffers), T, NCL, options.threads);
    return Error::success();
  }

  Error bench(StringRef name, std::vector<HostBuffer> &buffers, int64_t T,
              int64_t NCL, llvm::raw_ostream &os) override {
    auto fn = kernels->lookup(name);
    if (!fn)
      return fn.takeError();
    std::vector<void *> ptrs = pointers(buffers);
    for (int i = 0; i < 2; ++i)
      CPUKernels::run(*fn, ptrs, T, NCL, options.threads);
    std::vector<double> times;
    for (unsigned i = 0; i < std::max(1u, options.reps); ++i) {
      auto start = std::chrono::steady_clock::now();
      CPUKernels::run(*fn, ptrs, T, NCL, options.threads);
      times.push_back(std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - start)
                          .count());
    }
    double ms = median(times);
    int64_t bytes = totalBytes(buffers);
    os << "bench: median " << ms << " ms over " << times.size() << " runs, "
       << bytes << " bytes moved, " << (ms > 0 ? bytes / (ms * 1e6) : 0.0)
       << " GB/s\n";
    return Error::success();
  }

private:
  static std::vector<void *> pointers(std::vector<HostBuffer> &buffers) {
    std::vector<void *> ptrs;
    for (HostBuffer &b : buffers)
      ptrs.push_back(b.bytes.data());
    return ptrs;
  }

  std::unique_ptr<CPUKernels> kernels;
  HarnessOptions options;
};

/// Device buffers mirror the host buffers; each run copies operands in and
/// results out.
class CUDARunner : public KernelRunner {
public:
  CUDARunner(std::unique_ptr<cuda::Device> device, std::string ptx,
             Manifest manifest, const HarnessOptions &options)
      : device(std::move(device)), ptx(std::move(ptx)),
        manifest(std::move(manifest)), options(options) {}
  ~CUDARunner() override { release(); }
  StringRef backend() const override { return "cuda"; }

  Error run(StringRef name, std::vector<HostBuffer> &buffers, int64_t T,
            int64_t NCL) override {
    release();
    std::vector<cuda::DevicePtr> ptrs;
    if (Error e = upload(buffers, ptrs))
      return e;
    if (Error e = launch(name, buffers, ptrs, T, NCL))
      return e;
    entry = kernels.at(name)->describeLaunch(asAddresses(ptrs), T, NCL).entry;
    if (Error e = device->synchronize())
      return e;
    for (auto [b, p] : llvm::zip_equal(buffers, ptrs))
      if (isResultRole(b.arg.role))
        if (Error e = device->copyToHost(b.bytes.data(), p, b.bytes.size()))
          return e;
    return Error::success();
  }

  Error bench(StringRef name, std::vector<HostBuffer> &buffers, int64_t T,
              int64_t NCL, llvm::raw_ostream &os) override {
    release();
    std::vector<cuda::DevicePtr> ptrs;
    if (Error e = upload(buffers, ptrs))
      return e;
    // Device-to-device copy of 2 x 1 GiB in the same run: the bandwidth
    // floor the kernel is compared with.
    const size_t copyBytes = size_t(1) << 30;
    auto src = device->alloc(copyBytes);
    if (!src)
      return src.takeError();
    allocations.push_back(*src);
    auto dst = device->alloc(copyBytes);
    if (!dst)
      return dst.takeError();
    allocations.push_back(*dst);
    auto copyTimes =
        time([&] { return device->copyOnDevice(*dst, *src, copyBytes); });
    if (!copyTimes)
      return copyTimes.takeError();
    auto kernel = kernelFor(name, buffers);
    if (!kernel)
      return kernel.takeError();
    auto kernelTimes =
        time([&] { return launch(name, buffers, ptrs, T, NCL); });
    if (!kernelTimes)
      return kernelTimes.takeError();
    double copyMs = median(*copyTimes), ms = median(*kernelTimes);
    double copyGBs = 2.0 * copyBytes / (copyMs * 1e6);
    int64_t bytes = totalBytes(buffers);
    // A copy moving the kernel's bytes (half read, half written), timed the
    // same way: it pays the same launch, ramp-up and drain as a kernel of
    // that size, which the 2 GiB copy's bandwidth leaves out.
    size_t sameBytes = size_t(bytes / 2);
    double sameMs = 0;
    if (sameBytes > 0 && sameBytes <= copyBytes) {
      auto sameTimes =
          time([&] { return device->copyOnDevice(*dst, *src, sameBytes); });
      if (!sameTimes)
        return sameTimes.takeError();
      sameMs = median(*sameTimes);
    }
    double gbs = ms > 0 ? bytes / (ms * 1e6) : 0.0;
    cuda::ScanKernel::LaunchShape shape =
        (*kernel)->describeLaunch(asAddresses(ptrs), T, NCL);
    os << "bench: " << device->describe() << "\n"
       << "bench: entry " << shape.entry << " (" << shape.neuronsPerThread
       << " neuron(s) per thread, blocks of " << shape.blockSize << " threads";
    if (shape.prefetch)
      os << ", " << shape.prefetch << " steps of reads in flight";
    os << ")\n"
       << "bench: copy " << llvm::format("%.0f", copyGBs)
       << " GB/s (device-to-device, 2 x 1 GiB, median of " << copyTimes->size()
       << ")\n"
       << "bench: kernel median " << llvm::format("%.4f", ms) << " ms over "
       << kernelTimes->size() << " runs, " << bytes << " bytes (floor "
       << llvm::format("%.4f", bytes / (copyGBs * 1e6)) << " ms), "
       << llvm::format("%.0f", gbs) << " GB/s, "
       << llvm::format("%.0f", 100.0 * gbs / copyGBs) << "% of copy\n";
    if (sameMs > 0)
      os << "bench: same-size copy median " << llvm::format("%.4f", sameMs)
         << " ms (" << sameBytes
         << " bytes copied, the kernel's bytes moved); kernel at "
         << llvm::format("%.0f", 100.0 * sameMs / ms)
         << "% of a same-size copy\n";
    return Error::success();
  }

private:
  void release() {
    for (cuda::DevicePtr p : allocations)
      device->free(p);
    allocations.clear();
  }

  Error upload(std::vector<HostBuffer> &buffers,
               std::vector<cuda::DevicePtr> &ptrs) {
    zeroSums(buffers);
    for (HostBuffer &b : buffers) {
      auto p = device->alloc(b.bytes.size());
      if (!p)
        return p.takeError();
      allocations.push_back(*p);
      if (Error e = device->copyToDevice(*p, b.bytes.data(), b.bytes.size()))
        return e;
      ptrs.push_back(*p);
    }
    return Error::success();
  }

  /// The scan kernel `name`, made on first use (its entries load lazily).
  Expected<cuda::ScanKernel *> kernelFor(StringRef name,
                                         ArrayRef<HostBuffer> buffers) {
    std::unique_ptr<cuda::ScanKernel> &slot = kernels[name];
    if (slot)
      return slot.get();
    SmallVector<cuda::ScanKernel::Pointer> pointers;
    for (const HostBuffer &b : buffers)
      pointers.push_back({b.arg.type.getIntOrFloatBitWidth() / 8,
                          getArgShape(b.arg.role) != ArgShape::Scalar});
    const ManifestKernel *info = manifest.lookup(name);
    if (!info || !info->geometry)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "no CUDA kernel '" + name +
                                         "' in the program");
    auto kernel = cuda::ScanKernel::create(
        *device, ptx, name, info->scalarEntry, info->deepEntry,
        info->deepPrefetch, info->geometry->blockSize,
        info->geometry->neuronsPerThread, pointers);
    if (!kernel)
      return kernel.takeError();
    slot = std::move(*kernel);
    return slot.get();
  }

  Error launch(StringRef name, ArrayRef<HostBuffer> buffers,
               std::vector<cuda::DevicePtr> &ptrs, int64_t T, int64_t NCL) {
    auto kernel = kernelFor(name, buffers);
    if (!kernel)
      return kernel.takeError();
    return (*kernel)->launch(asAddresses(ptrs), T, NCL, nullptr);
  }

  std::string lastEntry() const override { return entry; }

  /// Device pointers as the addresses ScanKernel takes.
  static std::vector<void *> asAddresses(ArrayRef<cuda::DevicePtr> ptrs) {
    std::vector<void *> out;
    out.reserve(ptrs.size());
    for (cuda::DevicePtr p : ptrs)
      out.push_back(reinterpret_cast<void *>(p));
    return out;
  }

  /// Times `fn` with CUDA events: 5 warm-up runs, then at least 30.
  Expected<std::vector<double>> time(llvm::function_ref<Error()> fn) {
    for (int i = 0; i < 5; ++i)
      if (Error e = fn())
        return std::move(e);
    auto start = device->createEvent();
    if (!start)
      return start.takeError();
    auto end = device->createEvent();
    if (!end)
      return end.takeError();
    llvm::scope_exit cleanup([&] {
      device->destroyEvent(*start);
      device->destroyEvent(*end);
    });
    std::vector<double> times;
    for (unsigned i = 0; i < std::max(30u, options.reps); ++i) {
      if (Error e = device->record(*start, nullptr))
        return std::move(e);
      if (Error e = fn())
        return std::move(e);
      if (Error e = device->record(*end, nullptr))
        return std::move(e);
      auto ms = device->elapsedMs(*start, *end);
      if (!ms)
        return ms.takeError();
      times.push_back(*ms);
    }
    if (Error e = device->synchronize())
      return std::move(e);
    return times;
  }

  std::unique_ptr<cuda::Device> device;
  std::string ptx;
  Manifest manifest;
  std::string entry; // the last run()'s
  llvm::StringMap<std::unique_ptr<cuda::ScanKernel>> kernels;
  HarnessOptions options;
  std::vector<cuda::DevicePtr> allocations;
};
} // namespace

Expected<std::unique_ptr<KernelRunner>>
mlir::flexsn::createCPURunner(ModuleOp module, const HarnessOptions &options) {
  auto kernels = CPUKernels::compile(module, std::max(options.prefetch, 1u));
  if (failed(kernels))
    return makeDiagnosedError();
  return std::make_unique<CPURunner>(std::move(*kernels), options);
}

Expected<std::unique_ptr<KernelRunner>>
mlir::flexsn::createCUDARunner(ModuleOp module, const HarnessOptions &options) {
  auto device = cuda::Device::open(options.device);
  if (!device)
    return device.takeError();
  if (Error e = (*device)->makeCurrent())
    return std::move(e);
  PipelineOptions gpu;
  gpu.chip = "sm_" + std::to_string((*device)->computeCapability());
  gpu.prefetch = options.prefetch;
  gpu.l2Prefetch = options.l2Prefetch;
  gpu.neuronsPerThread = options.neuronsPerThread;
  // The entries of each kernel and the deep entry's depth, as the C API
  // takes them.
  FailureOr<Manifest> manifest =
      buildManifest(module, ManifestTarget::CUDA, gpu);
  if (failed(manifest))
    return makeDiagnosedError();
  FailureOr<std::string> ptx = translateToPTX(module, gpu);
  if (failed(ptx))
    return makeDiagnosedError();
  return std::make_unique<CUDARunner>(std::move(*device), std::move(*ptx),
                                      std::move(*manifest), options);
}

//===----------------------------------------------------------------------===//
// Preparation
//===----------------------------------------------------------------------===//

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

static ScanOp scanOf(ModuleOp module, StringRef funcName) {
  auto func = module.lookupSymbol<func::FuncOp>(funcName);
  ScanOp scan;
  if (func)
    func.walk([&](ScanOp s) { scan = s; });
  return scan;
}

Expected<std::string>
mlir::flexsn::prepareKernelModule(ModuleOp module, StringRef funcName,
                                  Type storage, bool training,
                                  ArrayRef<std::string> saveOps) {
  // Kernel ABIs are read after canonicalization, as every pipeline sees them.
  PassManager canon(module.getContext());
  canon.addPass(createCanonicalizerPass());
  if (failed(canon.run(module)))
    return makeDiagnosedError();
  SmallVector<ScanOp> scans;
  if (failed(collectKernelScans(module, "CPU", scans)))
    return makeDiagnosedError();
  ScanOp scan;
  for (ScanOp s : scans) {
    auto f = cast<func::FuncOp>(s->getParentOp());
    if (funcName.empty() || f.getSymName() == funcName) {
      if (scan && funcName.empty())
        return makeError("the module has several kernel functions; pick one "
                         "with --func");
      scan = s;
    }
  }
  if (!scan)
    return makeError(funcName.empty()
                         ? Twine("the module has no flexsn.scan kernel")
                         : "no kernel function named '" + funcName + "'");
  auto func = cast<func::FuncOp>(scan->getParentOp());
  std::string name = func.getSymName().str();
  for (auto other : llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
    if (other != func)
      other.erase();
  if (storage) {
    setStorageType(func, scan, storage);
    if (failed(verify(module)))
      return makeDiagnosedError();
  }
  if (training && failed(differentiateModule(module, saveOps)))
    return makeDiagnosedError();
  return name;
}

Error mlir::flexsn::checkHostMemory(ModuleOp module, StringRef kind, int64_t T,
                                    int64_t NCL) {
  // The largest kernel's buffers, or the forward's and the backward's
  // together for a backward run.
  double largest = 0, training = 0;
  for (func::FuncOp f : module.getOps<func::FuncOp>())
    f.walk([&](ScanOp s) {
      for (const KernelSpec &k : getKernelSpecs(s)) {
        double bytes = 0;
        for (const KernelArg &a : getKernelABI(s, k.variant, /*cpu=*/true))
          if (a.isPointer())
            bytes += double(getElementCount(a.role, T, NCL)) *
                     storageBytes(a.type);
        largest = std::max(largest, bytes);
        if (k.kind == "forward" || k.kind == "backward")
          training += bytes;
      }
    });
  double need = kind.starts_with("backward") ? training : largest;
  double have = double(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  if (need > have)
    return makeError(llvm::formatv("T={0} NCL={1} needs about {2:F1} GB of "
                                   "host buffers; this machine has {3:F1} GB",
                                   T, NCL, need / 1e9, have / 1e9)
                         .str());
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Checks
//===----------------------------------------------------------------------===//

void CheckResult::add(StringRef what, double rel, double tol) {
  bool pass = rel <= tol;
  if (!pass && ok)
    firstFailure = llvm::formatv("{0}: relative error {1:e} (tolerance {2:e})",
                                 what, rel, tol)
                       .str();
  ok &= pass;
  worst = std::isnan(rel) || std::isnan(worst) ? NAN : std::max(worst, rel);
}

static double defaultTolerance(Type storage, Type compute) {
  auto tolOf = [](Type t) {
    return t.isF64() ? 1e-12 : t.isF32() ? 1e-5 : 1e-2;
  };
  return std::max(tolOf(storage), tolOf(compute));
}

namespace {
/// Compares buffers with references, leaving out near-tie neurons.
struct Comparer {
  const HarnessOptions &options;
  llvm::raw_ostream &os;
  int64_t NCL;
  /// One flag per neuron; empty: none left out.
  std::vector<uint8_t> mask;
  CheckResult result;

  bool anyMasked() const {
    return llvm::any_of(mask, [](uint8_t m) { return m != 0; });
  }

  /// Max abs error over max(max |ref|, 1) (NaN if any value is NaN).
  void compare(StringRef what, const HostBuffer &got,
               const std::vector<double> &ref, Type compute) {
    double tol = options.tolerance >= 0
                     ? options.tolerance
                     : defaultTolerance(got.arg.type, compute);
    bool perNeuron = (int64_t)ref.size() >= NCL && NCL > 0;
    if (!perNeuron && anyMasked()) {
      ++result.skipped;
      if (options.verbose)
        os << "  " << what << ": skipped (it sums neurons next to a switch "
                              "point)\n";
      return;
    }
    double maxErr = 0.0, maxRef = 0.0;
    int64_t bad = 0, used = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      if (perNeuron && !mask.empty() && mask[i % NCL])
        continue;
      ++used;
      double value = got.at(i);
      // The same NaN or infinity on both sides agrees.
      if ((std::isnan(value) && std::isnan(ref[i])) ||
          (std::isinf(value) && value == ref[i]))
        continue;
      double err = std::fabs(value - ref[i]);
      if (!(err <= maxErr)) // NaN-propagating max
        maxErr = err;
      maxRef = std::max(maxRef, std::fabs(ref[i]));
      if (!(err <= tol * std::max(1.0, std::fabs(ref[i]))))
        ++bad;
    }
    double rel = maxErr / std::max(maxRef, 1.0);
    if (options.verbose) {
      os << "  " << what << " (" << got.arg.type << ", " << used
         << " values): max relative error " << rel
         << (rel <= tol ? " ok" : " FAIL") << " (tolerance " << tol;
      if (bad)
        os << ", " << bad << " value(s) off";
      os << ")\n";
    }
    result.add(what, rel, tol);
  }
};

using MeaningMap = std::map<std::pair<ArgMeaning, unsigned>,
                            const HostBuffer *>;
} // namespace

/// Central finite differences of the primal's loss
///   L = sum(grad_out * out) + sum(grad_state * state)
/// computed with the interpreter in f64, compared with the backward
/// kernel's gradients (`got`, by meaning). Neurons are independent, so one
/// perturbation covers every neuron at once; the check uses the first
/// `sub` neurons (all of them for scalar params, whose gradient sums them).
static Error finiteDifferenceCheck(ScanOp primal, int64_t T, int64_t NCL,
                                   const AdjointCase &c, const MeaningMap &got,
                                   Comparer &cmp) {
  KernelVariant variant = primal.getFinalStates() ? KernelVariant::FinalState
                                                  : KernelVariant::Inference;
  unsigned numIn = primal.getNumInputs(), numSt = primal.getNumStates(),
           numPa = primal.getNumParams(), numOut = primal.getNumOutputs();
  int64_t sub = std::min<int64_t>(NCL, 32);
  // Per-neuron losses of a run on `m` neurons.
  auto losses = [&](int64_t m, const std::vector<std::vector<double>> &ops,
                    std::vector<double> &L) -> LogicalResult {
    std::vector<std::vector<double>> res;
    if (failed(interpretScan(primal, variant, T, m, ops, res)))
      return failure();
    L.assign(m, 0.0);
    auto dot = [&](const std::vector<double> &g, const std::vector<double> &v,
                   bool seq) {
      if (g.empty())
        return;
      for (int64_t n = 0; n < m; ++n)
        for (int64_t t = 0; t < (seq ? T : 1); ++t)
          L[n] += g[t * NCL + n] * v[t * m + n];
    };
    for (unsigned o = 0; o < numOut; ++o)
      dot(c.gradOutputs[o], res[o], true);
    for (unsigned s = 0; s < numSt; ++s)
      dot(c.gradStates[s], res[numOut + s],
          variant == KernelVariant::Inference);
    return success();
  };
  // Operands restricted to the first m neurons.
  auto slice = [&](int64_t m) {
    std::vector<std::vector<double>> ops;
    for (const auto &x : c.inputs) {
      ops.emplace_back(T * m);
      for (int64_t t = 0; t < T; ++t)
        std::copy_n(x.begin() + t * NCL, m, ops.back().begin() + t * m);
    }
    for (const auto &v : c.initStates)
      ops.emplace_back(v.begin(), v.begin() + m);
    for (unsigned k = 0; k < numPa; ++k)
      ops.push_back(primal.isPerNeuronParam(k)
                        ? std::vector<double>(c.params[k].begin(),
                                              c.params[k].begin() + m)
                        : c.params[k]);
    return ops;
  };
  const double h = 1e-5;
  // The largest difference between the quotients at h and h/2 since the
  // last report: the quotients' own error, which widens the tolerance (a
  // body iterated over many steps has large higher derivatives).
  double estimate = 0.0;
  // d(sum of losses of the neurons) / d(element) for one perturbed slot:
  // Richardson's extrapolation of central differences at h and h/2.
  auto central = [&](int64_t m, unsigned operand, int64_t offset,
                     int64_t stride, std::vector<double> &d) -> LogicalResult {
    auto quotient = [&](double step, std::vector<double> &q) -> LogicalResult {
      std::vector<std::vector<double>> plus = slice(m), minus = slice(m);
      for (int64_t n = 0; n < (stride ? m : 1); ++n) {
        plus[operand][offset + n * stride] += step;
        minus[operand][offset + n * stride] -= step;
      }
      std::vector<double> lp, lm;
      if (failed(losses(m, plus, lp)) || failed(losses(m, minus, lm)))
        return failure();
      q.assign(m, 0.0);
      for (int64_t n = 0; n < m; ++n)
        q[n] = (lp[n] - lm[n]) / (2 * step);
      return success();
    };
    std::vector<double> coarse, fine;
    if (failed(quotient(h, coarse)) || failed(quotient(h / 2, fine)))
      return failure();
    d.assign(m, 0.0);
    for (int64_t n = 0; n < m; ++n) {
      d[n] = (4 * fine[n] - coarse[n]) / 3;
      double diff = std::fabs(fine[n] - coarse[n]);
      if (!(diff <= estimate))
        estimate = diff;
    }
    return success();
  };
  // Relative to the largest difference quotient, or for a sum over neurons
  // (`sum`) to `scale` (the sum of the terms' magnitudes).
  auto report = [&](const std::string &what, const HostBuffer *buf,
                    const std::vector<std::pair<int64_t, double>> &pairs,
                    bool sum = false, double scale = 0.0) {
    double maxErr = 0.0, maxRef = scale;
    if (sum && cmp.anyMasked()) {
      ++cmp.result.skipped;
      estimate = 0.0;
      return;
    }
    for (auto [i, fd] : pairs) {
      if (!sum && !cmp.mask.empty() && cmp.mask[i % NCL])
        continue;
      double err = std::fabs(buf->at(i) - fd);
      if (!(err <= maxErr))
        maxErr = err;
      maxRef = std::max(maxRef, std::fabs(fd));
    }
    double rel = maxRef > 0 ? maxErr / maxRef : maxErr;
    double slack = maxRef > 0 ? 2 * estimate / maxRef : 2 * estimate;
    estimate = 0.0;
    const double tol = std::max(1e-6, slack);
    if (cmp.options.verbose)
      cmp.os << "  finite differences, " << what << " (" << pairs.size()
             << " values): relative error " << rel
             << (rel <= tol ? " ok" : " FAIL") << " (tolerance " << tol
             << (tol > 1e-6 ? ", widened to the quotients' own error" : "")
             << ")\n";
    cmp.result.add("finite differences, " + what, rel, tol);
  };
  auto diagnosed = [] { return makeDiagnosedError(); };
  std::vector<double> d;
  for (unsigned k = 0; k < numIn; ++k) {
    auto it = got.find({ArgMeaning::GradInput, k});
    if (it == got.end())
      continue;
    std::vector<std::pair<int64_t, double>> pairs;
    for (int64_t t = 0; t < T; ++t) {
      if (failed(central(sub, k, t * sub, 1, d)))
        return diagnosed();
      for (int64_t n = 0; n < sub; ++n)
        pairs.push_back({t * NCL + n, d[n]});
    }
    report("grad_input #" + std::to_string(k), it->second, pairs);
  }
  for (unsigned s = 0; s < numSt; ++s) {
    auto it = got.find({ArgMeaning::GradInitState, s});
    if (it == got.end())
      continue;
    if (failed(central(sub, numIn + s, 0, 1, d)))
      return diagnosed();
    std::vector<std::pair<int64_t, double>> pairs;
    for (int64_t n = 0; n < sub; ++n)
      pairs.push_back({n, d[n]});
    report("grad_init_state #" + std::to_string(s), it->second, pairs);
  }
  for (unsigned k = 0; k < numPa; ++k) {
    auto it = got.find({ArgMeaning::GradParam, k});
    if (it == got.end())
      continue;
    std::vector<std::pair<int64_t, double>> pairs;
    if (primal.isPerNeuronParam(k)) {
      if (failed(central(sub, numIn + numSt + k, 0, 1, d)))
        return diagnosed();
      for (int64_t n = 0; n < sub; ++n)
        pairs.push_back({n, d[n]});
      report("grad_param #" + std::to_string(k), it->second, pairs);
      continue;
    }
    if (failed(central(NCL, numIn + numSt + k, 0, 0, d)))
      return diagnosed();
    double total = 0.0, magnitude = 0.0;
    for (double v : d) {
      total += v;
      magnitude += std::fabs(v);
    }
    pairs.push_back({0, total});
    report("grad_param #" + std::to_string(k) + " (sum over neurons)",
           it->second, pairs, /*sum=*/true, magnitude);
  }
  return Error::success();
}

/// The scan operands in operand order (for the interpreter), from the
/// buffers and the constants of constant initial states.
static std::vector<std::vector<double>>
scanOperands(ScanOp scan, const std::vector<HostBuffer> &buffers,
             int64_t NCL) {
  std::vector<std::vector<double>> ops(scan->getNumOperands());
  for (const HostBuffer &b : buffers) {
    ArgSource source = getArgSource(scan, b.arg);
    if (!source.isResult)
      ops[source.number] = b.decoded();
  }
  unsigned firstState = scan.getNumInputs() + 2 * scan.getNumLagged();
  for (unsigned k = 0; k < scan.getNumStates(); ++k)
    if (std::optional<double> c = getConstantInitState(scan, k))
      ops[firstState + k].assign(NCL, *c);
  return ops;
}

/// Compares every result buffer of a run of `scan`'s kernel of `variant`
/// with the interpreter's run on the same operands.
static Error checkWithInterpreter(ScanOp scan, KernelVariant variant,
                                  int64_t T, int64_t NCL,
                                  const std::vector<HostBuffer> &buffers,
                                  Comparer &cmp, StringRef suffix = "") {
  std::vector<std::vector<double>> expected;
  if (failed(interpretScan(scan, variant, T, NCL,
                           scanOperands(scan, buffers, NCL), expected)))
    return makeDiagnosedError();
  for (const HostBuffer &b : buffers) {
    if (!isResultRole(b.arg.role))
      continue;
    unsigned idx = getArgSource(scan, b.arg).number;
    ArgDescription m = describeKernelArg(scan, b.arg);
    cmp.compare(m.str() + suffix.str(), b,
                expected[idx], scan.getComputeType());
  }
  return Error::success();
}

/// Neurons whose reference run of `primal` on these operands passes a
/// switch point within the margin.
static Error nearTieMask(ScanOp primal, int64_t T, int64_t NCL,
                         const std::vector<std::vector<double>> &operands,
                         double margin, std::vector<uint8_t> &mask) {
  std::vector<std::vector<double>> ignored;
  if (failed(interpretScan(primal, KernelVariant::Inference, T, NCL, operands,
                           ignored, &mask, margin)))
    return makeDiagnosedError();
  return Error::success();
}

Expected<CheckResult> mlir::flexsn::runKernelCase(
    ModuleOp module, StringRef funcName, StringRef kind, int64_t T,
    int64_t NCL, uint64_t seed, KernelRunner &runner,
    const HarnessOptions &options, bool check, bool bench,
    llvm::raw_ostream &os) {
  // forward_final / backward_final: the final-state pair of the automatic
  // saving policy (final states out of the forward, their gradients into
  // the backward).
  bool finalPair = kind == "forward_final" || kind == "backward_final";
  StringRef suffix = finalPair ? "_final" : "";
  if (finalPair)
    kind = kind.drop_back(suffix.size());
  bool training = kind == "forward" || kind == "backward";
  auto kernelOf = [&](ScanOp s, StringRef wanted) -> Expected<KernelSpec> {
    if (s)
      for (const KernelSpec &k : getKernelSpecs(s))
        if (k.kind == wanted)
          return k;
    return makeError("no " + wanted + " kernel");
  };
  std::mt19937_64 rng(seed);
  ScanOp primal = scanOf(module, funcName);
  if (!primal)
    return makeError("no kernel function named '" + funcName + "'");

  // The kernel that runs first: the primal's, or the training forward.
  ScanOp first =
      training ? scanOf(module, (funcName + "_forward" + suffix).str())
               : primal;
  if (finalPair && !first)
    return makeError("no " + funcName + "_forward_final: the saving policy "
                     "built no final-state pair (the backward reads a state "
                     "sequence, or save-ops is not auto)");
  auto firstSpec = kernelOf(first, training ? StringRef("forward") : kind);
  if (!firstSpec)
    return firstSpec.takeError();
  std::vector<HostBuffer> fwd =
      makeBuffers(getKernelABI(first, firstSpec->variant, /*cpu=*/true), T,
                  NCL);
  for (HostBuffer &b : fwd)
    if (!isResultRole(b.arg.role))
      fillOperand(b, describeKernelArg(first, b.arg).meaning, rng);
  if (Error e = runner.run(firstSpec->name, fwd, T, NCL))
    return std::move(e);

  Comparer cmp{options, os, NCL, {}, {}};
  if (check && options.tieMargin > 0) {
    // The primal's operands: the first kernel's, by meaning for a training
    // forward (a function of its own, whose arguments say what they hold).
    std::vector<std::vector<double>> ops =
        scanOperands(primal, first == primal ? fwd : std::vector<HostBuffer>(),
                     NCL);
    if (first != primal) {
      unsigned firstState = primal.getNumInputs() + 2 * primal.getNumLagged();
      unsigned firstParam = firstState + primal.getNumStates();
      for (const HostBuffer &b : fwd) {
        ArgDescription m = describeKernelArg(first, b.arg);
        if (m.meaning == ArgMeaning::Input)
          ops[m.index] = b.decoded();
        else if (m.meaning == ArgMeaning::InitState)
          ops[firstState + m.index] = b.decoded();
        else if (m.meaning == ArgMeaning::Param)
          ops[firstParam + m.index] = b.decoded();
      }
    }
    if (Error e = nearTieMask(primal, T, NCL, ops, options.tieMargin,
                              cmp.mask))
      return std::move(e);
    cmp.result.masked = llvm::count(cmp.mask, 1);
  }

  // "kernel NAME: T=.. NCL=.. backend=.. [entry=..]", after its run.
  auto printRun = [&](StringRef name) {
    os << "kernel " << name << ": T=" << T << " NCL=" << NCL
       << " backend=" << runner.backend();
    if (std::string entry = runner.lastEntry(); !entry.empty())
      os << " entry=" << entry;
    os << "\n";
  };
  if (kind != "backward") {
    printRun(firstSpec->name);
    if (check)
      if (Error e = checkWithInterpreter(first, firstSpec->variant, T, NCL,
                                         fwd, cmp))
        return std::move(e);
    if (bench)
      if (Error e = runner.bench(firstSpec->name, fwd, T, NCL, os))
        return std::move(e);
    return cmp.result;
  }

  // Backward: read what the forward wrote, plus random result gradients.
  ScanOp bscan = scanOf(module, (funcName + "_backward" + suffix).str());
  auto bspec = kernelOf(bscan, "backward");
  if (!bspec)
    return bspec.takeError();
  MeaningMap fromForward;
  for (const HostBuffer &b : fwd) {
    ArgDescription m = describeKernelArg(first, b.arg);
    fromForward[{m.meaning, m.index}] = &b;
  }
  // The final pair's forward writes no state sequence; the reference
  // adjoint reads one. The sequence forward, run on the same operands,
  // gives the states the final forward carried.
  std::vector<HostBuffer> seqFwd;
  if (finalPair && check) {
    ScanOp sscan = scanOf(module, (funcName + "_forward").str());
    auto sspec = kernelOf(sscan, "forward");
    if (!sspec)
      return sspec.takeError();
    seqFwd = makeBuffers(getKernelABI(sscan, sspec->variant, /*cpu=*/true), T,
                         NCL);
    for (HostBuffer &b : seqFwd) {
      if (isResultRole(b.arg.role))
        continue;
      ArgDescription m = describeKernelArg(sscan, b.arg);
      auto it = fromForward.find({m.meaning, m.index});
      if (it == fromForward.end())
        return makeError("the sequence forward reads " + m.str() +
                         ", which the final forward does not");
      b.bytes = it->second->bytes;
    }
    if (Error e = runner.run(sspec->name, seqFwd, T, NCL))
      return std::move(e);
    for (const HostBuffer &b : seqFwd) {
      ArgDescription m = describeKernelArg(sscan, b.arg);
      if (m.meaning == ArgMeaning::StateSeq)
        fromForward[{m.meaning, m.index}] = &b;
    }
  }
  std::vector<HostBuffer> bwd =
      makeBuffers(getKernelABI(bscan, bspec->variant, /*cpu=*/true), T, NCL);
  MeaningMap byMeaning;
  for (HostBuffer &b : bwd) {
    ArgDescription m = describeKernelArg(bscan, b.arg);
    byMeaning[{m.meaning, m.index}] = &b;
    if (isResultRole(b.arg.role))
      continue;
    auto it = fromForward.find({m.meaning, m.index});
    if (it != fromForward.end() && it->second->bytes.size() == b.bytes.size())
      b.bytes = it->second->bytes;
    else if (stringifyArgMeaning(m.meaning).starts_with("grad_"))
      fillOperand(b, m.meaning, rng);
    else
      return makeError("the backward reads " + m.str() +
                       ", which the training forward does not provide");
  }
  if (Error e = runner.run(bspec->name, bwd, T, NCL))
    return std::move(e);
  printRun(bspec->name);

  if (check) {
    // The training forward's results against the interpreter.
    if (Error e = checkWithInterpreter(first, firstSpec->variant, T, NCL, fwd,
                                       cmp, " (training forward)"))
      return std::move(e);
    // The reference reads the same stored forward values as the kernel.
    AdjointCase c;
    unsigned numIn = primal.getNumInputs(), numSt = primal.getNumStates(),
             numPa = primal.getNumParams(), numOut = primal.getNumOutputs();
    auto decodedOr = [&](ArgMeaning meaning,
                         unsigned i) -> std::vector<double> {
      auto it = byMeaning.find({meaning, i});
      if (it != byMeaning.end())
        return it->second->decoded();
      auto f = fromForward.find({meaning, i});
      return f != fromForward.end() ? f->second->decoded()
                                    : std::vector<double>();
    };
    for (unsigned k = 0; k < numIn; ++k)
      c.inputs.push_back(decodedOr(ArgMeaning::Input, k));
    for (unsigned s = 0; s < numSt; ++s) {
      c.initStates.push_back(decodedOr(ArgMeaning::InitState, s));
      c.stateSeqs.push_back(decodedOr(ArgMeaning::StateSeq, s));
      c.gradStates.push_back(decodedOr(
          primal.getFinalStates() || finalPair ? ArgMeaning::GradFinalState
                                               : ArgMeaning::GradStateSeq,
          s));
    }
    for (unsigned k = 0; k < numPa; ++k)
      c.params.push_back(decodedOr(ArgMeaning::Param, k));
    for (unsigned o = 0; o < numOut; ++o) {
      auto it = byMeaning.find({ArgMeaning::GradOutput, o});
      c.gradOutputs.push_back(it != byMeaning.end() ? it->second->decoded()
                                                    : std::vector<double>());
    }
    c.finalStates = finalPair;
    AdjointGrads ref;
    if (failed(interpretAdjoint(primal, T, NCL, c, ref)))
      return makeDiagnosedError();
    for (const HostBuffer &b : bwd) {
      if (!isResultRole(b.arg.role))
        continue;
      ArgDescription m = describeKernelArg(bscan, b.arg);
      const std::vector<double> *expected =
          m.meaning == ArgMeaning::GradInput       ? &ref.inputs[m.index]
          : m.meaning == ArgMeaning::GradInitState ? &ref.initStates[m.index]
          : m.meaning == ArgMeaning::GradParam     ? &ref.params[m.index]
                                                   : nullptr;
      if (!expected)
        return makeError("unexpected backward result " + m.str());
      cmp.compare(m.str() + " vs reference adjoint",
                  b, *expected, bscan.getComputeType());
    }
    // Finite differences see the true derivative: a spike's (zero) or
    // through a detach, not the surrogate or the blocked gradient.
    bool smooth = true;
    primal.walk([&](Operation *op) {
      if (isa<SpikeOp, DetachOp>(op))
        smooth = false;
    });
    bool f64 = primal.getComputeType().isF64() &&
               llvm::all_of(bwd, [](const HostBuffer &b) {
                 return b.arg.type.isF64();
               });
    if (smooth && f64 && T > 0 && NCL > 0 && options.finiteDifferences) {
      // byMeaning holds the results too (grad_input, grad_init_state,
      // grad_param); gradients the backward does not read are empty in `c`
      // and left out of the loss.
      if (Error e = finiteDifferenceCheck(primal, T, NCL, c, byMeaning, cmp))
        return std::move(e);
    } else if (options.verbose) {
      os << "  finite differences: skipped ("
         << (!smooth ? "the body spikes or detaches: its gradient is not "
                       "the derivative"
             : !options.finiteDifferences ? "--finite-differences=false"
                                          : "needs f64 storage and compute")
         << ")\n";
    }
  }
  if (bench)
    if (Error e = runner.bench(bspec->name, bwd, T, NCL, os))
      return std::move(e);
  return cmp.result;
}
