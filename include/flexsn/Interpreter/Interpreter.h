//===- Interpreter.h - Reference interpreter of flexsn.scan -----*- C++ -*-===//
//
// Runs a scan op by op, neuron by neuron, in double precision: the oracle of
// every execution test. With an f32 body, each op's result is rounded to f32
// (as the kernels compute); stored values are rounded to their storage type.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_INTERPRETER_INTERPRETER_H
#define FLEXSN_INTERPRETER_INTERPRETER_H

#include "flexsn/Dialect/FlexSN/Utils/KernelABI.h"
#include "flexsn/Storage/Storage.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"

#include "llvm/ADT/DenseMap.h"

#include <vector>

namespace mlir {
namespace flexsn {

/// Fails with a diagnostic naming the first body op the interpreter cannot
/// evaluate.
LogicalResult checkInterpretable(ScanOp scan);

/// Watches an evaluation for switch points passed closely: a comparison,
/// max/min or spike whose operands differ by at most `margin` (relative to
/// max(1, |a|, |b|)), abs or copysign at 0, floor/ceil/trunc/round/remf
/// next to their jump. A kernel that rounds differently may take the other
/// branch there; differential tests leave such neurons out.
struct TieWatch {
  double margin = 0.0;
  bool hit = false;
};

/// Evaluates the body ops of `scan` once; `env` maps the block arguments
/// (in) and every op result (out) to doubles, each rounded to its type.
/// With `ties`, flags switch points passed within its margin.
void evaluateBody(ScanOp scan, llvm::DenseMap<Value, double> &env,
                  TieWatch *ties = nullptr);

/// Runs `scan` (the kernel `variant`) for T steps over NCL neurons.
/// `operands` hold, in operand order, inputs [T*NCL], lagged sequences
/// [T*NCL], lagged inits [NCL], initial states [NCL] (a constant initial
/// state too), params ([NCL] or [1]). `results` receives outputs [T*NCL],
/// then per state [T*NCL] (Inference), [NCL] (FinalState) or [1] (a
/// sum_states state, summed in double). With `nearTies`, sets one flag per
/// neuron whose run passed a switch point within `margin` (see TieWatch).
/// Fails with a diagnostic on an op it cannot evaluate.
LogicalResult interpretScan(ScanOp scan, KernelVariant variant, int64_t T,
                            int64_t NCL,
                            const std::vector<std::vector<double>> &operands,
                            std::vector<std::vector<double>> &results,
                            std::vector<uint8_t> *nearTies = nullptr,
                            double margin = 0.0);

/// What the reference adjoint of a primal scan needs: the primal operands,
/// the state sequences the backward reads (as the forward stored them), and
/// the gradients flowing into the results.
struct AdjointCase {
  std::vector<std::vector<double>> inputs;     // [T*NCL] per input
  std::vector<std::vector<double>> initStates; // [NCL] per state
  std::vector<std::vector<double>> params;     // [NCL] or [1] per param
  std::vector<std::vector<double>> stateSeqs;  // [T*NCL] per state
  /// Per output: [T*NCL], or empty for no gradient.
  std::vector<std::vector<double>> gradOutputs;
  /// Per state: [T*NCL] (state sequences) or [NCL] (final states), or empty.
  std::vector<std::vector<double>> gradStates;
  /// The gradients given are of final states although the primal returns
  /// state sequences (the final-state pair of the automatic saving policy).
  bool finalStates = false;
};

/// Gradients of every input [T*NCL], initial state [NCL] and param ([NCL],
/// or [1] summed over neurons for a scalar).
struct AdjointGrads {
  std::vector<std::vector<double>> inputs, initStates, params;
};

/// Reverse-mode BPTT of `primal`, written independently of
/// flexsn-differentiate: per neuron and step (t = T-1 .. 0) it evaluates the
/// body from x_t and the stored state before the step, then propagates
/// gradients op by op in double precision, with each op's derivative coded
/// here and each spike's from SurrogateAttr::derivative.
LogicalResult interpretAdjoint(ScanOp primal, int64_t T, int64_t NCL,
                               const AdjointCase &in, AdjointGrads &out);

} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_INTERPRETER_INTERPRETER_H
