//===- AffineStates.cpp - Which scans update their states affinely --------===//
//
// One forward walk over the body classifies each value as free of the
// states, affine in them (with the states it reads), or neither (with the
// op that made it so). Sums, differences, negations, products and
// quotients by free values, selections on free conditions, fused
// multiply-adds, conversions between float types and detaches keep a value
// affine (in exact arithmetic: float ops round); any other op of a
// state-dependent value (a spike, a comparison, exp, abs, a product of two
// state-dependent values) does not.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/Utils/AffineStates.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::flexsn;

namespace {
/// A value's form: free of the states, affine in `reads`, or other.
struct Form {
  enum Kind { Free, Affine, Other } kind = Free;
  llvm::BitVector reads;
  Operation *culprit = nullptr;
  std::string reason;
};

class Classifier {
public:
  explicit Classifier(ScanOp scan) : numStates(scan.getNumStates()) {
    for (BlockArgument arg : scan.getStateArgs()) {
      Form f{Form::Affine, llvm::BitVector(numStates), nullptr, {}};
      f.reads.set(arg.getArgNumber() - scan.getNumInputs() - scan.getNumLagged());
      forms[arg] = f;
    }
  }

  Form of(Value v) const {
    auto it = forms.find(v);
    return it == forms.end() ? free() : it->second;
  }

  void visit(Operation *op) {
    if (op->getNumResults() == 0)
      return;
    Form f = classify(op);
    for (Value r : op->getResults())
      forms[r] = f;
  }

private:
  Form free() const { return Form{Form::Free, llvm::BitVector(numStates), nullptr, {}}; }

  static Form other(Operation *op, std::string reason) {
    Form f;
    f.kind = Form::Other;
    f.culprit = op;
    f.reason = std::move(reason);
    return f;
  }

  /// The sum or difference of `a` and `b` (their union).
  Form combine(const Form &a, const Form &b) const {
    if (a.kind == Form::Other)
      return a;
    if (b.kind == Form::Other)
      return b;
    Form f = free();
    f.reads = a.reads;
    f.reads |= b.reads;
    f.kind = f.reads.any() ? Form::Affine : Form::Free;
    return f;
  }

  /// `a` times (or over) a value of form `b`, which must be free.
  Form scale(Operation *op, const Form &a, const Form &b, StringRef what) const {
    if (a.kind == Form::Other)
      return a;
    if (b.kind == Form::Other)
      return b;
    if (b.kind == Form::Affine)
      return other(op, what.str());
    return a;
  }

  Form classify(Operation *op) {
    SmallVector<Form> in;
    bool allFree = true;
    for (Value v : op->getOperands()) {
      in.push_back(of(v));
      allFree &= in.back().kind == Form::Free;
    }
    if (allFree)
      return free();
    if (isa<arith::AddFOp, arith::SubFOp>(op))
      return combine(in[0], in[1]);
    // A narrowing rounds, as every float op does: the form is the value's
    // in exact arithmetic (a backward scan rounds its state gradients where
    // the forward stores a narrower type).
    if (isa<arith::NegFOp, arith::ExtFOp, arith::TruncFOp, DetachOp>(op))
      return in[0];
    if (isa<arith::MulFOp>(op)) {
      if (in[0].kind == Form::Free)
        return scale(op, in[1], in[0], "");
      return scale(op, in[0], in[1], "a product of two values that depend on the states");
    }
    if (isa<arith::DivFOp>(op))
      return scale(op, in[0], in[1], "a division by a value that depends on the states");
    if (isa<math::FmaOp>(op)) {
      Form product = in[0].kind == Form::Free
                         ? scale(op, in[1], in[0], "")
                         : scale(op, in[0], in[1],
                                 "a product of two values that depend on the states");
      return combine(product, in[2]);
    }
    if (isa<arith::SelectOp>(op)) {
      if (in[0].kind != Form::Free)
        return other(op, "a choice that depends on the states");
      return combine(in[1], in[2]);
    }
    for (const Form &f : in)
      if (f.kind == Form::Other)
        return f;
    return other(op, llvm::formatv("'{0}' of a value that depends on the states",
                                   op->getName().getStringRef())
                         .str());
  }

  unsigned numStates;
  llvm::DenseMap<Value, Form> forms;
};
} // namespace

SmallVector<StateUpdate> mlir::flexsn::analyzeAffineStates(ScanOp scan) {
  Classifier classifier(scan);
  for (Operation &op : scan.getBodyBlock().without_terminator())
    classifier.visit(&op);
  SmallVector<StateUpdate> updates;
  auto newStates = scan.getYield()->getOperands().drop_front(scan.getNumOutputs());
  for (Value v : newStates) {
    Form f = classifier.of(v);
    StateUpdate u;
    u.affine = f.kind != Form::Other;
    u.reads = f.reads.empty() ? llvm::BitVector(scan.getNumStates()) : f.reads;
    u.culprit = f.culprit;
    u.reason = f.reason;
    updates.push_back(std::move(u));
  }
  return updates;
}
