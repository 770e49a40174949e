//===- Interpreter.h - Reference interpreter of flexsn.scan -----*- C++ -*-===//
//
// Runs a scan op by op, neuron by neuron, in double precision: the oracle of
// every execution test. With an f32 body, each op's result is rounded to f32
// (as the kernels compute); stored values are rounded to their storage type.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_INTERPRETER_INTERPRETER_H
#define FLEXSN_INTERPRETER_INTERPRETER_H

#include "flexsn/Conversion/ScanKernel.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"

#include <vector>

namespace mlir {
namespace flexsn {

/// Rounds `x` to the nearest value of float type `type` (f16, bf16, f32,
/// f64), ties to even.
double roundToType(double x, Type type);

/// Runs `scan` (the kernel `variant`) for T steps over NCL neurons.
/// `operands` hold inputs [T*NCL], initial states [NCL], params ([NCL] or
/// [1]) in operand order. `results` receives outputs [T*NCL], then per state
/// [T*NCL] (Inference) or [NCL] (FinalState). Fails with a diagnostic on an
/// op it cannot evaluate.
LogicalResult interpretScan(ScanOp scan, KernelVariant variant, int64_t T,
                            int64_t NCL,
                            const std::vector<std::vector<double>> &operands,
                            std::vector<std::vector<double>> &results);

} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_INTERPRETER_INTERPRETER_H
