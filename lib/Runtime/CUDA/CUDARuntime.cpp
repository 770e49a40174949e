//===- CUDARuntime.cpp - Thin runtime over the CUDA driver API ------------===//
//
// The driver is reached only through dlopen/dlsym: nothing here needs cuda.h
// or libcuda at build time. Enum values used below are the driver API's
// (CUDA 12/13, unchanged since their introduction).
//
//===----------------------------------------------------------------------===//

#include "flexsn/Runtime/CUDA/CUDARuntime.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <dlfcn.h>

using namespace mlir::flexsn::cuda;
using llvm::Error;
using llvm::Expected;
using llvm::ArrayRef;
using llvm::StringRef;
using llvm::Twine;

namespace {
constexpr int kSuccess = 0;
constexpr int kNoDevice = 100;
constexpr int kAttrCapabilityMajor = 75;
constexpr int kAttrCapabilityMinor = 76;
constexpr int kAttrMultiprocessorCount = 16;
constexpr int kJitErrorLogBuffer = 5;
constexpr int kJitErrorLogBufferSize = 6;
constexpr int kStreamCaptureModeRelaxed = 2;
/// cuModuleLoadDataEx and cuLaunchKernel as used here exist since CUDA 12.0.
constexpr int kMinDriverVersion = 12000;

Error driverError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}
} // namespace

/// The entry points we use, resolved once per process.
class mlir::flexsn::cuda::Driver {
public:
  using Result = int;
  Result (*cuInit)(unsigned);
  Result (*cuDriverGetVersion)(int *);
  Result (*cuGetErrorName)(Result, const char **);
  Result (*cuGetErrorString)(Result, const char **);
  Result (*cuDeviceGetCount)(int *);
  Result (*cuDeviceGet)(int *, int);
  Result (*cuDeviceGetName)(char *, int, int);
  Result (*cuDeviceGetAttribute)(int *, int, int);
  Result (*cuDevicePrimaryCtxRetain)(Context *, int);
  Result (*cuDevicePrimaryCtxRelease)(int);
  Result (*cuCtxSetCurrent)(Context);
  Result (*cuCtxGetCurrent)(Context *);
  Result (*cuCtxPushCurrent)(Context);
  Result (*cuCtxPopCurrent)(Context *);
  Result (*cuCtxSynchronize)();
  Result (*cuModuleLoadDataEx)(Module *, const void *, unsigned, int *,
                               void **);
  Result (*cuModuleGetFunction)(Function *, Module, const char *);
  Result (*cuModuleUnload)(Module);
  Result (*cuLaunchKernel)(Function, unsigned, unsigned, unsigned, unsigned,
                           unsigned, unsigned, unsigned, Stream, void **,
                           void **);
  Result (*cuMemAlloc)(DevicePtr *, size_t);
  Result (*cuMemFree)(DevicePtr);
  Result (*cuMemcpyHtoD)(DevicePtr, const void *, size_t);
  Result (*cuMemcpyDtoH)(void *, DevicePtr, size_t);
  Result (*cuMemcpyDtoD)(DevicePtr, DevicePtr, size_t);
  Result (*cuMemsetD8)(DevicePtr, unsigned char, size_t);
  Result (*cuEventCreate)(Event *, unsigned);
  Result (*cuEventDestroy)(Event);
  Result (*cuEventRecord)(Event, Stream);
  Result (*cuEventSynchronize)(Event);
  Result (*cuEventElapsedTime)(float *, Event, Event);
  Result (*cuThreadExchangeStreamCaptureMode)(int *);
  Result (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int *, Function, int,
                                                        size_t);

  /// The process-wide driver, or why there is none.
  static Expected<const Driver &> get() {
    static Driver driver;
    static std::string failure = driver.load();
    if (!failure.empty())
      return driverError(failure);
    return driver;
  }

  std::string describe(Result r) const {
    const char *name = nullptr, *text = nullptr;
    cuGetErrorName(r, &name);
    cuGetErrorString(r, &text);
    return llvm::formatv("{0} ({1}): {2}", name ? name : "CUDA_ERROR", r,
                         text ? text : "unknown error");
  }

private:
  /// Returns an empty string on success, else the reason.
  std::string load() {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char *why = dlerror();
      return std::string("no CUDA driver: cannot load libcuda.so.1 (") +
             (why ? why : "unknown reason") + ")";
    }
    std::string missing;
    auto bind = [&](auto &fn, const char *symbol) {
      void *p = dlsym(lib, symbol);
      if (!p)
        missing += (missing.empty() ? "" : ", ") + std::string(symbol);
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
    };
    bind(cuInit, "cuInit");
    bind(cuDriverGetVersion, "cuDriverGetVersion");
    bind(cuGetErrorName, "cuGetErrorName");
    bind(cuGetErrorString, "cuGetErrorString");
    bind(cuDeviceGetCount, "cuDeviceGetCount");
    bind(cuDeviceGet, "cuDeviceGet");
    bind(cuDeviceGetName, "cuDeviceGetName");
    bind(cuDeviceGetAttribute, "cuDeviceGetAttribute");
    bind(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    bind(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    bind(cuCtxSetCurrent, "cuCtxSetCurrent");
    bind(cuCtxGetCurrent, "cuCtxGetCurrent");
    bind(cuCtxPushCurrent, "cuCtxPushCurrent_v2");
    bind(cuCtxPopCurrent, "cuCtxPopCurrent_v2");
    bind(cuCtxSynchronize, "cuCtxSynchronize");
    bind(cuModuleLoadDataEx, "cuModuleLoadDataEx");
    bind(cuModuleGetFunction, "cuModuleGetFunction");
    bind(cuModuleUnload, "cuModuleUnload");
    bind(cuLaunchKernel, "cuLaunchKernel");
    bind(cuMemAlloc, "cuMemAlloc_v2");
    bind(cuMemFree, "cuMemFree_v2");
    bind(cuMemcpyHtoD, "cuMemcpyHtoD_v2");
    bind(cuMemcpyDtoH, "cuMemcpyDtoH_v2");
    bind(cuMemcpyDtoD, "cuMemcpyDtoD_v2");
    bind(cuMemsetD8, "cuMemsetD8_v2");
    bind(cuEventCreate, "cuEventCreate");
    bind(cuEventDestroy, "cuEventDestroy_v2");
    bind(cuEventRecord, "cuEventRecord");
    bind(cuEventSynchronize, "cuEventSynchronize");
    bind(cuEventElapsedTime, "cuEventElapsedTime");
    bind(cuThreadExchangeStreamCaptureMode,
         "cuThreadExchangeStreamCaptureMode");
    bind(cuOccupancyMaxActiveBlocksPerMultiprocessor,
         "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    if (!missing.empty())
      return "CUDA driver too old: libcuda.so.1 lacks " + missing;
    int version = 0;
    if (cuDriverGetVersion(&version) != kSuccess || version < kMinDriverVersion)
      return llvm::formatv("CUDA driver too old: version {0}.{1}, need 12.0 "
                           "or newer",
                           version / 1000, version % 1000 / 10);
    Result r = cuInit(0);
    if (r == kNoDevice)
      return "no CUDA device: the driver sees no GPU";
    if (r != kSuccess)
      return "cannot initialize the CUDA driver: " + describe(r);
    return "";
  }
};

//===----------------------------------------------------------------------===//
// Device
//===----------------------------------------------------------------------===//

Error Device::check(int result, const Twine &what) const {
  if (result == kSuccess)
    return Error::success();
  return driverError(what + ": " + drv.describe(result));
}

Expected<int> Device::count() {
  Expected<const Driver &> driver = Driver::get();
  if (!driver)
    return driver.takeError();
  int count = 0;
  if (int r = driver->cuDeviceGetCount(&count))
    return driverError("cannot count CUDA devices: " + driver->describe(r));
  return count;
}

Expected<std::unique_ptr<Device>> Device::open(int ordinal) {
  Expected<int> numDevices = count();
  if (!numDevices)
    return numDevices.takeError();
  const Driver &driver = llvm::cantFail(Driver::get());
  int count = *numDevices;
  if (count == 0)
    return driverError("no CUDA device: the driver sees no GPU");
  if (ordinal < 0 || ordinal >= count)
    return driverError(llvm::formatv(
        "no CUDA device {0}: the driver sees {1} device(s)", ordinal, count));
  std::unique_ptr<Device> dev(new Device(driver, ordinal));
  if (Error e = dev->check(driver.cuDeviceGet(&dev->device, ordinal),
                           "cuDeviceGet"))
    return std::move(e);
  char name[256] = {0};
  int major = 0, minor = 0;
  if (Error e = dev->check(driver.cuDeviceGetName(name, sizeof(name) - 1,
                                                   dev->device),
                           "cuDeviceGetName"))
    return std::move(e);
  driver.cuDeviceGetAttribute(&major, kAttrCapabilityMajor, dev->device);
  driver.cuDeviceGetAttribute(&minor, kAttrCapabilityMinor, dev->device);
  int sms = 0;
  driver.cuDeviceGetAttribute(&sms, kAttrMultiprocessorCount, dev->device);
  dev->multiprocessors = std::max(sms, 1);
  driver.cuDriverGetVersion(&dev->driverVersion);
  dev->name = name;
  dev->capability = major * 10 + minor;
  if (Error e = dev->check(
          driver.cuDevicePrimaryCtxRetain(&dev->context, dev->device),
          "cuDevicePrimaryCtxRetain"))
    return std::move(e);
  return std::move(dev);
}

Device::~Device() {
  if (!context)
    return;
  drv.cuCtxSetCurrent(context);
  for (auto &entry : modules)
    drv.cuModuleUnload(entry.second);
  drv.cuDevicePrimaryCtxRelease(device);
}

std::string Device::describe() const {
  return llvm::formatv("{0}, sm_{1}, driver {2}.{3}", name, capability,
                       driverVersion / 1000, driverVersion % 1000 / 10);
}

Error Device::makeCurrent() {
  return check(drv.cuCtxSetCurrent(context), "cuCtxSetCurrent");
}

namespace {
/// Makes a context current for the guard's lifetime, then restores the
/// caller's: a library call never leaves the thread on another device
/// (PyTorch's runtime keeps its own idea of the current device). When the
/// context is already current (a launch from PyTorch on its current
/// device: the common case) nothing is pushed or popped.
class ScopedContext {
public:
  ScopedContext(const Driver &drv, Context context) : drv(drv) {
    Context current = nullptr;
    if (drv.cuCtxGetCurrent(&current) == kSuccess && current == context) {
      ready = true;
      return;
    }
    pushed = ready = drv.cuCtxPushCurrent(context) == kSuccess;
  }
  ~ScopedContext() {
    Context ignored;
    if (pushed)
      drv.cuCtxPopCurrent(&ignored);
  }
  bool ok() const { return ready; }

private:
  const Driver &drv;
  bool pushed = false, ready = false;
};
} // namespace

Expected<Module> Device::loadPTX(StringRef ptx) {
  std::lock_guard<std::mutex> lock(cacheMutex);
  auto it = modules.find(ptx);
  if (it != modules.end())
    return it->second;
  ScopedContext scope(drv, context);
  if (!scope.ok())
    return driverError("cannot make the context of CUDA device " +
                       llvm::Twine(ordinal) + " current");
  // A launch may be the first to need its entry while PyTorch captures the
  // stream into a CUDA graph: loading a module is not a stream operation,
  // and relaxed mode lets the driver do it during the capture.
  int mode = kStreamCaptureModeRelaxed;
  drv.cuThreadExchangeStreamCaptureMode(&mode);
  std::string text = ptx.str(); // NUL-terminated for the driver
  std::string log(8192, '\0');
  int options[] = {kJitErrorLogBuffer, kJitErrorLogBufferSize};
  void *values[] = {log.data(), reinterpret_cast<void *>(log.size())};
  Module module = nullptr;
  int r = drv.cuModuleLoadDataEx(&module, text.c_str(), 2, options, values);
  drv.cuThreadExchangeStreamCaptureMode(&mode);
  if (r != kSuccess) {
    log.resize(strnlen(log.data(), log.size()));
    return driverError("the driver rejected the PTX: " + drv.describe(r) +
                       (log.empty() ? "" : "\n" + log));
  }
  modules[ptx] = module;
  return module;
}

Expected<Function> Device::getFunction(Module module, StringRef name) {
  Function fn = nullptr;
  if (Error e = check(drv.cuModuleGetFunction(&fn, module, name.str().c_str()),
                      "no kernel '" + name + "' in the loaded PTX"))
    return std::move(e);
  return fn;
}

Error Device::launch(Function fn, unsigned grid, unsigned block,
                     ArrayRef<void *> args, Stream stream, StringRef what) {
  ScopedContext scope(drv, context);
  if (!scope.ok())
    return driverError("cannot make the context of CUDA device " +
                       llvm::Twine(ordinal) + " current");
  return check(drv.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, stream,
                                  const_cast<void **>(args.data()), nullptr),
               "launching kernel '" + what + "'");
}

unsigned mlir::flexsn::cuda::chooseScanBlockSize(uint64_t threads,
                                                 unsigned maxBlockSize,
                                                 unsigned multiprocessors,
                                                 ArrayRef<unsigned> resident) {
  uint64_t wanted = 2 * uint64_t(multiprocessors);
  auto blocksOf = [&](unsigned block) { return (threads + block - 1) / block; };
  // Candidates: maxBlockSize, halved down to 32; resident[i] blocks of
  // candidate i fit on one SM at a time (0: unknown).
  llvm::SmallVector<unsigned, 6> candidates;
  for (unsigned block = maxBlockSize; block >= 32; block /= 2)
    candidates.push_back(block);
  // Every block does the same T steps, so a launch lasts about as many
  // "waves" as it takes the SMs to run all blocks; the fewest waves first
  // (at T=256 NCL=69632, two_in_two_state's scalar backward, 84 registers:
  // 272 blocks of 256 need 2 waves where 544 blocks of 128 need 1).
  auto wavesOf = [&](size_t i) -> uint64_t {
    if (i >= resident.size() || resident[i] == 0)
      return 0;
    uint64_t slots = uint64_t(resident[i]) * multiprocessors;
    return (blocksOf(candidates[i]) + slots - 1) / slots;
  };
  uint64_t fewest = 0;
  for (size_t i = 0; i < candidates.size(); ++i)
    if (uint64_t w = wavesOf(i); w && (!fewest || w < fewest))
      fewest = w;
  // Among those (all, without occupancy figures): the largest block that
  // still gives two blocks per SM, else the smallest, so that a small NCL
  // reaches every SM.
  unsigned chosen = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (fewest && wavesOf(i) != fewest)
      continue;
    chosen = candidates[i];
    if (blocksOf(candidates[i]) >= wanted)
      break;
  }
  return std::max(chosen, 32u);
}

unsigned Device::chooseBlockSize(int64_t NCL, unsigned maxBlockSize,
                                 unsigned neuronsPerThread,
                                 ArrayRef<unsigned> resident) const {
  uint64_t threads = (uint64_t(NCL) + neuronsPerThread - 1) / neuronsPerThread;
  return chooseScanBlockSize(threads, maxBlockSize, unsigned(multiprocessors),
                             resident);
}

Expected<unsigned> Device::residentBlocks(Function fn, unsigned block) {
  ScopedContext scope(drv, context);
  if (!scope.ok())
    return driverError("cannot make the context of CUDA device " +
                       llvm::Twine(ordinal) + " current");
  int blocks = 0;
  if (Error e = check(drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                          &blocks, fn, int(block), 0),
                      "cuOccupancyMaxActiveBlocksPerMultiprocessor"))
    return std::move(e);
  return unsigned(std::max(blocks, 0));
}

Error Device::launchScan(Function fn, ArrayRef<void *> pointers, int64_t T,
                         int64_t NCL, unsigned maxBlockSize, unsigned lanes,
                         Stream stream, StringRef what,
                         ArrayRef<unsigned> resident) {
  if (T < 0 || NCL < 0)
    return driverError("kernel '" + what + "': T and NCL must be >= 0 (got T=" +
                     Twine(T) + ", NCL=" + Twine(NCL) + ")");
  if (maxBlockSize < 32 || maxBlockSize > 1024 || maxBlockSize % 32 ||
      lanes == 0)
    return driverError("kernel '" + what +
                       "': the block size must be a multiple of 32 in [32, "
                       "1024] and neurons per thread >= 1");
  unsigned blockSize = chooseBlockSize(NCL, maxBlockSize, lanes, resident);
  uint64_t perBlock = uint64_t(blockSize) * lanes;
  uint64_t grid = (uint64_t(NCL) + perBlock - 1) / perBlock;
  if (grid == 0)
    return Error::success();
  if (grid > 0x7fffffffu)
    return driverError("kernel '" + what + "': NCL=" + Twine(NCL) +
                     " is too large for one launch (over 2^31 - 1 blocks)");
  llvm::SmallVector<void *, 24> args;
  for (void *const &p : pointers)
    args.push_back(const_cast<void **>(&p));
  args.push_back(&T);
  args.push_back(&NCL);
  return launch(fn, unsigned(grid), blockSize, args, stream, what);
}

Expected<DevicePtr> Device::alloc(size_t bytes) {
  if (Error e = makeCurrent())
    return std::move(e);
  DevicePtr ptr = 0;
  if (Error e = check(drv.cuMemAlloc(&ptr, std::max<size_t>(bytes, 1)),
                      llvm::formatv("allocating {0} bytes on the GPU", bytes)
                          .str()))
    return std::move(e);
  return ptr;
}

void Device::free(DevicePtr ptr) {
  if (ptr)
    drv.cuMemFree(ptr);
}

Error Device::copyToDevice(DevicePtr dst, const void *src, size_t bytes) {
  return check(drv.cuMemcpyHtoD(dst, src, bytes), "copy to the GPU");
}

Error Device::copyToHost(void *dst, DevicePtr src, size_t bytes) {
  return check(drv.cuMemcpyDtoH(dst, src, bytes), "copy from the GPU");
}

Error Device::copyOnDevice(DevicePtr dst, DevicePtr src, size_t bytes) {
  return check(drv.cuMemcpyDtoD(dst, src, bytes), "device-to-device copy");
}

Error Device::memset(DevicePtr dst, uint8_t value, size_t bytes) {
  return check(drv.cuMemsetD8(dst, value, bytes), "memset on the GPU");
}

Error Device::synchronize() {
  ScopedContext scope(drv, context);
  if (!scope.ok())
    return driverError("cannot make the context of CUDA device " +
                       llvm::Twine(ordinal) + " current");
  return check(drv.cuCtxSynchronize(),
               "waiting for the GPU (an earlier launch may have failed)");
}

Expected<Event> Device::createEvent() {
  Event event = nullptr;
  if (Error e = check(drv.cuEventCreate(&event, 0), "cuEventCreate"))
    return std::move(e);
  return event;
}

void Device::destroyEvent(Event event) {
  if (event)
    drv.cuEventDestroy(event);
}

Error Device::record(Event event, Stream stream) {
  return check(drv.cuEventRecord(event, stream), "cuEventRecord");
}

Expected<float> Device::elapsedMs(Event start, Event end) {
  if (Error e = check(drv.cuEventSynchronize(end), "cuEventSynchronize"))
    return std::move(e);
  float ms = 0;
  if (Error e = check(drv.cuEventElapsedTime(&ms, start, end),
                      "cuEventElapsedTime"))
    return std::move(e);
  return ms;
}

//===----------------------------------------------------------------------===//
// Scan kernels
//===----------------------------------------------------------------------===//

Expected<std::unique_ptr<ScanKernel>> ScanKernel::create(
    Device &device, StringRef ptx, StringRef name, StringRef scalarName,
    StringRef deepName, unsigned deepPrefetch, unsigned maxBlockSize,
    unsigned neuronsPerThread, ArrayRef<ScanKernel::Pointer> pointers) {
  if (neuronsPerThread == 0 || (neuronsPerThread > 1) == scalarName.empty())
    return driverError("kernel '" + name + "': a kernel of " +
                       Twine(neuronsPerThread) +
                       " neurons per thread has " +
                       (neuronsPerThread > 1 ? "a" : "no") + " scalar entry");
  if (deepName.empty() != (deepPrefetch == 0))
    return driverError("kernel '" + name +
                       "': a deep entry needs both its "
                       "name and its prefetch depth (got '" +
                       deepName + "' and " + Twine(deepPrefetch) + ")");
  std::unique_ptr<ScanKernel> k(new ScanKernel(device));
  k->maxBlockSize = maxBlockSize;
  k->neuronsPerThread = neuronsPerThread;
  k->deepPrefetch = deepPrefetch;
  k->pointers.assign(pointers.begin(), pointers.end());
  auto fill = [&](Entry &entry, StringRef entryName, unsigned lanes) -> Error {
    entry.name = entryName.str();
    entry.lanes = lanes;
    std::optional<std::string> only = extractPTXEntry(ptx, entryName);
    if (!only)
      return driverError("no kernel entry '" + entryName +
                         "' in the PTX (or its braces do not balance)");
    entry.ptx = std::move(*only);
    return Error::success();
  };
  if (Error e = fill(k->entries[0], name, neuronsPerThread))
    return std::move(e);
  if (neuronsPerThread > 1)
    if (Error e = fill(k->entries[1], scalarName, 1))
      return std::move(e);
  if (deepPrefetch)
    if (Error e = fill(k->entries[2], deepName, 1))
      return std::move(e);
  return std::move(k);
}

bool ScanKernel::takesDeepEntry(int64_t T, int64_t NCL) const {
  // T >= 4 depths: most of the loop runs unchecked (emitNeuronScan); at a
  // shorter T the prologue's checked reads cost what the depth gains.
  return deepPrefetch && uint64_t(T) >= 4 * uint64_t(deepPrefetch) &&
         uint64_t(NCL) <= uint64_t(kDeepMaxThreadsPerSM) *
                              uint64_t(device.multiprocessorCount());
}

const ScanKernel::Entry &ScanKernel::entryFor(ArrayRef<void *> ptrs, int64_t T,
                                              int64_t NCL) const {
  if (takesDeepEntry(T, NCL))
    return entries[2];
  return baseEntryFor(takesVectorEntry(ptrs, NCL));
}

bool ScanKernel::takesVectorEntry(ArrayRef<void *> ptrs, int64_t NCL) const {
  if (neuronsPerThread == 1)
    return true;
  uint64_t width = neuronsPerThread;
  // A small NCL: one neuron per thread, for 4x the warps in flight (on an
  // H100 at T=256 NCL=64K it took lif inference from 42% to 78% of copy).
  if ((uint64_t(NCL) + width - 1) / width <
      256 * uint64_t(device.multiprocessorCount()))
    return false;
  if (uint64_t(NCL) % width)
    return false;
  for (auto [p, info] : llvm::zip(ptrs, pointers))
    if (info.perNeuron &&
        reinterpret_cast<uintptr_t>(p) % (info.elementBytes * width) != 0)
      return false;
  return true;
}

Expected<Function> ScanKernel::get(const Entry &entry) const {
  if (Function fn = entry.fn.load(std::memory_order_acquire))
    return fn;
  std::lock_guard<std::mutex> lock(mutex);
  if (Function fn = entry.fn.load(std::memory_order_relaxed))
    return fn;
  auto module = device.loadPTX(entry.ptx);
  if (!module)
    return module.takeError();
  auto fn = device.getFunction(*module, entry.name);
  if (!fn)
    return fn.takeError();
  // How many blocks of each candidate size fit on an SM (registers,
  // threads): the launch's block size follows from it. Published with the
  // function (release), so a launch that sees one sees the other.
  entry.resident.clear();
  for (unsigned block = maxBlockSize; block >= 32; block /= 2) {
    auto blocks = device.residentBlocks(*fn, block);
    if (!blocks) {
      llvm::consumeError(blocks.takeError());
      entry.resident.clear(); // unknown: the launch falls back to its rule
      break;
    }
    entry.resident.push_back(*blocks);
  }
  entry.fn.store(*fn, std::memory_order_release);
  return *fn;
}

ScanKernel::LaunchShape ScanKernel::describeLaunch(ArrayRef<void *> ptrs,
                                                   int64_t T,
                                                   int64_t NCL) const {
  const Entry &entry = entryFor(ptrs, T, NCL);
  bool loaded = entry.fn.load(std::memory_order_acquire);
  LaunchShape shape;
  shape.entry = entry.name;
  shape.neuronsPerThread = entry.lanes;
  shape.prefetch = &entry == &entries[2] ? deepPrefetch : 0;
  shape.blockSize = device.chooseBlockSize(
      NCL, maxBlockSize, entry.lanes,
      loaded ? ArrayRef<unsigned>(entry.resident) : ArrayRef<unsigned>());
  return shape;
}

void ScanKernel::preload(int64_t NCL) const {
  if (NCL <= 0)
    return;
  preloadEntry(baseEntryFor(takesVectorEntry({}, NCL))); // aligned pointers
  // T is not known here: a long T takes the deep entry.
  if (takesDeepEntry(4 * int64_t(deepPrefetch), NCL))
    preloadEntry(entries[2]);
}

void ScanKernel::preloadEntry(const Entry &entry) const {
  if (entry.fn.load(std::memory_order_acquire))
    return;
  std::lock_guard<std::mutex> lock(preloadMutex);
  std::future<void> &pending = entry.preload;
  if (pending.valid() &&
      pending.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
    return; // on its way
  pending = std::async(std::launch::async, [this, &entry] {
    llvm::consumeError(get(entry).takeError()); // the launch reports a failure
  });
}

ScanKernel::~ScanKernel() {
  std::lock_guard<std::mutex> lock(preloadMutex);
  for (const Entry &entry : entries)
    if (entry.preload.valid())
      entry.preload.wait();
}

Error ScanKernel::launch(ArrayRef<void *> ptrs, int64_t T, int64_t NCL,
                         Stream stream) const {
  if (ptrs.size() != pointers.size())
    return driverError("kernel '" + getName() + "' takes " +
                       Twine(pointers.size()) + " pointers, got " +
                       Twine(ptrs.size()));
  if (T < 0 || NCL < 0)
    return driverError("kernel '" + getName() +
                       "': T and NCL must be >= 0 (got T=" + Twine(T) +
                       ", NCL=" + Twine(NCL) + ")");
  if (NCL == 0)
    return Error::success();
  const Entry &entry = entryFor(ptrs, T, NCL);
  auto fn = get(entry);
  if (!fn)
    return fn.takeError();
  return device.launchScan(*fn, ptrs, T, NCL, maxBlockSize, entry.lanes,
                           stream, entry.name, entry.resident);
}
