//===- AdjointRules.h - Shared pieces of the adjoint rules ------*- C++ -*-===//
//
// Private to lib/Dialect/FlexSN/IR: the scalar builder the rules write
// with, the frame a rule reads (result gradient, operands, result) and the
// external-model template that attaches a rule function to upstream ops.
// The rules themselves: ArithAdjointModels.cpp, MathAdjointModels.cpp,
// FlexSNAdjoint.cpp (flexsn.spike, flexsn.detach).
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_LIB_DIALECT_FLEXSN_IR_ADJOINTRULES_H
#define FLEXSN_LIB_DIALECT_FLEXSN_IR_ADJOINTRULES_H

#include "flexsn/Dialect/FlexSN/IR/FlexSNInterfaces.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"

#include <cmath>

namespace mlir {
namespace flexsn {
namespace detail {

/// Small scalar-IR builder: every value has the float type `t`.
struct ScalarBuilder {
  OpBuilder &b;
  Location loc;
  Type t;

  Value c(double v) {
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(t, v));
  }
  Value add(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubFOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return arith::DivFOp::create(b, loc, x, y); }
  Value neg(Value x) { return arith::NegFOp::create(b, loc, x); }
  Value abs(Value x) { return math::AbsFOp::create(b, loc, x); }
  Value exp(Value x) { return math::ExpOp::create(b, loc, x); }
  Value cmp(arith::CmpFPredicate p, Value x, Value y) {
    return arith::CmpFOp::create(b, loc, p, x, y);
  }
  Value select(Value cond, Value x, Value y) {
    return arith::SelectOp::create(b, loc, cond, x, y);
  }
  /// `g` where `cond`, else 0.
  Value where(Value cond, Value g) { return select(cond, g, c(0.0)); }
  /// alpha * sigmoid'(alpha * x). sigmoid' is even, so this is alpha * e /
  /// (1 + e)^2 with e = exp(-|alpha * x|) in [0, 1]: the divisor lies in
  /// [1, 2] (it cannot overflow, and the GPU lowering proves its range and
  /// takes the reciprocal's fast path, flexsn-bounded-reciprocal), and no
  /// 1 - s cancels where sigmoid is near 1. Mirrors SurrogateAttr's.
  Value sigmoidGrad(double alpha, Value x) {
    Value e = exp(mul(c(-std::abs(alpha)), abs(x)));
    Value r = div(c(1.0), add(c(1.0), e));
    return mul(c(alpha), mul(e, mul(r, r)));
  }
};

/// What one rule reads: the result gradient `g`, the first two operands
/// `x`, `y` and the result `r`; `set` fills the operand gradients (null:
/// none).
struct RuleFrame {
  RuleFrame(Operation *op, OpBuilder &b, Value g, SmallVectorImpl<Value> &grads)
      : loc(op->getLoc()),
        e{b, loc, op->getNumResults() ? op->getResult(0).getType() : Type()},
        g(g), x(op->getNumOperands() > 0 ? op->getOperand(0) : Value()),
        y(op->getNumOperands() > 1 ? op->getOperand(1) : Value()),
        r(op->getNumResults() ? op->getResult(0) : Value()), grads(grads) {}
  bool set(Value gx, Value gy = Value()) {
    grads[0] = gx;
    if (grads.size() > 1)
      grads[1] = gy;
    return true;
  }
  Location loc;
  ScalarBuilder e;
  Value g, x, y, r;
  SmallVectorImpl<Value> &grads;
};

/// A rule: fills `grads` (one per operand) from the result gradient `g`;
/// false for an op it does not know.
using AdjointRule = bool (*)(Operation *op, OpBuilder &b, Value g,
                             SmallVectorImpl<Value> &grads);

/// AdjointOpInterface on an upstream op, through `Rule`.
template <typename OpTy, AdjointRule Rule>
struct UpstreamAdjointModel
    : public AdjointOpInterface::ExternalModel<UpstreamAdjointModel<OpTy, Rule>,
                                               OpTy> {
  LogicalResult buildAdjoint(Operation *op, OpBuilder &b,
                             ArrayRef<Value> resultGrads,
                             SmallVectorImpl<Value> &operandGrads) const {
    operandGrads.assign(op->getNumOperands(), Value());
    Value g = resultGrads.empty() ? Value() : resultGrads[0];
    if (!g)
      return success();
    if (!Rule(op, b, g, operandGrads))
      return op->emitOpError("has no adjoint rule");
    return success();
  }
};

template <AdjointRule Rule, typename... Ops>
void attachAdjointModels(MLIRContext *ctx) {
  (Ops::template attachInterface<UpstreamAdjointModel<Ops, Rule>>(*ctx), ...);
}

void registerArithAdjointModels(DialectRegistry &registry);
void registerMathAdjointModels(DialectRegistry &registry);

} // namespace detail
} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_LIB_DIALECT_FLEXSN_IR_ADJOINTRULES_H
