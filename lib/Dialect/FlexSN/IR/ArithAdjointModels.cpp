//===- ArithAdjointModels.cpp - Reverse-mode rules of arith ops -----------===//
//
// AdjointOpInterface external models for the arith ops a scan body may
// contain. Conventions follow PyTorch's derivative formulas where a choice
// exists: max/min split the gradient evenly on ties; comparisons, integer
// ops and casts to integers have no gradient.
//
//===----------------------------------------------------------------------===//

#include "AdjointRules.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::flexsn;
using namespace mlir::flexsn::detail;

static bool buildArithAdjoint(Operation *op, OpBuilder &b, Value g,
                              SmallVectorImpl<Value> &grads) {
  using P = arith::CmpFPredicate;
  RuleFrame f(op, b, g, grads);
  ScalarBuilder &e = f.e;
  Location loc = f.loc;
  Value x = f.x, y = f.y, r = f.r;
  // max/min: the gradient goes to the winner, half to each on a tie.
  auto extremum = [&](P wins) {
    Value half = e.mul(g, e.c(0.5));
    Value tie = e.cmp(P::OEQ, x, y);
    Value gx = e.select(e.cmp(wins, x, y), g, e.where(tie, half));
    Value gy = e.select(e.cmp(wins, y, x), g, e.where(tie, half));
    return f.set(gx, gy);
  };
  return llvm::TypeSwitch<Operation *, bool>(op)
      // No gradient: constants, comparisons, logic, integer ops.
      .Case<arith::ConstantOp, arith::CmpFOp, arith::CmpIOp, arith::AndIOp,
            arith::OrIOp, arith::XOrIOp, arith::AddIOp, arith::SubIOp,
            arith::MulIOp, arith::FPToSIOp, arith::FPToUIOp, arith::SIToFPOp,
            arith::UIToFPOp>([](Operation *) { return true; })
      .Case([&](arith::AddFOp) { return f.set(g, g); })
      .Case([&](arith::SubFOp) { return f.set(g, e.neg(g)); })
      .Case([&](arith::MulFOp) { return f.set(e.mul(g, y), e.mul(g, x)); })
      .Case([&](arith::DivFOp) {
        // d(x/y)/dy = -r/y. For a reciprocal (x = 1) r/y is r*r: a product
        // instead of a second division (sigmoid's adjoint adds none).
        Value gr = e.mul(g, r);
        Value gy = matchPattern(x, m_OneFloat()) ? e.mul(gr, r) : e.div(gr, y);
        return f.set(e.div(g, y), e.neg(gy));
      })
      .Case([&](arith::NegFOp) { return f.set(e.neg(g)); })
      .Case([&](arith::RemFOp) {
        Value q = math::TruncOp::create(b, loc, e.div(x, y));
        return f.set(g, e.neg(e.mul(g, q)));
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
        return f.set(arith::TruncFOp::create(b, loc, x.getType(), g));
      })
      .Case([&](arith::TruncFOp) {
        return f.set(arith::ExtFOp::create(b, loc, x.getType(), g));
      })
      .Default([](Operation *) { return false; });
}

void mlir::flexsn::detail::registerArithAdjointModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, arith::ArithDialect *) {
    attachAdjointModels<
        buildArithAdjoint, arith::ConstantOp, arith::CmpFOp, arith::CmpIOp,
        arith::AndIOp, arith::OrIOp, arith::XOrIOp, arith::AddIOp,
        arith::SubIOp, arith::MulIOp, arith::FPToSIOp, arith::FPToUIOp,
        arith::SIToFPOp, arith::UIToFPOp, arith::AddFOp, arith::SubFOp,
        arith::MulFOp, arith::DivFOp, arith::NegFOp, arith::RemFOp,
        arith::MaximumFOp, arith::MaxNumFOp, arith::MinimumFOp,
        arith::MinNumFOp, arith::SelectOp, arith::ExtFOp, arith::TruncFOp>(
        ctx);
  });
}
