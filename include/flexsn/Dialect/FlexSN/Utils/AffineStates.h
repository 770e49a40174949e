//===- AffineStates.h - Which scans update their states affinely -*- C++ -*-===//
//
// A scan whose new states are affine in its states,
//
//   s'_i = sum_j A_ij(x_t) s_j + b_i(x_t),
//
// with A and b computed from the step's inputs, lagged values and parameters
// alone, composes across steps: (A2, b2) after (A1, b1) is (A2 A1, A2 b1 +
// b2), an associative operator, so its steps can run as a parallel scan.
// Leaky integrators, synaptic currents and neurons without reset are such
// scans; a reset through a spike of the state is not. The reverse-time
// backward scan of any core is, since its adjoint is linear in the state
// gradients and reads the forward's states as lagged values.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_DIALECT_FLEXSN_UTILS_AFFINESTATES_H
#define FLEXSN_DIALECT_FLEXSN_UTILS_AFFINESTATES_H

#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace mlir {
class Operation;
namespace flexsn {
class ScanOp;

/// What the analysis proves of one state's update.
struct StateUpdate {
  /// s'_i is affine in the states (A_i and b_i free of them).
  bool affine = false;
  /// The states s'_i reads (the nonzero pattern of row i of A), where it is
  /// affine.
  llvm::BitVector reads;
  /// Where it is not: the op at which the update stops being affine, and
  /// why (for a diagnostic).
  Operation *culprit = nullptr;
  std::string reason;
};

/// One entry per state of `scan`, in order.
llvm::SmallVector<StateUpdate> analyzeAffineStates(ScanOp scan);

} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_DIALECT_FLEXSN_UTILS_AFFINESTATES_H
