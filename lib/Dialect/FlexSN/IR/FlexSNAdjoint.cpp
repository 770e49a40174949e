//===- FlexSNAdjoint.cpp - Reverse-mode rules of scan-body ops -------------===//
//
// The AdjointOpInterface, its implementation on flexsn.spike (the surrogate
// derivative, built as arith/math ops) and flexsn.detach (no gradient). The
// external models for arith and math ops: ArithAdjointModels.cpp,
// MathAdjointModels.cpp.
//
// Conventions follow PyTorch's derivative formulas where a choice exists:
// max/min split the gradient evenly on ties, abs has gradient 0 at 0, pow
// gives no gradient to the base when the exponent is 0 nor to the exponent
// when the base is 0 and the exponent non-negative, floor/ceil/round/trunc
// have gradient 0.
//
//===----------------------------------------------------------------------===//

#include "AdjointRules.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/DialectRegistry.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::flexsn;
using namespace mlir::flexsn::detail;

#include "flexsn/Dialect/FlexSN/IR/FlexSNInterfaces.cpp.inc"


/// The derivative of `surrogate`'s smooth function at `x`, as IR. Mirrors
/// SurrogateAttr::derivative (the double-precision version).
static Value buildSurrogateDerivative(ScalarBuilder &e, SurrogateAttr surrogate,
                                      Value x) {
  using P = arith::CmpFPredicate;
  ArrayRef<double> p = surrogate.getParams().asArrayRef();
  const double pi = M_PI;
  switch (surrogate.getKind()) {
  case SurrogateKind::Sigmoid:
    return e.sigmoidGrad(p[0], x);
  case SurrogateKind::ATan: {
    Value ax = e.mul(e.c(pi / 2.0 * p[0]), x);
    return e.div(e.c(p[0] / 2.0), e.add(e.c(1.0), e.mul(ax, ax)));
  }
  case SurrogateKind::PiecewiseQuadratic: {
    Value ax = e.abs(x);
    Value inner = e.sub(e.c(p[0]), e.mul(e.c(p[0] * p[0]), ax));
    return e.select(e.cmp(P::OGT, ax, e.c(1.0 / p[0])), e.c(0.0), inner);
  }
  case SurrogateKind::PiecewiseExp:
    return e.mul(e.c(p[0] / 2.0), e.exp(e.mul(e.c(-p[0]), e.abs(x))));
  case SurrogateKind::SoftSign: {
    Value d = e.add(e.c(1.0), e.abs(e.mul(e.c(p[0]), x)));
    return e.div(e.c(p[0] / 2.0), e.mul(d, d));
  }
  case SurrogateKind::SuperSpike: {
    Value d = e.add(e.c(1.0), e.abs(x));
    return e.div(e.c(p[0]), e.mul(d, d));
  }
  case SurrogateKind::Erf:
    return e.mul(e.c(p[0] / std::sqrt(pi)),
                 e.exp(e.mul(e.c(-p[0] * p[0]), e.mul(x, x))));
  case SurrogateKind::NonzeroSignLogAbs:
    return e.div(e.c(1.0), e.add(e.c(1.0 / p[0]), e.abs(x)));
  case SurrogateKind::PiecewiseLeakyReLU:
    return e.select(e.cmp(P::OLT, e.abs(x), e.c(p[0])), e.c(1.0 / (2.0 * p[0])),
                    e.c(p[1]));
  case SurrogateKind::SquarewaveFourierSeries: {
    double w = 2.0 * pi / p[1];
    Value sum = e.c(0.0);
    for (int i = 1; i < static_cast<int>(p[0]); ++i)
      sum = e.add(sum, math::CosOp::create(
                           e.b, e.loc, e.mul(e.c((2.0 * i - 1.0) * w), x)));
    return e.mul(e.c(4.0 / p[1]), sum);
  }
  case SurrogateKind::S2NN:
    return e.select(e.cmp(P::OLT, x, e.c(0.0)), e.sigmoidGrad(p[0], x),
                    e.div(e.c(p[1]), e.add(x, e.c(1.0))));
  case SurrogateKind::QPseudoSpike: {
    Value base = e.add(e.c(1.0), e.mul(e.c(2.0 / (p[0] - 1.0)), e.abs(x)));
    return math::PowFOp::create(e.b, e.loc, base, e.c(-p[0]));
  }
  case SurrogateKind::LeakyKReLU:
    return e.select(e.cmp(P::OGE, x, e.c(0.0)), e.c(p[1]), e.c(p[0]));
  case SurrogateKind::FakeNumericalGradient: {
    Value sign = e.select(e.cmp(P::OGE, x, e.c(0.0)), e.c(1.0), e.c(-1.0));
    Value v = e.div(sign, x);
    // min(v, alpha) as std::min computes it: alpha < v ? alpha : v.
    return e.select(e.cmp(P::OLT, e.c(p[0]), v), e.c(p[0]), v);
  }
  case SurrogateKind::LogTailedReLU:
    return e.select(e.cmp(P::OLE, x, e.c(0.0)), e.c(p[0]),
                    e.select(e.cmp(P::OLE, x, e.c(1.0)), e.c(1.0),
                             e.div(e.c(1.0), x)));
  case SurrogateKind::Rect:
    return e.select(e.cmp(P::OLT, e.abs(x), e.c(0.5 / p[0])), e.c(p[0]),
                    e.c(0.0));
  }
  llvm_unreachable("unknown surrogate kind");
}

LogicalResult SpikeOp::buildAdjoint(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(1, Value());
  if (!resultGrads[0])
    return success();
  ScalarBuilder e{b, getLoc(), getType()};
  operandGrads[0] = e.mul(
      resultGrads[0], buildSurrogateDerivative(e, getSurrogate(), getInput()));
  return success();
}

LogicalResult DetachOp::buildAdjoint(OpBuilder &, ArrayRef<Value>,
                                     SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(1, Value());
  return success();
}

void mlir::flexsn::registerAdjointExternalModels(DialectRegistry &registry) {
  registerArithAdjointModels(registry);
  registerMathAdjointModels(registry);
}
