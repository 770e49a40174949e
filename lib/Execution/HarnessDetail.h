//===- HarnessDetail.h - What the harness's files share -------*- C++ -*-===//
//
// Private to lib/Execution: the helpers the harness's files (buffers,
// runners, preparation, checks, the case runner) share.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_LIB_EXECUTION_HARNESSDETAIL_H
#define FLEXSN_LIB_EXECUTION_HARNESSDETAIL_H

#include "flexsn/Execution/Harness.h"
#include "flexsn/Interpreter/Interpreter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <map>
#include <random>
#include <vector>

namespace mlir {
namespace flexsn {
namespace harness {

llvm::Error makeError(const llvm::Twine &message);

// Buffers
std::vector<HostBuffer> makeBuffers(ArrayRef<KernelArg> abi, int64_t T,
                                    int64_t NCL);
void fillOperand(HostBuffer &buf, ArgMeaning meaning, std::mt19937_64 &rng);
void zeroSums(std::vector<HostBuffer> &buffers);
int64_t totalBytes(const std::vector<HostBuffer> &buffers);
double median(std::vector<double> times);

// Preparation
void setStorageType(func::FuncOp func, ScanOp scan, Type storage);
ScanOp scanOf(ModuleOp module, StringRef funcName);

// Checks
double defaultTolerance(Type storage, Type compute);

/// Compares buffers with references, leaving out near-tie neurons.
struct Comparer {
  const HarnessOptions &options;
  llvm::raw_ostream &os;
  int64_t NCL;
  /// One flag per neuron; empty: none left out.
  std::vector<uint8_t> mask;
  CheckResult result;
  /// Sequences of `steps` steps that hold chunks side by side, `chunkWidth`
  /// neurons a row (flexsn.chunk_width; 0: rows of NCL).
  int64_t chunkWidth = 0, steps = 0;

  /// The neuron of element i of a compared vector of `size` elements.
  int64_t neuronOf(size_t i, size_t size) const {
    int64_t W = chunkWidth;
    if (W && (int64_t)size == steps * NCL)
      return int64_t(i) / (steps * W) * W + int64_t(i) % W;
    return int64_t(i) % NCL;
  }

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
      if (perNeuron && !mask.empty() && mask[neuronOf(i, ref.size())])
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

/// The chunk width W a launch of `scan` at NCL neurons reads its
/// sequences in (flexsn.chunk_width, W dividing NCL), else 0 (rows of NCL).
int64_t chunkWidth(ScanOp scan, int64_t NCL);
/// `v`, a sequence of T steps of NCL neurons, between the kernel's layout
/// of chunks side by side, W neurons a row (flexsn.chunk_width), and rows
/// of NCL (the interpreter's): to rows with `toRows`, else back.
void reorderChunks(std::vector<double> &v, int64_t T, int64_t NCL, int64_t W,
                   bool toRows);
/// The scan operands in operand order (for the interpreter), from the
/// buffers and the constants of constant initial states; sequences in
/// rows of NCL whatever the kernel's layout.
std::vector<std::vector<double>>
scanOperands(ScanOp scan, const std::vector<HostBuffer> &buffers, int64_t NCL);
/// Compares every result buffer of a run of `scan`'s kernel of `variant`
/// with the interpreter's run on the same operands.
llvm::Error checkWithInterpreter(ScanOp scan, KernelVariant variant, int64_t T,
                                 int64_t NCL,
                                 const std::vector<HostBuffer> &buffers,
                                 Comparer &cmp, StringRef suffix = "");
/// A chunked launch's per-neuron parameters made alike in every chunk of
/// W neurons (the first chunk's), as chunks of one call have them.
void uniformChunkParams(std::vector<HostBuffer> &buffers, int64_t W);
/// Each chunk's start (after the first's) set to the end of the chunk
/// before in the run whose results the buffers hold, as chunked_time's
/// device settling starts its kernel from a guess launch's chunk ends.
void startChunksFromEnds(std::vector<HostBuffer> &buffers, int64_t T,
                         int64_t NCL, int64_t W);
/// After a chunk repair kernel ran on the buffers of a kernel of `scan`
/// (T steps a chunk, NCL = C * W neurons): its outputs and state
/// sequences, each chunk's final state and start against the interpreter's
/// sequential scan of C * T steps of W neurons from the first chunk's
/// starts (at T = 0 none: the kernel leaves chunks without steps alone).
llvm::Error checkRepaired(ScanOp scan, int64_t T, int64_t NCL, int64_t W,
                          const std::vector<HostBuffer> &buffers,
                          const HarnessOptions &options, llvm::raw_ostream &os,
                          CheckResult &result);
/// The backward kernel's gradients (`got`) against central finite
/// differences of the primal's loss, computed with the interpreter in f64.
llvm::Error finiteDifferenceCheck(ScanOp primal, int64_t T, int64_t NCL,
                                  const AdjointCase &c, const MeaningMap &got,
                                  Comparer &cmp);
/// Neurons whose reference run of `primal` passes a switch point within
/// `margin`.
llvm::Error nearTieMask(ScanOp primal, int64_t T, int64_t NCL,
                        const std::vector<std::vector<double>> &operands,
                        double margin, std::vector<uint8_t> &mask);

} // namespace harness
} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_LIB_EXECUTION_HARNESSDETAIL_H
