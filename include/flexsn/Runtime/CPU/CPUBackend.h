//===- CPUBackend.h - JIT-compiled CPU kernels ------------------*- C++ -*-===//

#ifndef FLEXSN_RUNTIME_CPU_CPUBACKEND_H
#define FLEXSN_RUNTIME_CPU_CPUBACKEND_H

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/BuiltinOps.h"

#include <memory>

namespace mlir {
namespace flexsn {

/// The CPU kernels of a flexsn module, compiled in-process.
class CPUKernels {
public:
  /// Runs the CPU pipeline on a clone of `module` and JIT-compiles it.
  static FailureOr<std::unique_ptr<CPUKernels>> compile(ModuleOp module,
                                                        unsigned prefetch = 1);

  using KernelFn = void (*)(void **);
  /// The packed entry point of kernel `name` (e.g. "lif_inference").
  FailureOr<KernelFn> lookup(StringRef name);

  /// Runs `fn` on `ptrs` (the kernel's pointer arguments in ABI order) for
  /// T steps and NCL neurons, splitting the neurons over at most `threads`
  /// threads (0: one per hardware thread) in chunks of whole blocks of
  /// kCPUBlockNeurons, each of at least kMinChunkWork neuron-steps; the
  /// calling thread runs one chunk and kept worker threads the others.
  /// Nothing runs when T or NCL is 0, except that final-state kernels
  /// still copy initial states through (they run with T = 0).
  static constexpr int64_t kMinChunkWork = 32768;
  static void run(KernelFn fn, ArrayRef<void *> ptrs, int64_t T, int64_t NCL,
                  unsigned threads = 0);

private:
  std::unique_ptr<ExecutionEngine> engine;
};

} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_RUNTIME_CPU_CPUBACKEND_H
