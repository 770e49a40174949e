//===- Runners.cpp - CPU and CUDA kernel runners of the harness -------------===//

#include "HarnessDetail.h"

#include "flexsn/Execution/Harness.h"

#include "flexsn/Storage/Storage.h"
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
using namespace mlir::flexsn::harness;

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
    // A chunk repair kernel also stores the starts it fixes, in the initial
    // states it was given.
    const ManifestKernel *info = manifest.lookup(name);
    bool repair = info && !info->repairs.empty();
    for (auto [b, p] : llvm::zip_equal(buffers, ptrs))
      if (isResultRole(b.arg.role) ||
          (repair && b.arg.role == KernelArgRole::InitState))
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
mlir::flexsn::createCPURunner(ModuleOp module, const HarnessOptions &options,
                              const PipelineOptions &pipeline) {
  auto kernels =
      CPUKernels::compile(module, std::max(unsigned(pipeline.prefetch), 1u));
  if (failed(kernels))
    return makeDiagnosedError();
  return std::make_unique<CPURunner>(std::move(*kernels), options);
}

Expected<std::unique_ptr<KernelRunner>>
mlir::flexsn::createCUDARunner(ModuleOp module, const HarnessOptions &options,
                               const PipelineOptions &pipeline) {
  auto device = cuda::Device::open(options.device);
  if (!device)
    return device.takeError();
  if (Error e = (*device)->makeCurrent())
    return std::move(e);
  PipelineOptions gpu;
  gpu.copyOptionValuesFrom(pipeline);
  gpu.chip = "sm_" + std::to_string((*device)->computeCapability());
  // The module is differentiated already (prepareKernelModule).
  gpu.differentiate = false;
  gpu.saveOps.clear();
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
