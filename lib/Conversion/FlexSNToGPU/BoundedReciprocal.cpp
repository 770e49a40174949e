//===- BoundedReciprocal.cpp - flexsn-bounded-reciprocal ------------------===//
//
// 1 / d for an f32 divisor whose defining ops bound it to normal floats:
// the IEEE reciprocal's fast path (MUFU.RCP and one Newton step) without
// the test and branch to its slow path that `rcp.rn.f32` costs in every
// step of a time loop. The bound is proven by interval evaluation of the
// divisor's operand tree.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <limits>
#include <optional>

namespace mlir {
namespace flexsn {
#define GEN_PASS_DEF_FLEXSNBOUNDEDRECIPROCAL
#include "flexsn/Conversion/Passes.h.inc"
} // namespace flexsn
} // namespace mlir

using namespace mlir;
using namespace mlir::flexsn;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// A closed interval of reals holding every non-NaN value an SSA value can
/// take; lo > hi is empty (a branch no non-NaN value reaches).
struct Interval {
  double lo = -kInf, hi = kInf;
  bool empty() const { return lo > hi; }
  static Interval none() { return {kInf, -kInf}; }
};

Interval hull(Interval a, Interval b) {
  if (a.empty())
    return b;
  if (b.empty())
    return a;
  return {std::min(a.lo, b.lo), std::max(a.hi, b.hi)};
}

Interval meet(Interval a, Interval b) {
  return {std::max(a.lo, b.lo), std::min(a.hi, b.hi)};
}

/// Interval evaluation of an operand tree, under assumptions that the
/// enclosing selects' conditions give their branches. std::nullopt: no
/// finite proof (NaN bound, unknown op, depth or work exhausted).
class RangeProver {
public:
  std::optional<Interval> range(Value v, unsigned depth = 0);

private:
  static constexpr unsigned kMaxDepth = 16;
  static constexpr unsigned kMaxVisits = 512;

  std::optional<Interval> defined(Value v, unsigned depth);
  std::optional<Interval> select(arith::SelectOp op, unsigned depth);

  SmallVector<std::pair<Value, Interval>> assumptions;
  unsigned visits = 0;
};

std::optional<Interval> RangeProver::range(Value v, unsigned depth) {
  auto type = dyn_cast<FloatType>(getElementTypeOrSelf(v.getType()));
  if (!type)
    return std::nullopt;
  std::optional<Interval> r = defined(v, depth);
  if (r && !r->empty()) {
    if (std::isnan(r->lo) || std::isnan(r->hi))
      return std::nullopt;
    // The bounds are exact arithmetic; the op rounds to its type: past the
    // largest finite value it overflows to infinity, and below the
    // smallest normal one it may flush to zero.
    const llvm::fltSemantics &sem = type.getFloatSemantics();
    double largest = APFloat::getLargest(sem).convertToDouble();
    double tiny = APFloat::getSmallestNormalized(sem).convertToDouble();
    if (r->hi > largest)
      r->hi = kInf;
    if (r->lo < -largest)
      r->lo = -kInf;
    if (r->lo > 0 && r->lo < tiny)
      r->lo = 0;
    if (r->hi < 0 && r->hi > -tiny)
      r->hi = 0;
  }
  for (auto &[value, assumed] : assumptions) {
    if (value != v)
      continue;
    r = r ? meet(*r, assumed) : assumed;
  }
  return r;
}

/// The predicate p' with (c p x) == (x p' c).
static arith::CmpFPredicate swapped(arith::CmpFPredicate pred) {
  using P = arith::CmpFPredicate;
  switch (pred) {
  case P::OGT: return P::OLT;
  case P::OGE: return P::OLE;
  case P::OLT: return P::OGT;
  case P::OLE: return P::OGE;
  case P::UGT: return P::ULT;
  case P::UGE: return P::ULE;
  case P::ULT: return P::UGT;
  case P::ULE: return P::UGE;
  default: return pred; // symmetric, or told nothing by implied()
  }
}

/// What `lhs pred c` being true (`holds`) or false tells of lhs, NaN aside;
/// std::nullopt: nothing.
static std::optional<Interval> implied(arith::CmpFPredicate pred, double c,
                                       bool holds) {
  using P = arith::CmpFPredicate;
  switch (pred) {
  case P::OGT:
  case P::OGE:
  case P::UGT:
  case P::UGE:
    return holds ? Interval{c, kInf} : Interval{-kInf, c};
  case P::OLT:
  case P::OLE:
  case P::ULT:
  case P::ULE:
    return holds ? Interval{-kInf, c} : Interval{c, kInf};
  case P::OEQ:
  case P::UEQ:
    if (holds)
      return Interval{c, c};
    return std::nullopt;
  default:
    return std::nullopt;
  }
}

std::optional<Interval> RangeProver::select(arith::SelectOp op,
                                            unsigned depth) {
  std::optional<Interval> trueAssumed, falseAssumed;
  Value tested;
  if (auto cmp = op.getCondition().getDefiningOp<arith::CmpFOp>()) {
    FloatAttr c;
    arith::CmpFPredicate pred = cmp.getPredicate();
    if (matchPattern(cmp.getRhs(), m_Constant(&c))) {
      tested = cmp.getLhs();
    } else if (matchPattern(cmp.getLhs(), m_Constant(&c))) {
      tested = cmp.getRhs();
      pred = swapped(pred);
    }
    if (tested && !std::isnan(c.getValueAsDouble())) {
      trueAssumed = implied(pred, c.getValueAsDouble(), true);
      falseAssumed = implied(pred, c.getValueAsDouble(), false);
    }
  }
  auto branch = [&](Value v, std::optional<Interval> assumed) {
    if (!assumed)
      return range(v, depth + 1);
    size_t mark = assumptions.size();
    assumptions.push_back({tested, *assumed});
    std::optional<Interval> r = range(v, depth + 1);
    assumptions.resize(mark);
    return r;
  };
  std::optional<Interval> a = branch(op.getTrueValue(), trueAssumed);
  if (!a)
    return std::nullopt;
  std::optional<Interval> b = branch(op.getFalseValue(), falseAssumed);
  if (!b)
    return std::nullopt;
  return hull(*a, *b);
}

std::optional<Interval> RangeProver::defined(Value v, unsigned depth) {
  if (depth > kMaxDepth || ++visits > kMaxVisits)
    return std::nullopt;
  FloatAttr c;
  if (matchPattern(v, m_Constant(&c))) {
    double x = c.getValueAsDouble();
    if (std::isnan(x))
      return std::nullopt;
    return Interval{x, x};
  }
  Operation *op = v.getDefiningOp();
  if (!op)
    return std::nullopt;
  auto operand = [&](unsigned i) { return range(op->getOperand(i), depth + 1); };
  using R = std::optional<Interval>;
  return llvm::TypeSwitch<Operation *, R>(op)
      .Case<math::AbsFOp>([&](auto) -> R {
        R x = operand(0);
        if (!x)
          return Interval{0.0, kInf};
        if (x->empty())
          return x;
        if (x->lo >= 0)
          return x;
        if (x->hi <= 0)
          return Interval{-x->hi, -x->lo};
        return Interval{0.0, std::max(-x->lo, x->hi)};
      })
      .Case<arith::NegFOp>([&](auto) -> R {
        R x = operand(0);
        if (!x || x->empty())
          return x;
        return Interval{-x->hi, -x->lo};
      })
      .Case<arith::ExtFOp, arith::TruncFOp>(
          [&](auto) -> R { return operand(0); })
      .Case<arith::AddFOp, arith::SubFOp>([&](Operation *) -> R {
        R x = operand(0), y = operand(1);
        if (!x || !y)
          return std::nullopt;
        if (x->empty() || y->empty())
          return Interval::none();
        if (isa<arith::AddFOp>(op))
          return Interval{x->lo + y->lo, x->hi + y->hi};
        return Interval{x->lo - y->hi, x->hi - y->lo};
      })
      .Case<arith::MulFOp>([&](auto) -> R {
        R x = operand(0), y = operand(1);
        if (!x || !y)
          return std::nullopt;
        if (x->empty() || y->empty())
          return Interval::none();
        double p[] = {x->lo * y->lo, x->lo * y->hi, x->hi * y->lo,
                      x->hi * y->hi};
        Interval r{kInf, -kInf};
        for (double q : p) {
          if (std::isnan(q)) // 0 * inf
            return std::nullopt;
          r.lo = std::min(r.lo, q);
          r.hi = std::max(r.hi, q);
        }
        return r;
      })
      .Case<math::ExpOp>([&](auto) -> R {
        R x = operand(0);
        if (!x || x->empty())
          return x;
        return Interval{std::exp(x->lo), std::exp(x->hi)};
      })
      .Case<arith::MaximumFOp, arith::MaxNumFOp, arith::MinimumFOp,
            arith::MinNumFOp>([&](Operation *) -> R {
        bool isMax = isa<arith::MaximumFOp, arith::MaxNumFOp>(op);
        R x = operand(0), y = operand(1);
        // Where neither operand is NaN. One bound suffices: max(x, y) is at
        // least the known operand's lower bound.
        Interval both;
        if (x && y)
          both = x->empty() || y->empty() ? Interval::none()
                 : isMax ? Interval{std::max(x->lo, y->lo),
                                    std::max(x->hi, y->hi)}
                         : Interval{std::min(x->lo, y->lo),
                                    std::min(x->hi, y->hi)};
        else if (x || y) {
          Interval k = x ? *x : *y;
          both = k.empty() ? Interval::none()
                 : isMax   ? Interval{k.lo, kInf}
                           : Interval{-kInf, k.hi};
        } else
          return std::nullopt;
        // maximumf/minimumf give NaN where an operand is NaN; maxnumf/
        // minnumf give the other operand, which need not lie in `both`.
        // A constant operand is never NaN (NaN constants prove nothing).
        if (isa<arith::MaximumFOp, arith::MinimumFOp>(op))
          return both;
        Interval r = both;
        for (auto [i, other] : {std::pair{0u, y}, std::pair{1u, x}}) {
          if (matchPattern(op->getOperand(i), m_Constant()))
            continue;
          if (!other)
            return std::nullopt;
          r = hull(r, *other);
        }
        return r;
      })
      .Case<arith::SelectOp>([&](arith::SelectOp s) { return select(s, depth); })
      .Default([](Operation *) -> R { return std::nullopt; });
}

/// Whether every non-NaN value in `r` is a normal float far from the ends
/// of the range where the fast path is exact (2^-126 <= |d| < 2^126).
bool withinFastPath(Interval r) {
  const double lo = std::ldexp(1.0, -64), hi = std::ldexp(1.0, 64);
  if (r.empty())
    return true;
  return (r.lo >= lo && r.hi <= hi) || (r.lo >= -hi && r.hi <= -lo);
}

struct FlexSNBoundedReciprocalPass
    : public mlir::flexsn::impl::FlexSNBoundedReciprocalBase<
          FlexSNBoundedReciprocalPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<arith::DivFOp> rewrite;
    getOperation()->walk([&](arith::DivFOp div) {
      if (!div.getType().isF32() || !matchPattern(div.getLhs(), m_OneFloat()))
        return;
      RangeProver prover;
      std::optional<Interval> r = prover.range(div.getRhs());
      if (r && withinFastPath(*r))
        rewrite.push_back(div);
    });
    for (arith::DivFOp div : rewrite) {
      OpBuilder b(div);
      Location loc = div.getLoc();
      Type f32 = b.getF32Type();
      Value d = div.getRhs();
      Value r0 = NVVM::RcpApproxFtzF32Op::create(b, loc, f32, d);
      Value minusOne = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(-1.0));
      // The error of r0, d * r0 - 1, exactly (one rounding, tiny), then
      // r0 - r0 * error, rounded once: ptxas's rcp.rn.f32 fast path.
      Value error = LLVM::FMAOp::create(b, loc, d, r0, minusOne);
      Value negError = arith::NegFOp::create(b, loc, error);
      Value r = LLVM::FMAOp::create(b, loc, r0, negError, r0);
      div.getResult().replaceAllUsesWith(r);
      div.erase();
    }
  }
};

} // namespace
