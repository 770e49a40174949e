//===- Adjoint.cpp - Reference BPTT of a scan, in double precision --------===//
//
// The oracle of the backward kernels. It does not use flexsn-differentiate
// or the AdjointOpInterface rules: each op's partial derivatives are coded
// again here, on doubles.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Interpreter/Interpreter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::flexsn;

/// Ops whose gradient is zero by definition.
static bool blocksGradient(Operation *op) {
  return isa<arith::ConstantOp, arith::CmpFOp, arith::CmpIOp, arith::AndIOp,
             arith::OrIOp, arith::XOrIOp, arith::AddIOp, arith::SubIOp,
             arith::MulIOp, arith::FPToSIOp, arith::FPToUIOp, arith::SIToFPOp,
             arith::UIToFPOp, math::FloorOp, math::CeilOp, math::RoundOp,
             math::RoundEvenOp, math::TruncOp, DetachOp>(op);
}

/// Partial derivatives of `op`'s result with respect to each operand, at the
/// values in `env`. Returns false for an op without a rule. Operands that
/// take no gradient get 0.
static bool partials(Operation *op, const llvm::DenseMap<Value, double> &env,
                     SmallVectorImpl<double> &d) {
  d.assign(op->getNumOperands(), 0.0);
  auto val = [&](Value v) { return env.lookup(v); };
  double a = op->getNumOperands() > 0 ? val(op->getOperand(0)) : 0.0;
  double b = op->getNumOperands() > 1 ? val(op->getOperand(1)) : 0.0;
  auto one = [&](double da) {
    d[0] = da;
    return true;
  };
  auto two = [&](double da, double db) {
    d[0] = da;
    d[1] = db;
    return true;
  };
  // max/min: the winner takes the gradient, a tie splits it.
  auto winner = [&](bool aWins, bool bWins) {
    if (a == b)
      return two(0.5, 0.5);
    return two(aWins ? 1.0 : 0.0, bWins ? 1.0 : 0.0);
  };
  if (blocksGradient(op))
    return true;
  return llvm::TypeSwitch<Operation *, bool>(op)
      .Case([&](arith::AddFOp) { return two(1.0, 1.0); })
      .Case([&](arith::SubFOp) { return two(1.0, -1.0); })
      .Case([&](arith::MulFOp) { return two(b, a); })
      .Case([&](arith::DivFOp) { return two(1.0 / b, -a / (b * b)); })
      .Case([&](arith::NegFOp) { return one(-1.0); })
      .Case([&](arith::RemFOp) { return two(1.0, -std::trunc(a / b)); })
      .Case<arith::MaximumFOp, arith::MaxNumFOp>(
          [&](Operation *) { return winner(a > b, b > a); })
      .Case<arith::MinimumFOp, arith::MinNumFOp>(
          [&](Operation *) { return winner(a < b, b < a); })
      .Case([&](arith::SelectOp s) {
        bool c = val(s.getCondition()) != 0.0;
        d[1] = c ? 1.0 : 0.0;
        d[2] = c ? 0.0 : 1.0;
        return true;
      })
      .Case<arith::ExtFOp, arith::TruncFOp>(
          [&](Operation *) { return one(1.0); })
      .Case([&](math::ExpOp) { return one(std::exp(a)); })
      .Case([&](math::Exp2Op) { return one(std::exp2(a) * std::log(2.0)); })
      .Case([&](math::ExpM1Op) { return one(std::exp(a)); })
      .Case([&](math::LogOp) { return one(1.0 / a); })
      .Case([&](math::Log2Op) { return one(1.0 / (a * std::log(2.0))); })
      .Case([&](math::Log10Op) { return one(1.0 / (a * std::log(10.0))); })
      .Case([&](math::Log1pOp) { return one(1.0 / (1.0 + a)); })
      .Case([&](math::SqrtOp) { return one(0.5 / std::sqrt(a)); })
      .Case([&](math::RsqrtOp) { return one(-0.5 * std::pow(a, -1.5)); })
      .Case([&](math::CbrtOp) {
        return one(1.0 / (3.0 * std::cbrt(a) * std::cbrt(a)));
      })
      .Case([&](math::TanhOp) {
        double t = std::tanh(a);
        return one(1.0 - t * t);
      })
      .Case([&](math::SinhOp) { return one(std::cosh(a)); })
      .Case([&](math::CoshOp) { return one(std::sinh(a)); })
      .Case([&](math::SinOp) { return one(std::cos(a)); })
      .Case([&](math::CosOp) { return one(-std::sin(a)); })
      .Case([&](math::TanOp) {
        double c = std::cos(a);
        return one(1.0 / (c * c));
      })
      .Case([&](math::AsinOp) { return one(1.0 / std::sqrt(1.0 - a * a)); })
      .Case([&](math::AcosOp) { return one(-1.0 / std::sqrt(1.0 - a * a)); })
      .Case([&](math::AtanOp) { return one(1.0 / (1.0 + a * a)); })
      .Case([&](math::AsinhOp) { return one(1.0 / std::sqrt(a * a + 1.0)); })
      .Case([&](math::AcoshOp) { return one(1.0 / std::sqrt(a * a - 1.0)); })
      .Case([&](math::AtanhOp) { return one(1.0 / (1.0 - a * a)); })
      .Case([&](math::ErfOp) {
        return one(2.0 / std::sqrt(M_PI) * std::exp(-a * a));
      })
      .Case([&](math::ErfcOp) {
        return one(-2.0 / std::sqrt(M_PI) * std::exp(-a * a));
      })
      .Case([&](math::AbsFOp) {
        return one(a > 0.0 ? 1.0 : (a < 0.0 ? -1.0 : 0.0));
      })
      .Case([&](math::Atan2Op) {
        // atan2(a, b) = angle of (b, a).
        double r2 = a * a + b * b;
        return two(b / r2, -a / r2);
      })
      .Case([&](math::PowFOp) {
        double da = b == 0.0 ? 0.0 : b * std::pow(a, b - 1.0);
        double db =
            (a == 0.0 && b >= 0.0) ? 0.0 : std::pow(a, b) * std::log(a);
        return two(da, db);
      })
      .Case([&](math::FPowIOp) {
        return one(b == 0.0 ? 0.0 : b * std::pow(a, b - 1.0));
      })
      .Case([&](math::CopySignOp) {
        return one(a == 0.0 ? 0.0 : std::copysign(a, b) / a);
      })
      .Case([&](math::FmaOp f) {
        d[0] = val(f.getB());
        d[1] = val(f.getA());
        d[2] = 1.0;
        return true;
      })
      .Case([&](SpikeOp s) { return one(s.getSurrogate().derivative(a)); })
      .Default([](Operation *) { return false; });
}

LogicalResult mlir::flexsn::interpretAdjoint(ScanOp primal, int64_t T,
                                             int64_t NCL,
                                             const AdjointCase &in,
                                             AdjointGrads &out) {
  if (failed(checkInterpretable(primal)))
    return failure();
  SmallVector<double> d;
  for (Operation &op : primal.getBodyBlock().without_terminator()) {
    llvm::DenseMap<Value, double> probe;
    if (!partials(&op, probe, d))
      return op.emitOpError("has no derivative in the reference adjoint");
  }
  unsigned numIn = primal.getNumInputs(), numSt = primal.getNumStates(),
           numPa = primal.getNumParams(), numOut = primal.getNumOutputs();
  bool finalOnly = primal.getFinalStates() || in.finalStates;
  Type computeType = primal.getComputeType();
  out.inputs.assign(numIn, std::vector<double>(T * NCL, 0.0));
  out.initStates.assign(numSt, std::vector<double>(NCL, 0.0));
  out.params.assign(numPa, {});
  for (unsigned k = 0; k < numPa; ++k)
    out.params[k].assign(primal.isPerNeuronParam(k) ? NCL : 1, 0.0);

  YieldOp yield = primal.getYield();
  Block &body = primal.getBodyBlock();
  llvm::DenseMap<Value, double> env, adj;
  std::vector<double> carry(numSt);
  for (int64_t n = 0; n < NCL; ++n) {
    for (unsigned s = 0; s < numSt; ++s)
      carry[s] = finalOnly && !in.gradStates[s].empty() ? in.gradStates[s][n]
                                                        : 0.0;
    std::vector<double> paramGrad(numPa, 0.0);
    for (int64_t t = T - 1; t >= 0; --t) {
      int64_t off = t * NCL + n;
      env.clear();
      for (unsigned k = 0; k < numIn; ++k)
        env[primal.getInputArgs()[k]] =
            roundToType(in.inputs[k][off], computeType);
      for (unsigned s = 0; s < numSt; ++s)
        env[primal.getStateArgs()[s]] = roundToType(
            t > 0 ? in.stateSeqs[s][off - NCL] : in.initStates[s][n],
            computeType);
      for (unsigned k = 0; k < numPa; ++k)
        env[primal.getParamArgs()[k]] = roundToType(
            primal.isPerNeuronParam(k) ? in.params[k][n] : in.params[k][0],
            computeType);
      evaluateBody(primal, env);

      adj.clear();
      for (unsigned o = 0; o < numOut; ++o)
        if (!in.gradOutputs[o].empty())
          adj[yield.getValues()[o]] += in.gradOutputs[o][off];
      for (unsigned s = 0; s < numSt; ++s) {
        double seed = carry[s];
        if (!finalOnly && !in.gradStates[s].empty())
          seed += in.gradStates[s][off];
        adj[yield.getValues()[numOut + s]] += seed;
      }
      for (Operation &op : llvm::reverse(body.without_terminator())) {
        double g = op.getNumResults() ? adj.lookup(op.getResult(0)) : 0.0;
        // Ops without a gradient pass none on, even a NaN one (PyTorch's
        // floor, comparisons and detach give zeros).
        if (blocksGradient(&op))
          continue;
        partials(&op, env, d);
        // IEEE arithmetic, as the kernels and PyTorch compute: a zero
        // gradient times an undefined partial (atan2 at the origin) is NaN.
        // Only exact zeros times finite partials are skipped.
        // Ops that route the gradient (select, max/min, copysign's sign)
        // give the other operand none at all, even from a NaN, as the
        // kernels' rules and PyTorch's `where` do.
        bool routes = isa<arith::SelectOp, arith::MaximumFOp,
                          arith::MinimumFOp, arith::MaxNumFOp,
                          arith::MinNumFOp, math::CopySignOp>(op);
        auto skip = [&](double da) {
          if (routes && da == 0.0)
            return true;
          return (g == 0.0 || da == 0.0) && std::isfinite(g) &&
                 std::isfinite(da);
        };
        // A gradient has its value's type: through an f16 round trip
        // (truncf/extf) it is rounded to f16, as PyTorch's casts do.
        for (auto [operand, da] : llvm::zip(op.getOperands(), d))
          if (!skip(da) && isa<FloatType>(operand.getType()))
            adj[operand] =
                roundToType(adj[operand] + g * da, operand.getType());
      }
      for (unsigned k = 0; k < numIn; ++k)
        out.inputs[k][off] = adj.lookup(primal.getInputArgs()[k]);
      for (unsigned s = 0; s < numSt; ++s)
        carry[s] = adj.lookup(primal.getStateArgs()[s]);
      for (unsigned k = 0; k < numPa; ++k)
        paramGrad[k] += adj.lookup(primal.getParamArgs()[k]);
    }
    for (unsigned s = 0; s < numSt; ++s)
      out.initStates[s][n] = carry[s];
    for (unsigned k = 0; k < numPa; ++k) {
      if (primal.isPerNeuronParam(k))
        out.params[k][n] = paramGrad[k];
      else
        out.params[k][0] += paramGrad[k];
    }
  }
  return success();
}
