//===- CUDARuntime.h - Thin runtime over the CUDA driver API ----*- C++ -*-===//
//
// Loads libcuda.so.1 with dlopen at run time (no link dependency: the
// library builds and its tests run on machines without a GPU, where every
// entry point reports "no CUDA driver"), loads PTX into modules cached by
// their text per context, compiles each scan entry when a launch first
// needs it, and launches kernels on a stream. Every
// CUresult becomes an llvm::Error carrying the driver's name and message and
// what was being done (the kernel's name for launches).
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_RUNTIME_CUDA_CUDARUNTIME_H
#define FLEXSN_RUNTIME_CUDA_CUDARUNTIME_H

#include "flexsn/Runtime/CUDA/PTXText.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace mlir {
namespace flexsn {
namespace cuda {

/// Opaque driver handles (the driver's CUcontext, CUmodule, ... are
/// pointers; CUdeviceptr is a 64-bit integer).
using Context = struct Opaque_Context *;
using Module = struct Opaque_Module *;
using Function = struct Opaque_Function *;
using Stream = struct Opaque_Stream *;
using Event = struct Opaque_Event *;
using DevicePtr = uint64_t;

class Driver;

/// The threads per block of a scan launch of `threads` threads on
/// `multiprocessors` SMs, among `maxBlockSize` halved down to 32. With
/// `resident` (for each candidate, largest first, how many blocks fit on
/// one SM at a time), only the candidates whose grid runs in the fewest
/// waves; among those, the largest that still gives two blocks per SM,
/// else the smallest, so that a small NCL reaches every SM.
unsigned chooseScanBlockSize(uint64_t threads, unsigned maxBlockSize,
                             unsigned multiprocessors,
                             llvm::ArrayRef<unsigned> resident = {});

/// A device's primary context and its module cache. Calls that need the
/// context push it and pop it again, so a caller (PyTorch) keeps its own
/// current context.
class Device {
public:
  /// Device `ordinal` of the driver. Fails with "no CUDA driver" where
  /// libcuda cannot be loaded, "driver too old" below CUDA 12.0, "no CUDA
  /// device" when there is none, or the driver's own error.
  static llvm::Expected<std::unique_ptr<Device>> open(int ordinal = 0);
  /// How many devices the driver sees (errors as for open()).
  static llvm::Expected<int> count();
  ~Device();

  /// "NVIDIA H100 80GB HBM3, sm_90, driver 13.0".
  std::string describe() const;
  /// Compute capability as major * 10 + minor (90 for sm_90).
  int computeCapability() const { return capability; }
  /// Streaming multiprocessors.
  int multiprocessorCount() const { return multiprocessors; }

  /// chooseScanBlockSize for NCL neurons at `neuronsPerThread` on this
  /// device. The kernels read their block size at run time (blockDim.x).
  unsigned chooseBlockSize(int64_t NCL, unsigned maxBlockSize,
                           unsigned neuronsPerThread,
                           llvm::ArrayRef<unsigned> resident = {}) const;
  /// How many blocks of `block` threads of `fn` fit on one SM at a time.
  llvm::Expected<unsigned> residentBlocks(Function fn, unsigned block);

  /// Loads `ptx` (once per context: later calls with the same text return
  /// the cached module). A PTX the driver rejects gives its JIT log. Safe
  /// while a stream of the thread is being captured into a CUDA graph.
  llvm::Expected<Module> loadPTX(llvm::StringRef ptx);
  llvm::Expected<Function> getFunction(Module module, llvm::StringRef name);

  /// Launches `fn` with `grid` x `block` threads on `stream` (null: the
  /// default stream). `args` are pointers to each argument's value, as
  /// cuLaunchKernel takes them. `what` names the kernel in errors.
  llvm::Error launch(Function fn, unsigned grid, unsigned block,
                     llvm::ArrayRef<void *> args, Stream stream,
                     llvm::StringRef what);

  /// Launches the scan entry `fn`, which scans `lanes` neurons per thread,
  /// over T steps and NCL neurons: block chooseBlockSize(NCL, maxBlockSize,
  /// lanes, resident), grid ceil(NCL / (block * lanes)); nothing is launched when NCL
  /// is 0. `pointers` are the kernel's pointer arguments in ABI order
  /// (device addresses). ScanKernel::launch picks the entry and `lanes`.
  llvm::Error launchScan(Function fn, llvm::ArrayRef<void *> pointers,
                         int64_t T, int64_t NCL, unsigned maxBlockSize,
                         unsigned lanes, Stream stream, llvm::StringRef what,
                         llvm::ArrayRef<unsigned> resident = {});

  llvm::Expected<DevicePtr> alloc(size_t bytes);
  void free(DevicePtr ptr);
  llvm::Error copyToDevice(DevicePtr dst, const void *src, size_t bytes);
  llvm::Error copyToHost(void *dst, DevicePtr src, size_t bytes);
  llvm::Error copyOnDevice(DevicePtr dst, DevicePtr src, size_t bytes);
  llvm::Error memset(DevicePtr dst, uint8_t value, size_t bytes);
  llvm::Error synchronize();

  llvm::Expected<Event> createEvent();
  void destroyEvent(Event event);
  llvm::Error record(Event event, Stream stream);
  /// Milliseconds between two recorded events (waits for `end`).
  llvm::Expected<float> elapsedMs(Event start, Event end);

  /// Makes the device's primary context current on the calling thread (for
  /// a tool that owns its thread: alloc/copies/events use the current
  /// context). loadPTX, launch and synchronize do not need it: they make
  /// the context current for the call only and restore the caller's.
  llvm::Error makeCurrent();

private:
  Device(const Driver &driver, int ordinal) : drv(driver), ordinal(ordinal) {}
  llvm::Error check(int result, const llvm::Twine &what) const;

  const Driver &drv;
  int ordinal;
  int device = 0;
  int capability = 0;
  int multiprocessors = 1;
  Context context = nullptr;
  std::string name;
  int driverVersion = 0;
  std::mutex cacheMutex;
  llvm::StringMap<Module> modules; // by PTX text
};

/// One scan kernel of a PTX program on one device. With
/// `neuronsPerThread` W > 1 the kernel has two entries (the
/// convert-flexsn-to-gpu contract): the vector entry `name` (W neurons per
/// thread, W-wide accesses) and the scalar entry `scalarName` (one neuron
/// per thread); a kernel that reads few bytes a step may have a third, the
/// deep entry `deepName` (one neuron per thread, `deepPrefetch` steps of
/// reads in flight; getDeepEntryPrefetch). Each launch takes the deep entry
/// when there is one, NCL is at most kDeepMaxThreadsPerSM per SM and T is
/// at least 4 x deepPrefetch; else the vector entry when NCL is a multiple
/// of W, every [T, NCL] or [NCL] pointer is aligned to W elements, and
/// there are at least 256 threads of W neurons per SM; else the scalar
/// entry. An entry is compiled by the driver on the first launch that
/// takes it (or by preload()), from a module holding only that entry.
class ScanKernel {
public:
  /// A pointer argument, as the entry choice needs it.
  struct Pointer {
    /// Bytes of one element.
    unsigned elementBytes = 0;
    /// Whether it holds NCL elements per row ([T, NCL] or [NCL]), which
    /// the vector entry accesses W at a time; false for one element
    /// (scalar params, sums).
    bool perNeuron = false;
  };
  /// At most this many threads per SM (one neuron each) take the deep
  /// entry: there the scalar entry's reads in flight do not cover DRAM
  /// latency, while above it the deep entry's registers cost more than its
  /// reads gain (H100, T=256, bf16 lif: 496 threads per SM 67% -> 76% of
  /// copy, 993 threads per SM 81% -> 78%).
  static constexpr unsigned kDeepMaxThreadsPerSM = 512;
  /// `ptx` must outlive the kernel. `scalarName` is empty when W is 1;
  /// `deepName` is empty (and `deepPrefetch` 0) when there is no deep
  /// entry. Fails when `ptx` does not define the entries.
  static llvm::Expected<std::unique_ptr<ScanKernel>>
  create(Device &device, llvm::StringRef ptx, llvm::StringRef name,
         llvm::StringRef scalarName, llvm::StringRef deepName,
         unsigned deepPrefetch, unsigned maxBlockSize,
         unsigned neuronsPerThread, llvm::ArrayRef<Pointer> pointers);

  /// What a launch over T steps and NCL neurons with `pointers` runs.
  struct LaunchShape {
    std::string entry;
    unsigned neuronsPerThread = 1;
    /// Steps of reads in flight: the deep entry's, else 0 (the entry's
    /// automatic depth, which the manifest does not record).
    unsigned prefetch = 0;
    /// From the entry's occupancy once it is loaded, the rule before.
    unsigned blockSize = 0;
  };
  LaunchShape describeLaunch(llvm::ArrayRef<void *> pointers, int64_t T,
                             int64_t NCL) const;
  /// Starts compiling and loading, on a thread of its own, the entries a
  /// launch at NCL with aligned pointers may take (for a small NCL, the
  /// deep one too: T is not known yet), unless they are loaded or already
  /// on their way; returns at once. Errors are left to the launch.
  void preload(int64_t NCL) const;
  /// Waits for the preloads under way.
  ~ScanKernel();
  /// Launches over T steps and NCL neurons on `stream`; `pointers` are the
  /// kernel's pointer arguments in ABI order (device addresses).
  llvm::Error launch(llvm::ArrayRef<void *> pointers, int64_t T, int64_t NCL,
                     Stream stream) const;
  Device &getDevice() const { return device; }
  llvm::StringRef getName() const { return entries[0].name; }

private:
  ScanKernel(Device &device) : device(device) {}
  /// One entry of the kernel, loaded on first use.
  struct Entry {
    std::string name;
    /// The module text the driver compiles: only this entry.
    std::string ptx;
    /// Neurons per thread.
    unsigned lanes = 1;
    mutable std::atomic<Function> fn{nullptr};
    /// For each block size from maxBlockSize halved to 32: how many blocks
    /// fit on an SM (empty: unknown). Written before `fn` is published.
    mutable llvm::SmallVector<unsigned, 6> resident;
    /// A preload under way (guarded by preloadMutex).
    mutable std::future<void> preload;
  };
  /// Whether a launch at NCL with `pointers` may take the vector entry.
  bool takesVectorEntry(llvm::ArrayRef<void *> pointers, int64_t NCL) const;
  /// Whether a launch over T steps and NCL neurons takes the deep entry.
  bool takesDeepEntry(int64_t T, int64_t NCL) const;
  /// The entry a launch takes: the vector one (entries[0]), the scalar one
  /// (entries[1], absent at one neuron per thread) or the deep one
  /// (entries[2], absent unless deepPrefetch > 0).
  const Entry &entryFor(llvm::ArrayRef<void *> pointers, int64_t T,
                        int64_t NCL) const;
  const Entry &baseEntryFor(bool vector) const {
    return entries[vector || neuronsPerThread == 1 ? 0 : 1];
  }
  llvm::Expected<Function> get(const Entry &entry) const;
  void preloadEntry(const Entry &entry) const;

  Device &device;
  Entry entries[3];
  unsigned maxBlockSize = 256, neuronsPerThread = 1, deepPrefetch = 0;
  llvm::SmallVector<Pointer> pointers;
  mutable std::mutex mutex;        // guards the loads
  mutable std::mutex preloadMutex; // guards each entry's `preload`
};

} // namespace cuda
} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_RUNTIME_CUDA_CUDARUNTIME_H
