//===- Interpreter.cpp - Reference interpreter of flexsn.scan -------------===//

#include "flexsn/Interpreter/Interpreter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::flexsn;

static bool compareF(arith::CmpFPredicate p, double a, double b) {
  bool unordered = std::isnan(a) || std::isnan(b);
  using P = arith::CmpFPredicate;
  switch (p) {
  case P::AlwaysFalse:
    return false;
  case P::AlwaysTrue:
    return true;
  case P::OEQ:
    return !unordered && a == b;
  case P::OGT:
    return !unordered && a > b;
  case P::OGE:
    return !unordered && a >= b;
  case P::OLT:
    return !unordered && a < b;
  case P::OLE:
    return !unordered && a <= b;
  case P::ONE:
    return !unordered && a != b;
  case P::ORD:
    return !unordered;
  case P::UEQ:
    return unordered || a == b;
  case P::UGT:
    return unordered || a > b;
  case P::UGE:
    return unordered || a >= b;
  case P::ULT:
    return unordered || a < b;
  case P::ULE:
    return unordered || a <= b;
  case P::UNE:
    return unordered || a != b;
  case P::UNO:
    return unordered;
  }
  return false;
}

static bool compareI(arith::CmpIPredicate p, double a, double b) {
  using P = arith::CmpIPredicate;
  switch (p) {
  case P::eq:
    return a == b;
  case P::ne:
    return a != b;
  case P::slt:
  case P::ult:
    return a < b;
  case P::sle:
  case P::ule:
    return a <= b;
  case P::sgt:
  case P::ugt:
    return a > b;
  case P::sge:
  case P::uge:
    return a >= b;
  }
  return false;
}

namespace {
/// Evaluates one body op; returns false when the op is not supported.
struct Evaluator {
  llvm::DenseMap<Value, double> &env;
  TieWatch *ties = nullptr;
  double get(Value v) { return env.lookup(v); }

  /// Flags a switch point (a - b changes sign) passed within the margin.
  void near(double a, double b) {
    if (ties && std::fabs(a - b) <=
                    ties->margin * std::max({1.0, std::fabs(a), std::fabs(b)}))
      ties->hit = true;
  }
  /// Flags `a` within the margin of an integer (or, for round, of a half).
  void nearInteger(double a, double offset = 0.0) {
    if (ties && std::isfinite(a)) {
      double shifted = a + offset;
      near(shifted, std::nearbyint(shifted));
    }
  }
  void watch(Operation *op) {
    if (!ties)
      return;
    auto operand = [&](unsigned i) { return get(op->getOperand(i)); };
    llvm::TypeSwitch<Operation *>(op)
        .Case<arith::CmpFOp, arith::MaximumFOp, arith::MinimumFOp,
              arith::MaxNumFOp, arith::MinNumFOp>(
            [&](Operation *) { near(operand(0), operand(1)); })
        .Case([&](SpikeOp spike) {
          double x = operand(0);
          near(x, 0.0);
          // A piecewise surrogate's derivative jumps at its breakpoints.
          double h = ties->margin * std::max(1.0, std::fabs(x));
          double lo = spike.getSurrogate().derivative(x - h),
                 hi = spike.getSurrogate().derivative(x + h);
          if (std::fabs(hi - lo) > 0.25 * std::max(std::fabs(hi), std::fabs(lo)) &&
              std::fabs(hi - lo) > 1e-12)
            ties->hit = true;
        })
        .Case([&](math::AbsFOp) { near(operand(0), 0.0); })
        .Case([&](math::Atan2Op) {
          // The branch cut: y crosses 0 with x < 0.
          if (operand(1) < 0)
            near(operand(0), 0.0);
        })
        .Case([&](math::CopySignOp) { near(operand(1), 0.0); })
        .Case<math::FloorOp, math::CeilOp, math::TruncOp, arith::FPToSIOp,
              arith::FPToUIOp>([&](Operation *) { nearInteger(operand(0)); })
        .Case<math::RoundOp, math::RoundEvenOp>(
            [&](Operation *) { nearInteger(operand(0), 0.5); })
        .Case([&](arith::RemFOp) {
          if (operand(1) != 0.0)
            nearInteger(operand(0) / operand(1));
        });
  }

  /// Sets `op`'s value from its operands; false for an op the
  /// interpreter does not know.
  bool eval(Operation *op) {
    watch(op);
    if (isa<math::MathDialect>(op->getDialect()))
      return evalMath(op);
    return evalArithOrFlexSN(op);
  }

  bool unary(Operation *op, double (*f)(double)) {
    env[op->getResult(0)] = f(get(op->getOperand(0)));
    return true;
  }
  template <typename F> bool binary(Operation *op, F f) {
    env[op->getResult(0)] = f(get(op->getOperand(0)), get(op->getOperand(1)));
    return true;
  }

  bool evalArithOrFlexSN(Operation *op) {
    auto unary = [&](double (*f)(double)) { return this->unary(op, f); };
    auto binary = [&](auto f) { return this->binary(op, f); };
    return llvm::TypeSwitch<Operation *, bool>(op)
        .Case([&](arith::ConstantOp c) {
          if (auto f = dyn_cast<FloatAttr>(c.getValue()))
            env[c] = f.getValueAsDouble();
          else if (auto i = dyn_cast<IntegerAttr>(c.getValue()))
            env[c] = i.getType().isInteger(1)
                         ? (i.getValue().getBoolValue() ? 1.0 : 0.0)
                         : static_cast<double>(i.getValue().getSExtValue());
          else
            return false;
          return true;
        })
        .Case([&](arith::AddFOp) { return binary(std::plus<double>()); })
        .Case([&](arith::SubFOp) { return binary(std::minus<double>()); })
        .Case([&](arith::MulFOp) { return binary(std::multiplies<double>()); })
        .Case([&](arith::DivFOp) { return binary(std::divides<double>()); })
        .Case([&](arith::RemFOp) {
          return binary([](double a, double b) { return std::fmod(a, b); });
        })
        .Case([&](arith::NegFOp) {
          return unary([](double a) { return -a; });
        })
        .Case([&](arith::MaximumFOp) {
          return binary([](double a, double b) {
            return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
          });
        })
        .Case([&](arith::MinimumFOp) {
          return binary([](double a, double b) {
            return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
          });
        })
        .Case([&](arith::MaxNumFOp) {
          return binary([](double a, double b) { return std::fmax(a, b); });
        })
        .Case([&](arith::MinNumFOp) {
          return binary([](double a, double b) { return std::fmin(a, b); });
        })
        .Case([&](arith::CmpFOp c) {
          env[c] = compareF(c.getPredicate(), get(c.getLhs()), get(c.getRhs()))
                       ? 1.0
                       : 0.0;
          return true;
        })
        .Case([&](arith::CmpIOp c) {
          env[c] = compareI(c.getPredicate(), get(c.getLhs()), get(c.getRhs()))
                       ? 1.0
                       : 0.0;
          return true;
        })
        .Case([&](arith::SelectOp s) {
          env[s] = get(s.getCondition()) != 0.0 ? get(s.getTrueValue())
                                                : get(s.getFalseValue());
          return true;
        })
        .Case<arith::ExtFOp, arith::TruncFOp, arith::UIToFPOp,
              arith::SIToFPOp>([&](Operation *) {
          env[op->getResult(0)] = get(op->getOperand(0));
          return true;
        })
        .Case<arith::FPToSIOp, arith::FPToUIOp>([&](Operation *) {
          // An integer has no negative zero: fptosi(-0.5) is 0.
          return unary([](double a) { return std::trunc(a) + 0.0; });
        })
        .Case([&](arith::AndIOp) {
          return binary([](double a, double b) {
            return static_cast<double>(static_cast<int64_t>(a) &
                                       static_cast<int64_t>(b));
          });
        })
        .Case([&](arith::OrIOp) {
          return binary([](double a, double b) {
            return static_cast<double>(static_cast<int64_t>(a) |
                                       static_cast<int64_t>(b));
          });
        })
        .Case([&](arith::XOrIOp) {
          return binary([](double a, double b) {
            return static_cast<double>(static_cast<int64_t>(a) ^
                                       static_cast<int64_t>(b));
          });
        })
        .Case([&](arith::AddIOp) { return binary(std::plus<double>()); })
        .Case([&](arith::SubIOp) { return binary(std::minus<double>()); })
        .Case([&](arith::MulIOp) { return binary(std::multiplies<double>()); })
        .Case([&](SpikeOp s) {
          env[s] = get(s.getInput()) >= 0.0 ? 1.0 : 0.0;
          return true;
        })
        .Case([&](DetachOp d) {
          env[d] = get(d.getInput());
          return true;
        })
        .Default([](Operation *) { return false; });
  }

  bool evalMath(Operation *op) {
    auto unary = [&](double (*f)(double)) { return this->unary(op, f); };
    auto binary = [&](auto f) { return this->binary(op, f); };
    return llvm::TypeSwitch<Operation *, bool>(op)
        .Case([&](math::ExpOp) { return unary(std::exp); })
        .Case([&](math::Exp2Op) { return unary(std::exp2); })
        .Case([&](math::ExpM1Op) { return unary(std::expm1); })
        .Case([&](math::LogOp) { return unary(std::log); })
        .Case([&](math::Log2Op) { return unary(std::log2); })
        .Case([&](math::Log10Op) { return unary(std::log10); })
        .Case([&](math::Log1pOp) { return unary(std::log1p); })
        .Case([&](math::SqrtOp) { return unary(std::sqrt); })
        .Case([&](math::RsqrtOp) {
          return unary([](double a) { return 1.0 / std::sqrt(a); });
        })
        .Case([&](math::CbrtOp) { return unary(std::cbrt); })
        .Case([&](math::TanhOp) { return unary(std::tanh); })
        .Case([&](math::SinhOp) { return unary(std::sinh); })
        .Case([&](math::CoshOp) { return unary(std::cosh); })
        .Case([&](math::SinOp) { return unary(std::sin); })
        .Case([&](math::CosOp) { return unary(std::cos); })
        .Case([&](math::TanOp) { return unary(std::tan); })
        .Case([&](math::AsinOp) { return unary(std::asin); })
        .Case([&](math::AcosOp) { return unary(std::acos); })
        .Case([&](math::AtanOp) { return unary(std::atan); })
        .Case([&](math::AsinhOp) { return unary(std::asinh); })
        .Case([&](math::AcoshOp) { return unary(std::acosh); })
        .Case([&](math::AtanhOp) { return unary(std::atanh); })
        .Case([&](math::ErfOp) { return unary(std::erf); })
        .Case([&](math::ErfcOp) { return unary(std::erfc); })
        .Case([&](math::AbsFOp) { return unary(std::fabs); })
        .Case([&](math::FloorOp) { return unary(std::floor); })
        .Case([&](math::CeilOp) { return unary(std::ceil); })
        .Case([&](math::RoundOp) { return unary(std::round); })
        .Case([&](math::RoundEvenOp) { return unary(std::nearbyint); })
        .Case([&](math::TruncOp) { return unary(std::trunc); })
        .Case([&](math::Atan2Op) {
          return binary([](double a, double b) { return std::atan2(a, b); });
        })
        .Case([&](math::PowFOp) {
          return binary([](double a, double b) { return std::pow(a, b); });
        })
        .Case([&](math::FPowIOp) {
          return binary([](double a, double b) { return std::pow(a, b); });
        })
        .Case([&](math::CopySignOp) {
          return binary([](double a, double b) { return std::copysign(a, b); });
        })
        .Case([&](math::FmaOp f) {
          env[f] = std::fma(get(f.getA()), get(f.getB()), get(f.getC()));
          return true;
        })
        .Default([](Operation *) { return false; });
  }
};
} // namespace

LogicalResult mlir::flexsn::checkInterpretable(ScanOp scan) {
  for (Operation &op : scan.getBodyBlock().without_terminator()) {
    llvm::DenseMap<Value, double> probe;
    for (Value v : op.getOperands())
      probe[v] = 0.0;
    Evaluator e{probe};
    if (!e.eval(&op))
      return op.emitOpError("is not supported by the reference interpreter");
  }
  return success();
}

void mlir::flexsn::evaluateBody(ScanOp scan,
                                llvm::DenseMap<Value, double> &env,
                                TieWatch *ties) {
  Evaluator e{env, ties};
  for (Operation &op : scan.getBodyBlock().without_terminator()) {
    e.eval(&op);
    for (Value r : op.getResults())
      env[r] = roundToType(env[r], r.getType());
  }
}

LogicalResult
mlir::flexsn::interpretScan(ScanOp scan, KernelVariant variant, int64_t T,
                            int64_t NCL,
                            const std::vector<std::vector<double>> &operands,
                            std::vector<std::vector<double>> &results,
                            std::vector<uint8_t> *nearTies, double margin) {
  if (failed(checkInterpretable(scan)))
    return failure();
  Type computeType = scan.getComputeType();
  unsigned numIn = scan.getNumInputs(), numLa = scan.getNumLagged(),
           numSt = scan.getNumStates(), numPa = scan.getNumParams(),
           numOut = scan.getNumOutputs();
  unsigned firstState = numIn + 2 * numLa, firstParam = firstState + numSt;
  bool finalOnly = variant == KernelVariant::FinalState;
  results.assign(numOut + numSt, {});
  for (unsigned k = 0; k < numOut; ++k)
    results[k].assign(T * NCL, 0.0);
  for (unsigned k = 0; k < numSt; ++k)
    results[numOut + k].assign(
        !finalOnly ? T * NCL : (scan.isSumState(k) ? 1 : NCL), 0.0);
  auto stateElt = [&](unsigned k) {
    return getElementTypeOrSelf(scan.getStateResults()[k].getType());
  };

  YieldOp yield = scan.getYield();
  llvm::DenseMap<Value, double> env;
  std::vector<double> state(numSt);
  if (nearTies)
    nearTies->assign(NCL, 0);
  TieWatch watch{margin};
  for (int64_t n = 0; n < NCL; ++n) {
    watch.hit = false;
    for (unsigned k = 0; k < numSt; ++k)
      state[k] = roundToType(operands[firstState + k][n], computeType);
    for (unsigned k = 0; k < numPa; ++k) {
      const std::vector<double> &p = operands[firstParam + k];
      env[scan.getParamArgs()[k]] =
          roundToType(scan.isPerNeuronParam(k) ? p[n] : p[0], computeType);
    }
    for (int64_t i = 0; i < T; ++i) {
      int64_t t = scan.getReverse() ? T - 1 - i : i;
      int64_t off = t * NCL + n;
      for (unsigned k = 0; k < numIn; ++k)
        env[scan.getInputArgs()[k]] =
            roundToType(operands[k][off], computeType);
      for (unsigned k = 0; k < numLa; ++k)
        env[scan.getLaggedArgs()[k]] = roundToType(
            t > 0 ? operands[numIn + k][off - NCL] : operands[numIn + numLa + k][n],
            computeType);
      for (unsigned k = 0; k < numSt; ++k)
        env[scan.getStateArgs()[k]] = state[k];
      evaluateBody(scan, env, nearTies ? &watch : nullptr);
      for (unsigned k = 0; k < numOut; ++k)
        results[k][off] = roundToType(
            env.lookup(yield.getValues()[k]),
            getElementTypeOrSelf(scan.getOutputResults()[k]));
      for (unsigned k = 0; k < numSt; ++k) {
        state[k] = env.lookup(yield.getValues()[numOut + k]);
        if (!finalOnly)
          results[numOut + k][off] = roundToType(state[k], stateElt(k));
      }
    }
    if (nearTies)
      (*nearTies)[n] = watch.hit;
    if (finalOnly)
      for (unsigned k = 0; k < numSt; ++k) {
        if (scan.isSumState(k))
          results[numOut + k][0] += state[k];
        else
          results[numOut + k][n] = roundToType(state[k], stateElt(k));
      }
  }
  return success();
}
