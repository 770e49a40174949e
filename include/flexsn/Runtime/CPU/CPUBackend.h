//===- CPUBackend.h - JIT-compiled CPU kernels ------------------*- C++ -*-===//

#ifndef FLEXSN_RUNTIME_CPU_CPUBACKEND_H
#define FLEXSN_RUNTIME_CPU_CPUBACKEND_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace llvm {
class TargetMachine;
namespace orc {
class JITDylib;
} // namespace orc
} // namespace llvm

namespace mlir {
namespace flexsn {

/// The CPU kernels of a flexsn module, compiled in-process, each on its
/// first lookup.
class CPUKernels {
public:
  /// Runs the CPU pipeline on a clone of `module` (to the LLVM dialect) and
  /// keeps the result; no LLVM code is generated yet. The clone lives in
  /// `module`'s context, which must outlive the CPUKernels.
  static FailureOr<std::unique_ptr<CPUKernels>> compile(ModuleOp module,
                                                        unsigned prefetch = 1);
  ~CPUKernels();

  using KernelFn = void (*)(void **);
  /// The packed entry point of kernel `name` (e.g. "lif_inference"). The
  /// first lookup of a kernel JIT-compiles that kernel alone (translation
  /// to LLVM IR, LLVM's O2 pipeline, code generation): a training call
  /// pays for its forward and backward kernels, not for the program's
  /// other variants. Later lookups return the same entry point. An error
  /// names a kernel the program does not define, or the JIT's failure.
  /// Thread-safe.
  llvm::Expected<KernelFn> lookup(StringRef name);

  /// Where this program's kernels keep their machine code across processes
  /// (empty: nowhere, the default). A first lookup then loads the object
  /// file `dir`/cpu-<key>.o instead of optimizing and generating code, or
  /// writes it after generating. The key is a SHA-256 of the kernel's
  /// lowered module (LLVM dialect, printed), the host's target triple, CPU
  /// and features, LLVM's version, the vector math library, kObjectFormat
  /// and the build of this code (the path, size and modification time of
  /// the library or executable it runs from). A file is written whole
  /// (mode 0600, with a SHA-256 trailer), then renamed; one that is not a
  /// regular file of this user writable by it alone, fails its checksum, is
  /// not an object file defining the kernel's entry point, or does not link
  /// is compiled again (with a line on stderr) and replaced. The caller
  /// vouches for `dir` itself (the Python package checks its owner and
  /// mode). Applies to lookups after the call.
  void setObjectCacheDir(StringRef dir);
  /// Names the object files' layout and ABI (the packed entry point).
  static constexpr const char *kObjectFormat = "flexsn-cpu-object-2";

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

  /// Asks Linux to back the whole 2 MiB pages of a kernel's result buffer
  /// (`bytes` at `ptr`) with transparent huge pages before the kernel
  /// writes it, when it holds at least kHugePageAdviceBytes (the C API's
  /// CPU launch does so for every result). PyTorch's CPU allocator maps a
  /// large tensor anew on each call (glibc serves it with mmap), and every
  /// 4 KiB page then faults on its first write: on the build machine,
  /// writing a fresh 64 MiB tensor took 20-25 ms, 6-7 ms on huge pages.
  /// The kernel writes every byte of its results, so the advice costs no
  /// memory beyond them; it is advice only (THP off, or a mapping that
  /// cannot take it: no effect), the same that PyTorch's allocator gives
  /// every tensor of 2 MiB or more under THP_MEM_ALLOC_ENABLE=1 (lif f32
  /// inference at T=4 NCL=4M: 40.4 ms without, 13.5 ms with). The first
  /// calls of a process pay for it while the kernel assembles free huge
  /// pages.
  /// FLEXSN_HUGE_PAGES=0 in the environment turns it off.
  static constexpr size_t kHugePageAdviceBytes = size_t(4) << 20;
  static void adviseHugePages(void *ptr, size_t bytes);

private:
  CPUKernels() = default;

  /// Links `object` into a JITDylib of its own and finds `packed`, its
  /// entry point; a failed link leaves no JITDylib behind. Called with
  /// `mutex` held.
  llvm::Expected<KernelFn> link(std::unique_ptr<llvm::MemoryBuffer> object,
                                StringRef packed);
  /// The object code of `one` (a module of one kernel, `name`, whose packed
  /// entry point is `packed`): translated to LLVM IR, optimized at O2 for
  /// the host, compiled.
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
  compile(ModuleOp one, StringRef name, StringRef packed);

  /// The program after the CPU pipeline (LLVM dialect).
  OwningOpRef<ModuleOp> lowered;
  /// The host's, for LLVM's optimizer and code generator.
  std::shared_ptr<llvm::TargetMachine> targetMachine;
  std::mutex mutex; // guards dylibs and entries
  /// The kernels compiled so far, each in a JITDylib of the process's one
  /// JIT (removed with the CPUKernels).
  std::vector<llvm::orc::JITDylib *> dylibs;
  llvm::StringMap<KernelFn> entries;
  std::string objectCacheDir; // guarded by mutex
};

} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_RUNTIME_CPU_CPUBACKEND_H
