//===- Checks.cpp - The harness's checks against the oracles ----------------===//

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

double harness::defaultTolerance(Type storage, Type compute) {
  auto tolOf = [](Type t) {
    return t.isF64() ? 1e-12 : t.isF32() ? 1e-5 : 1e-2;
  };
  return std::max(tolOf(storage), tolOf(compute));
}

namespace {
/// Central finite differences of the primal's loss
///   L = sum(grad_out * out) + sum(grad_state * state)
/// computed with the interpreter in f64, compared with the backward
/// kernel's gradients. Neurons are independent, so one perturbation covers
/// every neuron at once; the check uses the first `sub` neurons (all of
/// them for scalar params, whose gradient sums them).
class FiniteDifferences {
public:
  FiniteDifferences(ScanOp primal, int64_t T, int64_t NCL,
                    const AdjointCase &c, Comparer &cmp)
      : primal(primal), T(T), NCL(NCL), c(c), cmp(cmp),
        variant(primal.getFinalStates() ? KernelVariant::FinalState
                                        : KernelVariant::Inference),
        sub(std::min<int64_t>(NCL, 32)) {}

  /// Checks every gradient `got` holds (by meaning).
  Error check(const MeaningMap &got);

private:
  /// Per-neuron losses of a run on `m` neurons.
  LogicalResult losses(int64_t m, const std::vector<std::vector<double>> &ops,
                       std::vector<double> &L);
  /// Operands restricted to the first m neurons.
  std::vector<std::vector<double>> slice(int64_t m);
  /// d(sum of losses of the neurons) / d(element) for one perturbed slot
  /// (`stride` 0: one element for all neurons): Richardson's extrapolation
  /// of central differences at h and h/2.
  LogicalResult central(int64_t m, unsigned operand, int64_t offset,
                        int64_t stride, std::vector<double> &d);
  LogicalResult quotient(int64_t m, unsigned operand, int64_t offset,
                         int64_t stride, double step, std::vector<double> &q);
  /// Compares (index into `buf`, difference quotient) pairs, relative to the
  /// largest quotient, or for a sum over neurons (`sum`) to `scale` (the
  /// sum of the terms' magnitudes).
  void report(const std::string &what, const HostBuffer *buf,
              const std::vector<std::pair<int64_t, double>> &pairs,
              bool sum = false, double scale = 0.0);

  static constexpr double h = 1e-5;
  ScanOp primal;
  int64_t T, NCL;
  const AdjointCase &c;
  Comparer &cmp;
  KernelVariant variant;
  int64_t sub;
  /// The largest difference between the quotients at h and h/2 since the
  /// last report: the quotients' own error, which widens the tolerance (a
  /// body iterated over many steps has large higher derivatives).
  double estimate = 0.0;
};
} // namespace

LogicalResult
FiniteDifferences::losses(int64_t m,
                          const std::vector<std::vector<double>> &ops,
                          std::vector<double> &L) {
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
  unsigned numOut = primal.getNumOutputs();
  for (unsigned o = 0; o < numOut; ++o)
    dot(c.gradOutputs[o], res[o], true);
  for (unsigned s = 0; s < primal.getNumStates(); ++s)
    dot(c.gradStates[s], res[numOut + s], variant == KernelVariant::Inference);
  return success();
}

std::vector<std::vector<double>> FiniteDifferences::slice(int64_t m) {
  std::vector<std::vector<double>> ops;
  for (const auto &x : c.inputs) {
    ops.emplace_back(T * m);
    for (int64_t t = 0; t < T; ++t)
      std::copy_n(x.begin() + t * NCL, m, ops.back().begin() + t * m);
  }
  for (const auto &v : c.initStates)
    ops.emplace_back(v.begin(), v.begin() + m);
  for (unsigned k = 0; k < primal.getNumParams(); ++k)
    ops.push_back(primal.isPerNeuronParam(k)
                      ? std::vector<double>(c.params[k].begin(),
                                            c.params[k].begin() + m)
                      : c.params[k]);
  return ops;
}

LogicalResult FiniteDifferences::quotient(int64_t m, unsigned operand,
                                          int64_t offset, int64_t stride,
                                          double step, std::vector<double> &q) {
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
}

LogicalResult FiniteDifferences::central(int64_t m, unsigned operand,
                                         int64_t offset, int64_t stride,
                                         std::vector<double> &d) {
  std::vector<double> coarse, fine;
  if (failed(quotient(m, operand, offset, stride, h, coarse)) ||
      failed(quotient(m, operand, offset, stride, h / 2, fine)))
    return failure();
  d.assign(m, 0.0);
  for (int64_t n = 0; n < m; ++n) {
    d[n] = (4 * fine[n] - coarse[n]) / 3;
    double diff = std::fabs(fine[n] - coarse[n]);
    if (!(diff <= estimate))
      estimate = diff;
  }
  return success();
}

void FiniteDifferences::report(
    const std::string &what, const HostBuffer *buf,
    const std::vector<std::pair<int64_t, double>> &pairs, bool sum,
    double scale) {
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
}

Error FiniteDifferences::check(const MeaningMap &got) {
  unsigned numIn = primal.getNumInputs(), numSt = primal.getNumStates(),
           numPa = primal.getNumParams();
  std::vector<double> d;
  for (unsigned k = 0; k < numIn; ++k) {
    auto it = got.find({ArgMeaning::GradInput, k});
    if (it == got.end())
      continue;
    std::vector<std::pair<int64_t, double>> pairs;
    for (int64_t t = 0; t < T; ++t) {
      if (failed(central(sub, k, t * sub, 1, d)))
        return makeDiagnosedError();
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
      return makeDiagnosedError();
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
        return makeDiagnosedError();
      for (int64_t n = 0; n < sub; ++n)
        pairs.push_back({n, d[n]});
      report("grad_param #" + std::to_string(k), it->second, pairs);
      continue;
    }
    if (failed(central(NCL, numIn + numSt + k, 0, 0, d)))
      return makeDiagnosedError();
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

Error harness::finiteDifferenceCheck(ScanOp primal, int64_t T, int64_t NCL,
                                     const AdjointCase &c,
                                     const MeaningMap &got, Comparer &cmp) {
  return FiniteDifferences(primal, T, NCL, c, cmp).check(got);
}

int64_t harness::chunkWidth(ScanOp scan, int64_t NCL) {
  int64_t width = scan.getChunkWidth();
  return width && NCL > 0 && NCL % width == 0 ? width : 0;
}

void harness::reorderChunks(std::vector<double> &v, int64_t T, int64_t NCL,
                            int64_t W, bool toRows) {
  std::vector<double> out(v.size());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < NCL; ++n) {
      int64_t chunked = (n / W) * T * W + t * W + n % W, row = t * NCL + n;
      if (toRows)
        out[row] = v[chunked];
      else
        out[chunked] = v[row];
    }
  v.swap(out);
}

/// The scan operands in operand order (for the interpreter), from the
/// buffers and the constants of constant initial states; sequences in
/// rows of NCL whatever the kernel's layout.
std::vector<std::vector<double>>
harness::scanOperands(ScanOp scan, const std::vector<HostBuffer> &buffers,
             int64_t NCL) {
  std::vector<std::vector<double>> ops(scan->getNumOperands());
  int64_t W = chunkWidth(scan, NCL);
  for (const HostBuffer &b : buffers) {
    ArgSource source = getArgSource(scan, b.arg);
    if (source.isResult)
      continue;
    ops[source.number] = b.decoded();
    if (W && getArgShape(b.arg.role) == ArgShape::Sequence)
      reorderChunks(ops[source.number], b.count / NCL, NCL, W, /*toRows=*/true);
  }
  unsigned firstState = scan.getNumInputs() + 2 * scan.getNumLagged();
  for (unsigned k = 0; k < scan.getNumStates(); ++k)
    if (std::optional<double> c = getConstantInitState(scan, k))
      ops[firstState + k].assign(NCL, *c);
  return ops;
}

void harness::uniformChunkParams(std::vector<HostBuffer> &buffers,
                                 int64_t W) {
  for (HostBuffer &b : buffers) {
    if (b.arg.role != KernelArgRole::Param)
      continue;
    size_t chunkBytes = size_t(W) * b.width();
    for (size_t at = chunkBytes; at + chunkBytes <= b.bytes.size();
         at += chunkBytes)
      std::memcpy(b.bytes.data() + at, b.bytes.data(), chunkBytes);
  }
}

void harness::startChunksFromEnds(std::vector<HostBuffer> &buffers,
                                  int64_t T, int64_t NCL, int64_t W) {
  if (T == 0)
    return;
  for (HostBuffer &start : buffers) {
    if (start.arg.role != KernelArgRole::InitState)
      continue;
    for (const HostBuffer &end : buffers) {
      bool finals = end.arg.role == KernelArgRole::FinalState;
      if ((!finals && end.arg.role != KernelArgRole::StateSeq) ||
          end.arg.index != start.arg.index)
        continue;
      size_t bytes = start.width();
      // Chunk c's last step: row T - 1 of its block of T rows of W.
      for (int64_t c = NCL / W - 1; c >= 1; --c)
        for (int64_t n = 0; n < W; ++n) {
          int64_t from = finals ? (c - 1) * W + n : ((c - 1) * T + T - 1) * W + n;
          std::memcpy(start.bytes.data() + (c * W + n) * bytes,
                      end.bytes.data() + from * bytes, bytes);
        }
    }
  }
}

Error harness::checkRepaired(ScanOp scan, int64_t T, int64_t NCL, int64_t W,
                             const std::vector<HostBuffer> &buffers,
                             const HarnessOptions &options,
                             llvm::raw_ostream &os, CheckResult &result) {
  if (T == 0) {
    // Chunks without steps: the repair kernel leaves them as they are.
    if (options.verbose)
      os << "  repaired chunks: no steps, nothing to compare\n";
    return Error::success();
  }
  // Chunk c of neuron n holds steps c * T .. c * T + T - 1 of a [C * T, W]
  // sequence: the chunked layout is the sequential one.
  int64_t C = NCL / W, steps = C * T;
  std::vector<std::vector<double>> ops(scan->getNumOperands());
  for (const HostBuffer &b : buffers) {
    if (isResultRole(b.arg.role))
      continue;
    std::vector<double> v = b.decoded();
    if (getArgShape(b.arg.role) == ArgShape::PerNeuron)
      v.resize(W); // the first chunk's
    ops[getArgSource(scan, b.arg).number] = std::move(v);
  }
  unsigned firstState = scan.getNumInputs() + 2 * scan.getNumLagged();
  for (unsigned k = 0; k < scan.getNumStates(); ++k)
    if (std::optional<double> c = getConstantInitState(scan, k))
      ops[firstState + k].assign(W, *c);
  Comparer cmp{options, os, W, {}, {}};
  if (options.tieMargin > 0) {
    if (Error e = nearTieMask(scan, steps, W, ops, options.tieMargin, cmp.mask))
      return e;
    cmp.result.masked = llvm::count(cmp.mask, 1);
  }
  std::vector<std::vector<double>> expected;
  if (failed(interpretScan(scan, KernelVariant::Inference, steps, W, ops,
                           expected)))
    return makeDiagnosedError();
  unsigned numOut = scan.getNumOutputs();
  // Per chunk and neuron, the state at the step before `row` of chunk c.
  auto perChunk = [&](unsigned k, int64_t row, const std::vector<double> &first) {
    std::vector<double> v(NCL);
    for (int64_t c = 0; c < C; ++c)
      for (int64_t n = 0; n < W; ++n)
        v[c * W + n] = c * T + row < 0
                           ? first[n]
                           : expected[numOut + k][(c * T + row) * W + n];
    return v;
  };
  for (const HostBuffer &b : buffers) {
    ArgDescription m = describeKernelArg(scan, b.arg);
    std::string what = m.str() + " (repaired chunks)";
    switch (b.arg.role) {
    case KernelArgRole::Output:
    case KernelArgRole::StateSeq:
      cmp.compare(what, b, expected[getArgSource(scan, b.arg).number],
                  scan.getComputeType());
      break;
    case KernelArgRole::FinalState:
      cmp.compare(what, b, perChunk(b.arg.index, T - 1, {}),
                  scan.getComputeType());
      break;
    case KernelArgRole::InitState:
      cmp.compare(what, b, perChunk(b.arg.index, -1, ops[firstState + b.arg.index]),
                  scan.getComputeType());
      break;
    default:
      break;
    }
  }
  if (!cmp.result.ok && result.ok)
    result.firstFailure = cmp.result.firstFailure;
  result.ok = result.ok && cmp.result.ok;
  result.worst = std::max(result.worst, cmp.result.worst);
  result.masked = std::max(result.masked, cmp.result.masked);
  result.skipped += cmp.result.skipped;
  return Error::success();
}

/// Compares every result buffer of a run of `scan`'s kernel of `variant`
/// with the interpreter's run on the same operands.
Error harness::checkWithInterpreter(ScanOp scan, KernelVariant variant,
                                  int64_t T, int64_t NCL,
                                  const std::vector<HostBuffer> &buffers,
                                  Comparer &cmp, StringRef suffix) {
  std::vector<std::vector<double>> expected;
  if (failed(interpretScan(scan, variant, T, NCL,
                           scanOperands(scan, buffers, NCL), expected)))
    return makeDiagnosedError();
  int64_t W = chunkWidth(scan, NCL);
  for (const HostBuffer &b : buffers) {
    if (!isResultRole(b.arg.role))
      continue;
    unsigned idx = getArgSource(scan, b.arg).number;
    if (W && getArgShape(b.arg.role) == ArgShape::Sequence)
      reorderChunks(expected[idx], T, NCL, W, /*toRows=*/false);
    ArgDescription m = describeKernelArg(scan, b.arg);
    cmp.compare(m.str() + suffix.str(), b,
                expected[idx], scan.getComputeType());
  }
  return Error::success();
}

/// Neurons whose reference run of `primal` on these operands passes a
/// switch point within the margin.
Error harness::nearTieMask(ScanOp primal, int64_t T, int64_t NCL,
                         const std::vector<std::vector<double>> &operands,
                         double margin, std::vector<uint8_t> &mask) {
  std::vector<std::vector<double>> ignored;
  if (failed(interpretScan(primal, KernelVariant::Inference, T, NCL, operands,
                           ignored, &mask, margin)))
    return makeDiagnosedError();
  return Error::success();
}
