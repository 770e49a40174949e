//===- MathAdjointModels.cpp - Reverse-mode rules of math ops -------------===//
//
// AdjointOpInterface external models for the math ops a scan body may
// contain. Conventions follow PyTorch's derivative formulas where a choice
// exists: abs has gradient 0 at 0, pow gives no gradient to the base when
// the exponent is 0 nor to the exponent when the base is 0 and the exponent
// non-negative, floor/ceil/round/trunc have gradient 0.
//
//===----------------------------------------------------------------------===//

#include "AdjointRules.h"

#include "mlir/IR/DialectRegistry.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::flexsn;
using namespace mlir::flexsn::detail;

static bool buildMathAdjoint(Operation *op, OpBuilder &b, Value g,
                             SmallVectorImpl<Value> &grads) {
  using P = arith::CmpFPredicate;
  RuleFrame f(op, b, g, grads);
  ScalarBuilder &e = f.e;
  Location loc = f.loc;
  Value x = f.x, y = f.y, r = f.r;
  Type t = e.t;
  return llvm::TypeSwitch<Operation *, bool>(op)
      // No gradient: rounding.
      .Case<math::FloorOp, math::CeilOp, math::RoundOp, math::RoundEvenOp,
            math::TruncOp>([](Operation *) { return true; })
      .Case([&](math::ExpOp) { return f.set(e.mul(g, r)); })
      .Case([&](math::Exp2Op) { return f.set(e.mul(g, e.mul(r, e.c(M_LN2)))); })
      .Case([&](math::ExpM1Op) { return f.set(e.mul(g, e.add(r, e.c(1.0)))); })
      .Case([&](math::LogOp) { return f.set(e.div(g, x)); })
      .Case([&](math::Log2Op) { return f.set(e.div(g, e.mul(x, e.c(M_LN2)))); })
      .Case([&](math::Log10Op) {
        return f.set(e.div(g, e.mul(x, e.c(M_LN10))));
      })
      .Case([&](math::Log1pOp) { return f.set(e.div(g, e.add(x, e.c(1.0)))); })
      .Case([&](math::SqrtOp) { return f.set(e.div(e.mul(g, e.c(0.5)), r)); })
      .Case([&](math::RsqrtOp) {
        return f.set(e.mul(e.mul(g, e.c(-0.5)), e.mul(r, e.mul(r, r))));
      })
      .Case([&](math::CbrtOp) {
        return f.set(e.div(g, e.mul(e.c(3.0), e.mul(r, r))));
      })
      .Case([&](math::TanhOp) {
        return f.set(e.mul(g, e.sub(e.c(1.0), e.mul(r, r))));
      })
      .Case([&](math::SinhOp) {
        return f.set(e.mul(g, math::CoshOp::create(b, loc, x)));
      })
      .Case([&](math::CoshOp) {
        return f.set(e.mul(g, math::SinhOp::create(b, loc, x)));
      })
      .Case([&](math::SinOp) {
        return f.set(e.mul(g, math::CosOp::create(b, loc, x)));
      })
      .Case([&](math::CosOp) {
        return f.set(e.neg(e.mul(g, math::SinOp::create(b, loc, x))));
      })
      .Case([&](math::TanOp) {
        return f.set(e.mul(g, e.add(e.c(1.0), e.mul(r, r))));
      })
      .Case([&](math::AsinOp) {
        return f.set(e.mul(g, math::RsqrtOp::create(
                                b, loc, e.sub(e.c(1.0), e.mul(x, x)))));
      })
      .Case([&](math::AcosOp) {
        return f.set(e.neg(e.mul(g, math::RsqrtOp::create(
                                      b, loc, e.sub(e.c(1.0), e.mul(x, x))))));
      })
      .Case([&](math::AtanOp) {
        return f.set(e.div(g, e.add(e.c(1.0), e.mul(x, x))));
      })
      .Case([&](math::AsinhOp) {
        return f.set(e.mul(g, math::RsqrtOp::create(
                                b, loc, e.add(e.mul(x, x), e.c(1.0)))));
      })
      .Case([&](math::AcoshOp) {
        return f.set(e.mul(g, math::RsqrtOp::create(
                                b, loc, e.sub(e.mul(x, x), e.c(1.0)))));
      })
      .Case([&](math::AtanhOp) {
        return f.set(e.div(g, e.sub(e.c(1.0), e.mul(x, x))));
      })
      .Case([&](math::ErfOp) {
        Value d = e.mul(e.c(2.0 / std::sqrt(M_PI)), e.exp(e.neg(e.mul(x, x))));
        return f.set(e.mul(g, d));
      })
      .Case([&](math::ErfcOp) {
        Value d = e.mul(e.c(-2.0 / std::sqrt(M_PI)), e.exp(e.neg(e.mul(x, x))));
        return f.set(e.mul(g, d));
      })
      .Case([&](math::AbsFOp) {
        Value zero = e.c(0.0);
        return f.set(e.select(e.cmp(P::OGT, x, zero), g,
                            e.where(e.cmp(P::OLT, x, zero), e.neg(g))));
      })
      .Case([&](math::Atan2Op) {
        // atan2(y = operand 0, x = operand 1).
        Value d = e.add(e.mul(x, x), e.mul(y, y));
        return f.set(e.div(e.mul(g, y), d), e.neg(e.div(e.mul(g, x), d)));
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
        return f.set(gx, gy);
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
        return f.set(e.mul(g, y), e.mul(g, x));
      })
      .Default([](Operation *) { return false; });
}

void mlir::flexsn::detail::registerMathAdjointModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, math::MathDialect *) {
    attachAdjointModels<
        buildMathAdjoint, math::FloorOp, math::CeilOp, math::RoundOp,
        math::RoundEvenOp, math::TruncOp, math::ExpOp, math::Exp2Op,
        math::ExpM1Op, math::LogOp, math::Log2Op, math::Log10Op,
        math::Log1pOp, math::SqrtOp, math::RsqrtOp, math::CbrtOp,
        math::TanhOp, math::SinhOp, math::CoshOp, math::SinOp, math::CosOp,
        math::TanOp, math::AsinOp, math::AcosOp, math::AtanOp,
        math::AsinhOp, math::AcoshOp, math::AtanhOp, math::ErfOp,
        math::ErfcOp, math::AbsFOp, math::Atan2Op, math::PowFOp,
        math::FPowIOp, math::CopySignOp, math::FmaOp>(ctx);
  });
}
