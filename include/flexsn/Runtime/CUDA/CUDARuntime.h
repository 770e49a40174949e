//===- CUDARuntime.h - Thin runtime over the CUDA driver API ----*- C++ -*-===//
//
// Loads libcuda.so.1 with dlopen at run time (no link dependency: the
// library builds and its tests run on machines without a GPU, where every
// entry point reports "no CUDA driver"), loads PTX into modules cached by
// the PTX's hash per context, and launches kernels on a stream. Every
// CUresult becomes an llvm::Error carrying the driver's name and message and
// what was being done (the kernel's name for launches).
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_RUNTIME_CUDA_CUDARUNTIME_H
#define FLEXSN_RUNTIME_CUDA_CUDARUNTIME_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <mutex>
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

  /// The threads per block of a scan launch: `maxBlockSize`, halved (not
  /// below 32) while the grid would have fewer than two blocks per
  /// multiprocessor, so that a small NCL still reaches every SM. The
  /// kernels read their block size at run time (blockDim.x).
  unsigned chooseBlockSize(int64_t NCL, unsigned maxBlockSize,
                           unsigned neuronsPerThread) const;

  /// Loads `ptx` (once per context: later calls with the same text return
  /// the cached module). A PTX the driver rejects gives its JIT log.
  llvm::Expected<Module> loadPTX(llvm::StringRef ptx);
  llvm::Expected<Function> getFunction(Module module, llvm::StringRef name);

  /// Launches `fn` with `grid` x `block` threads on `stream` (null: the
  /// default stream). `args` are pointers to each argument's value, as
  /// cuLaunchKernel takes them. `what` names the kernel in errors.
  llvm::Error launch(Function fn, unsigned grid, unsigned block,
                     llvm::ArrayRef<void *> args, Stream stream,
                     llvm::StringRef what);

  /// Launches the scan kernel `fn` over T steps and NCL neurons: the one
  /// place where a launch's geometry is decided. Below 256 threads per SM
  /// at `neuronsPerThread`, the launch has one thread per neuron instead
  /// (the kernels then scan one neuron per thread). The block size is
  /// chooseBlockSize(NCL, maxBlockSize, neuronsPerThread), the grid
  /// ceil(NCL / (block * neurons per thread)); nothing is launched when NCL
  /// is 0. `pointers` are the kernel's pointer arguments in ABI order
  /// (device addresses).
  llvm::Error launchScan(Function fn, llvm::ArrayRef<void *> pointers,
                         int64_t T, int64_t NCL, unsigned maxBlockSize,
                         unsigned neuronsPerThread, Stream stream,
                         llvm::StringRef what);

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
  llvm::DenseMap<uint64_t, Module> modules;
};

} // namespace cuda
} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_RUNTIME_CUDA_CUDARUNTIME_H
