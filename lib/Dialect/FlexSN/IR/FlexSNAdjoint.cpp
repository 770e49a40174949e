//===- FlexSNAdjoint.cpp - Reverse-mode rules of scan-body ops -------------===//
//
// The AdjointOpInterface, its implementation on flexsn.spike (the surrogate
// derivative, built as arith/math ops) and flexsn.detach (no gradient), and
// external models for the arith and math ops a scan body may contain.
//
// Conventions follow PyTorch's derivative formulas where a choice exists:
// max/min split the gradient evenly on ties, abs has gradient 0 at 0, pow
// gives no gradient to the base when the exponent is 0 nor to the exponent
// when the base is 0 and the exponent non-negative, floor/ceil/round/trunc
// have gradient 0.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNInterfaces.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/DialectRegistry.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::flexsn;

#include "flexsn/Dialect/FlexSN/IR/FlexSNInterfaces.cpp.inc"

namespace {
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
  Value sigmoidGrad(double alpha, Value x) {
    Value s = div(c(1.0), add(c(1.0), exp(mul(c(-alpha), x))));
    return mul(c(alpha), mul(s, sub(c(1.0), s)));
  }
};
} // namespace

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

//===----------------------------------------------------------------------===//
// Upstream ops
//===----------------------------------------------------------------------===//

/// The rule of one upstream op: fills `grads` (one per operand, null for
/// none) from the result gradient `g`. Returns false for an op without a
/// rule here.
static bool buildUpstreamAdjoint(Operation *op, OpBuilder &b, Value g,
                                 SmallVectorImpl<Value> &grads) {
  using P = arith::CmpFPredicate;
  Location loc = op->getLoc();
  Type t = op->getNumResults() ? op->getResult(0).getType() : Type();
  ScalarBuilder e{b, loc, t};
  Value x = op->getNumOperands() > 0 ? op->getOperand(0) : Value();
  Value y = op->getNumOperands() > 1 ? op->getOperand(1) : Value();
  Value r = op->getNumResults() ? op->getResult(0) : Value();
  auto set = [&](Value gx, Value gy = Value()) {
    grads[0] = gx;
    if (grads.size() > 1)
      grads[1] = gy;
    return true;
  };
  // max/min: the gradient goes to the winner, half to each on a tie.
  auto extremum = [&](P wins) {
    Value half = e.mul(g, e.c(0.5));
    Value tie = e.cmp(P::OEQ, x, y);
    Value gx = e.select(e.cmp(wins, x, y), g, e.where(tie, half));
    Value gy = e.select(e.cmp(wins, y, x), g, e.where(tie, half));
    return set(gx, gy);
  };
  return llvm::TypeSwitch<Operation *, bool>(op)
      // No gradient: constants, comparisons, logic, integer ops, rounding.
      .Case<arith::ConstantOp, arith::CmpFOp, arith::CmpIOp, arith::AndIOp,
            arith::OrIOp, arith::XOrIOp, arith::AddIOp, arith::SubIOp,
            arith::MulIOp, arith::FPToSIOp, arith::FPToUIOp, arith::SIToFPOp,
            arith::UIToFPOp, math::FloorOp, math::CeilOp, math::RoundOp,
            math::RoundEvenOp, math::TruncOp>([](Operation *) { return true; })
      .Case([&](arith::AddFOp) { return set(g, g); })
      .Case([&](arith::SubFOp) { return set(g, e.neg(g)); })
      .Case([&](arith::MulFOp) { return set(e.mul(g, y), e.mul(g, x)); })
      .Case([&](arith::DivFOp) {
        return set(e.div(g, y), e.neg(e.div(e.mul(g, r), y)));
      })
      .Case([&](arith::NegFOp) { return set(e.neg(g)); })
      .Case([&](arith::RemFOp) {
        Value q = math::TruncOp::create(b, loc, e.div(x, y));
        return set(g, e.neg(e.mul(g, q)));
      })
      .Case<arith::MaximumFOp, arith::MaxNumFOp>(
          [&](Operation *) { return extremum(P::OGT); })
      .Case<arith::MinimumFOp, arith::MinNumFOp>(
          [&](Operation *) { return extremum(P::OLT); })
      .Case([&](arith::SelectOp s) {
        grads[1] = e.where(s.getCondition(), g);
        grads[2] = e.select(s.getCondition(), e.c(0.0), g);
        return true;
      })
      .Case([&](arith::ExtFOp) {
        return set(arith::TruncFOp::create(b, loc, x.getType(), g));
      })
      .Case([&](arith::TruncFOp) {
        return set(arith::ExtFOp::create(b, loc, x.getType(), g));
      })
      .Case([&](math::ExpOp) { return set(e.mul(g, r)); })
      .Case([&](math::Exp2Op) { return set(e.mul(g, e.mul(r, e.c(M_LN2)))); })
      .Case([&](math::ExpM1Op) { return set(e.mul(g, e.add(r, e.c(1.0)))); })
      .Case([&](math::LogOp) { return set(e.div(g, x)); })
      .Case([&](math::Log2Op) { return set(e.div(g, e.mul(x, e.c(M_LN2)))); })
      .Case([&](math::Log10Op) {
        return set(e.div(g, e.mul(x, e.c(M_LN10))));
      })
      .Case([&](math::Log1pOp) { return set(e.div(g, e.add(x, e.c(1.0)))); })
      .Case([&](math::SqrtOp) { return set(e.div(e.mul(g, e.c(0.5)), r)); })
      .Case([&](math::RsqrtOp) {
        return set(e.mul(e.mul(g, e.c(-0.5)), e.mul(r, e.mul(r, r))));
      })
      .Case([&](math::CbrtOp) {
        return set(e.div(g, e.mul(e.c(3.0), e.mul(r, r))));
      })
      .Case([&](math::TanhOp) {
        return set(e.mul(g, e.sub(e.c(1.0), e.mul(r, r))));
      })
      .Case([&](math::SinhOp) {
        return set(e.mul(g, math::CoshOp::create(b, loc, x)));
      })
      .Case([&](math::CoshOp) {
        return set(e.mul(g, math::SinhOp::create(b, loc, x)));
      })
      .Case([&](math::SinOp) {
        return set(e.mul(g, math::CosOp::create(b, loc, x)));
      })
      .Case([&](math::CosOp) {
        return set(e.neg(e.mul(g, math::SinOp::create(b, loc, x))));
      })
      .Case([&](math::TanOp) {
        return set(e.mul(g, e.add(e.c(1.0), e.mul(r, r))));
      })
      .Case([&](math::AsinOp) {
        return set(e.mul(g, math::RsqrtOp::create(
                                b, loc, e.sub(e.c(1.0), e.mul(x, x)))));
      })
      .Case([&](math::AcosOp) {
        return set(e.neg(e.mul(g, math::RsqrtOp::create(
                                      b, loc, e.sub(e.c(1.0), e.mul(x, x))))));
      })
      .Case([&](math::AtanOp) {
        return set(e.div(g, e.add(e.c(1.0), e.mul(x, x))));
      })
      .Case([&](math::AsinhOp) {
        return set(e.mul(g, math::RsqrtOp::create(
                                b, loc, e.add(e.mul(x, x), e.c(1.0)))));
      })
      .Case([&](math::AcoshOp) {
        return set(e.mul(g, math::RsqrtOp::create(
                                b, loc, e.sub(e.mul(x, x), e.c(1.0)))));
      })
      .Case([&](math::AtanhOp) {
        return set(e.div(g, e.sub(e.c(1.0), e.mul(x, x))));
      })
      .Case([&](math::ErfOp) {
        Value d = e.mul(e.c(2.0 / std::sqrt(M_PI)), e.exp(e.neg(e.mul(x, x))));
        return set(e.mul(g, d));
      })
      .Case([&](math::ErfcOp) {
        Value d = e.mul(e.c(-2.0 / std::sqrt(M_PI)), e.exp(e.neg(e.mul(x, x))));
        return set(e.mul(g, d));
      })
      .Case([&](math::AbsFOp) {
        Value zero = e.c(0.0);
        return set(e.select(e.cmp(P::OGT, x, zero), g,
                            e.where(e.cmp(P::OLT, x, zero), e.neg(g))));
      })
      .Case([&](math::Atan2Op) {
        // atan2(y = operand 0, x = operand 1).
        Value d = e.add(e.mul(x, x), e.mul(y, y));
        return set(e.div(e.mul(g, y), d), e.neg(e.div(e.mul(g, x), d)));
      })
      .Case([&](math::PowFOp) {
        Value zero = e.c(0.0);
        Value base = e.mul(e.mul(g, y), math::PowFOp::create(
                                            b, loc, x, e.sub(y, e.c(1.0))));
        Value gx = e.select(e.cmp(P::OEQ, y, zero), zero, base);
        Value skip = arith::AndIOp::create(b, loc, e.cmp(P::OEQ, x, zero),
                                           e.cmp(P::OGE, y, zero));
        Value gy = e.select(skip, zero,
                            e.mul(e.mul(g, r), math::LogOp::create(b, loc, x)));
        return set(gx, gy);
      })
      .Case([&](math::FPowIOp p) {
        Value n = p.getRhs();
        Value one = arith::ConstantOp::create(
            b, loc, b.getIntegerAttr(n.getType(), 1));
        Value nm1 = arith::SubIOp::create(b, loc, n, one);
        Value nf = arith::SIToFPOp::create(b, loc, t, n);
        Value d = e.mul(nf, math::FPowIOp::create(b, loc, x, nm1));
        grads[0] = e.select(e.cmp(P::OEQ, nf, e.c(0.0)), e.c(0.0), e.mul(g, d));
        return true;
      })
      .Case([&](math::CopySignOp) {
        Value zero = e.c(0.0);
        grads[0] = e.select(e.cmp(P::OEQ, x, zero), zero,
                            e.mul(g, e.div(r, x)));
        return true;
      })
      .Case([&](math::FmaOp) {
        grads[2] = g;
        return set(e.mul(g, y), e.mul(g, x));
      })
      .Default([](Operation *) { return false; });
}

namespace {
template <typename OpTy>
struct UpstreamAdjointModel
    : public AdjointOpInterface::ExternalModel<UpstreamAdjointModel<OpTy>,
                                               OpTy> {
  LogicalResult buildAdjoint(Operation *op, OpBuilder &b,
                             ArrayRef<Value> resultGrads,
                             SmallVectorImpl<Value> &operandGrads) const {
    operandGrads.assign(op->getNumOperands(), Value());
    Value g = resultGrads.empty() ? Value() : resultGrads[0];
    if (!g)
      return success();
    if (!buildUpstreamAdjoint(op, b, g, operandGrads))
      return op->emitOpError("has no adjoint rule");
    return success();
  }
};

template <typename... Ops>
void attachModels(MLIRContext *ctx) {
  (Ops::template attachInterface<UpstreamAdjointModel<Ops>>(*ctx), ...);
}
} // namespace

void mlir::flexsn::registerAdjointExternalModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, arith::ArithDialect *) {
    attachModels<arith::ConstantOp, arith::CmpFOp, arith::CmpIOp,
                 arith::AndIOp, arith::OrIOp, arith::XOrIOp, arith::AddIOp,
                 arith::SubIOp, arith::MulIOp, arith::FPToSIOp,
                 arith::FPToUIOp, arith::SIToFPOp, arith::UIToFPOp,
                 arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::DivFOp,
                 arith::NegFOp, arith::RemFOp, arith::MaximumFOp,
                 arith::MaxNumFOp, arith::MinimumFOp, arith::MinNumFOp,
                 arith::SelectOp, arith::ExtFOp, arith::TruncFOp>(ctx);
  });
  registry.addExtension(+[](MLIRContext *ctx, math::MathDialect *) {
    attachModels<math::FloorOp, math::CeilOp, math::RoundOp,
                 math::RoundEvenOp, math::TruncOp, math::ExpOp, math::Exp2Op,
                 math::ExpM1Op, math::LogOp, math::Log2Op, math::Log10Op,
                 math::Log1pOp, math::SqrtOp, math::RsqrtOp, math::CbrtOp,
                 math::TanhOp, math::SinhOp, math::CoshOp, math::SinOp,
                 math::CosOp, math::TanOp, math::AsinOp, math::AcosOp,
                 math::AtanOp, math::AsinhOp, math::AcoshOp, math::AtanhOp,
                 math::ErfOp, math::ErfcOp, math::AbsFOp, math::Atan2Op,
                 math::PowFOp, math::FPowIOp, math::CopySignOp,
                 math::FmaOp>(ctx);
  });
}
