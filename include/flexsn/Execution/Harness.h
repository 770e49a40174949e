//===- Harness.h - Run and check compiled flexsn kernels --------*- C++ -*-===//
//
// What every tool that runs kernels needs, once: host buffers in the
// kernels' storage types, CPU and CUDA runners, the wiring of a backward
// kernel to what its training forward wrote, and the comparisons with the
// reference interpreter, the reference adjoint and finite differences.
// flexsn-run and flexsn-fuzz are thin tools over it.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_EXECUTION_HARNESS_H
#define FLEXSN_EXECUTION_HARNESS_H

#include "flexsn/Conversion/Passes.h"
#include "flexsn/Dialect/FlexSN/Utils/KernelABI.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <random>
#include <string>
#include <vector>

namespace mlir {
namespace flexsn {

struct PipelineOptions;

/// An error whose diagnostics the MLIR context has already reported: tools
/// print nothing more for it.
class DiagnosedError : public llvm::ErrorInfo<DiagnosedError> {
public:
  static char ID;
  void log(llvm::raw_ostream &os) const override;
  std::error_code convertToErrorCode() const override;
};
llvm::Error makeDiagnosedError();

struct HarnessOptions {
  /// CPU threads (0: one per hardware thread).
  unsigned threads = 0;
  /// Timed repetitions of a benchmark (CUDA: at least 30).
  unsigned reps = 20;
  /// CUDA device ordinal.
  int device = 0;
  /// Max relative error of a comparison; < 0: by the coarser of storage and
  /// compute type (f64 1e-12, f32 1e-5, f16/bf16 1e-2).
  double tolerance = -1.0;
  /// Backward checks of an f64 body without spikes also compare with
  /// central finite differences.
  bool finiteDifferences = true;
  /// > 0: neurons whose reference run passes a switch point within this
  /// margin (see TieWatch) are left out of every comparison.
  double tieMargin = 0.0;
  /// Print one line per comparison.
  bool verbose = true;
  /// Inference, final-state and training forward kernels of a scan with
  /// flexsn.chunk_width:
  /// after the kernel's check (each chunk from a random start, a neuron of
  /// its own), run the kernel again from the chunk ends it gave and its
  /// chunk repair kernel, and check the chunks as one sequential scan of
  /// each neuron (per-neuron parameters alike in every chunk).
  bool repair = false;
};

/// One kernel pointer argument's host buffer.
struct HostBuffer {
  KernelArg arg;
  int64_t count = 0;
  std::vector<uint8_t> bytes;

  unsigned width() const;
  double at(int64_t i) const;
  std::vector<double> decoded() const;
  /// Uniform values in [lo, hi), rounded to the storage type.
  void fill(std::mt19937_64 &rng, double lo, double hi);
};

/// Where kernels run.
class KernelRunner {
public:
  virtual ~KernelRunner();
  /// "cpu" or "cuda".
  virtual llvm::StringRef backend() const = 0;
  /// Runs kernel `name` on `buffers` (results are copied back into them;
  /// sum results are zeroed first).
  virtual llvm::Error run(llvm::StringRef name,
                          std::vector<HostBuffer> &buffers, int64_t T,
                          int64_t NCL) = 0;
  /// Prints the median time of `name` on `buffers` and its bandwidth (on a
  /// GPU next to a device copy measured in the same run).
  virtual llvm::Error bench(llvm::StringRef name,
                            std::vector<HostBuffer> &buffers, int64_t T,
                            int64_t NCL, llvm::raw_ostream &os) = 0;
  /// The kernel entry the last run() launched (CUDA: the vector, scalar or
  /// deep entry); empty where a kernel has one entry.
  virtual std::string lastEntry() const { return ""; }
};

/// Compiles every kernel of `module` for the CPU, its time loop pipelined
/// `pipeline.prefetch` steps deep (0: 1).
llvm::Expected<std::unique_ptr<KernelRunner>>
createCPURunner(ModuleOp module, const HarnessOptions &options,
                const PipelineOptions &pipeline);
/// Compiles every kernel of `module` (already differentiated where it
/// trains) to PTX for device `options.device`, with `pipeline`'s options
/// and the device's chip, and loads it.
llvm::Expected<std::unique_ptr<KernelRunner>>
createCUDARunner(ModuleOp module, const HarnessOptions &options,
                 const PipelineOptions &pipeline);

/// Readies `module` for the harness: canonicalizes, keeps only the kernel
/// function `funcName` (empty: the only one), retypes every tensor to
/// `storage` (null: as written), and for training differentiates it
/// (saving `saveOps`). Returns the kernel function's name.
llvm::Expected<std::string>
prepareKernelModule(ModuleOp module, llvm::StringRef funcName, Type storage,
                    bool training, llvm::ArrayRef<std::string> saveOps);

/// Fails when the host buffers of `kind` at T x NCL exceed this machine's
/// memory (allocating them would abort the process).
llvm::Error checkHostMemory(ModuleOp module, llvm::StringRef kind, int64_t T,
                            int64_t NCL);

/// The outcome of the comparisons of one run.
struct CheckResult {
  bool ok = true;
  double worst = 0.0;
  /// Comparisons left out (a scalar gradient summing a near-tie neuron).
  unsigned skipped = 0;
  /// Neurons left out as near ties.
  int64_t masked = 0;
  /// "grad_param #0 vs reference adjoint: relative error 0.3 (tolerance
  /// 1e-05)" for the first comparison over its tolerance.
  std::string firstFailure;
  void add(llvm::StringRef what, double rel, double tol);
};

/// Runs the `kind` kernel (inference, final_state, forward or backward; a
/// backward run runs the training forward first and reads what it wrote)
/// of function `funcName` of a prepared module on operands drawn from
/// `seed`; with `check`, compares every result with the references; with
/// `bench`, times the kernel. Comparison lines go to `os`.
llvm::Expected<CheckResult> runKernelCase(ModuleOp module,
                                          llvm::StringRef funcName,
                                          llvm::StringRef kind, int64_t T,
                                          int64_t NCL, uint64_t seed,
                                          KernelRunner &runner,
                                          const HarnessOptions &options,
                                          bool check, bool bench,
                                          llvm::raw_ostream &os);

} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_EXECUTION_HARNESS_H
