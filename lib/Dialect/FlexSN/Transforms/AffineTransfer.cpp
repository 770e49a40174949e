//===- AffineTransfer.cpp - Transfer functions of affine scans ------------===//
//
// flexsn-affine-transfer: for a kernel function @f whose scan updates every
// state affinely, builds @f_transfer, the same steps run from given initial
// states alongside the Jacobian of the states with respect to them. Over a
// chunk of steps started at zero and at the identity it yields the chunk's
// (A, b), which a parallel-in-time scan composes across chunks.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"
#include "flexsn/Dialect/FlexSN/Utils/AffineStates.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

namespace mlir {
namespace flexsn {
#define GEN_PASS_DEF_FLEXSNAFFINETRANSFER
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h.inc"
} // namespace flexsn
} // namespace mlir

using namespace mlir;
using namespace mlir::flexsn;

namespace {
/// Forward-mode derivatives of a body's values along one direction of the
/// states. A value without an entry is free of the states (derivative
/// zero); an opaque one depends on them through an op that is not affine
/// (it may feed outputs, never a state: the proof says so).
class Tangents {
public:
  Tangents(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  void seed(Value v, Value d) { tangent[v] = d; }

  /// The derivative of `v`: null where it is zero; failure where opaque.
  FailureOr<Value> of(Value v) const {
    if (opaque.contains(v))
      return failure();
    return tangent.lookup(v);
  }

  void visit(Operation *op) {
    bool dependent = false, blocked = false;
    for (Value v : op->getOperands()) {
      dependent |= tangent.contains(v);
      blocked |= opaque.contains(v);
    }
    if (!dependent && !blocked)
      return;
    Value d = blocked ? Value() : derive(op);
    for (Value r : op->getResults()) {
      if (d)
        tangent[r] = d;
      else
        opaque.insert(r);
    }
  }

private:
  Value zero(Type t) {
    return arith::ConstantOp::create(b, loc, t, b.getFloatAttr(t, 0.0));
  }

  /// The derivative of `op`'s result from its operands' (some nonzero);
  /// null where `op` is not affine in them.
  Value derive(Operation *op) {
    auto d = [&](unsigned i) { return tangent.lookup(op->getOperand(i)); };
    Value x = op->getNumOperands() ? op->getOperand(0) : Value();
    Value y = op->getNumOperands() > 1 ? op->getOperand(1) : Value();
    if (isa<arith::AddFOp>(op)) {
      if (d(0) && d(1))
        return arith::AddFOp::create(b, loc, d(0), d(1));
      return d(0) ? d(0) : d(1);
    }
    if (isa<arith::SubFOp>(op)) {
      if (d(0) && d(1))
        return arith::SubFOp::create(b, loc, d(0), d(1));
      return d(0) ? d(0) : arith::NegFOp::create(b, loc, d(1)).getResult();
    }
    if (isa<arith::NegFOp>(op))
      return arith::NegFOp::create(b, loc, d(0));
    if (isa<DetachOp>(op))
      return d(0);
    if (auto ext = dyn_cast<arith::ExtFOp>(op))
      return arith::ExtFOp::create(b, loc, ext.getType(), d(0));
    if (auto trunc = dyn_cast<arith::TruncFOp>(op))
      return arith::TruncFOp::create(b, loc, trunc.getType(), d(0));
    if (isa<arith::MulFOp>(op)) {
      if (d(0) && d(1))
        return {};
      return d(0) ? arith::MulFOp::create(b, loc, d(0), y)
                  : arith::MulFOp::create(b, loc, x, d(1));
    }
    if (isa<arith::DivFOp>(op))
      return d(1) ? Value() : arith::DivFOp::create(b, loc, d(0), y);
    if (isa<math::FmaOp>(op)) {
      if (d(0) && d(1))
        return {};
      if (!d(0) && !d(1))
        return d(2);
      Value u = d(0) ? d(0) : x, v = d(0) ? y : d(1);
      if (!d(2))
        return arith::MulFOp::create(b, loc, u, v);
      return math::FmaOp::create(b, loc, u, v, d(2));
    }
    if (auto sel = dyn_cast<arith::SelectOp>(op)) {
      if (d(0))
        return {};
      Value t = d(1) ? d(1) : zero(sel.getType());
      Value f = d(2) ? d(2) : zero(sel.getType());
      return arith::SelectOp::create(b, loc, sel.getCondition(), t, f);
    }
    return {};
  }

  OpBuilder &b;
  Location loc;
  llvm::DenseMap<Value, Value> tangent;
  llvm::DenseSet<Value> opaque;
};

struct FlexSNAffineTransferPass
    : public mlir::flexsn::impl::FlexSNAffineTransferBase<
          FlexSNAffineTransferPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<std::pair<func::FuncOp, ScanOp>> kernels;
    module.walk([&](ScanOp scan) {
      if (auto func = dyn_cast<func::FuncOp>(scan->getParentOp()))
        kernels.push_back({func, scan});
    });
    SmallVector<func::FuncOp> made;
    std::string why;
    for (auto [func, scan] : kernels) {
      std::string reason = notAffine(scan);
      if (!reason.empty()) {
        if (explain)
          scan.emitRemark() << "no transfer function: " << reason;
        why += "\n  @" + func.getSymName().str() + ": " + reason;
        continue;
      }
      FailureOr<func::FuncOp> fn = build(func, scan);
      if (failed(fn))
        return signalPassFailure();
      made.push_back(*fn);
    }
    if (!replace)
      return;
    if (made.empty()) {
      module.emitError() << "flexsn-affine-transfer (replace): no scan "
                            "updates its states affinely, so no chunked "
                            "parallel scan can be built:"
                         << (why.empty() ? "\n  the module holds no scan" : why);
      return signalPassFailure();
    }
    llvm::SetVector<Operation *> originals;
    for (auto [func, scan] : kernels)
      originals.insert(func);
    for (Operation *func : originals)
      func->erase();
  }

  /// Why `scan` gets no transfer function ("" when it gets one).
  static std::string notAffine(ScanOp scan) {
    if (!scan.getNumStates())
      return "the scan has no states";
    for (auto [i, u] : llvm::enumerate(analyzeAffineStates(scan)))
      if (!u.affine)
        return "state #" + std::to_string(i) + " is not affine in the states (" +
               u.reason + ")";
    return "";
  }

  FailureOr<func::FuncOp> build(func::FuncOp func, ScanOp scan) {
    MLIRContext *ctx = &getContext();
    std::string name = (func.getSymName() + "_transfer").str();
    ModuleOp module = getOperation();
    if (SymbolTable::lookupSymbolIn(module, name))
      return func.emitOpError() << "has no room for its transfer function: a "
                                   "symbol named '"
                                << name << "' already exists";
    unsigned k = scan.getNumStates();
    Type ct = scan.getComputeType();
    auto vec = RankedTensorType::get({ShapedType::kDynamic}, ct);
    auto seq = [](Type t) {
      auto r = cast<RankedTensorType>(t);
      return RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic},
                                   r.getElementType());
    };
    // Operands: inputs, lagged, lagged_init, states then the Jacobian,
    // params; results: each state's sequence, then the Jacobian's.
    SmallVector<Value> states(scan.getInitStates());
    SmallVector<Type> argTypes, resultTypes;
    for (Value v : scan.getInputs())
      argTypes.push_back(v.getType());
    for (Value v : scan.getLagged())
      argTypes.push_back(v.getType());
    for (Value v : scan.getLaggedInit())
      argTypes.push_back(v.getType());
    for (Value v : states) {
      argTypes.push_back(v.getType());
      resultTypes.push_back(seq(v.getType()));
    }
    for (unsigned e = 0; e < k * k; ++e) {
      argTypes.push_back(vec);
      resultTypes.push_back(seq(vec));
    }
    for (Value v : scan.getParams())
      argTypes.push_back(v.getType());

    OpBuilder b(ctx);
    b.setInsertionPointAfter(func);
    auto fn = func::FuncOp::create(b, func.getLoc(), name,
                                   FunctionType::get(ctx, argTypes, resultTypes));
    Block *entry = fn.addEntryBlock();
    b.setInsertionPointToStart(entry);
    ValueRange a = entry->getArguments();
    unsigned nIn = scan.getNumInputs(), nLag = scan.getNumLagged(),
             nSt = k + k * k;
    auto newScan = ScanOp::create(
        b, scan.getLoc(), resultTypes, a.take_front(nIn), a.slice(nIn, nLag),
        a.slice(nIn + nLag, nLag), a.slice(nIn + 2 * nLag, nSt),
        a.drop_front(nIn + 2 * nLag + nSt), scan.getReverseAttr(),
        /*final_states=*/UnitAttr(), DenseI64ArrayAttr());
    if (Attribute chunk = scan->getAttr(kChunkWidthAttr))
      newScan->setAttr(kChunkWidthAttr, chunk);
    func::ReturnOp::create(b, scan.getLoc(), newScan.getResults());
    if (failed(buildBody(scan, newScan, ct)))
      return failure();
    return fn;
  }

  /// The transfer scan's body: the original step on (inputs, lagged,
  /// states, params), then per direction j the derivatives of the new
  /// states along the Jacobian's column j.
  LogicalResult buildBody(ScanOp scan, ScanOp newScan, Type ct) {
    unsigned k = scan.getNumStates();
    Block &old = scan.getBodyBlock();
    Block *body = new Block();
    newScan.getBody().push_back(body);
    Location loc = scan.getLoc();
    SmallVector<BlockArgument> oldArgs(old.getArguments());
    unsigned nFront = scan.getNumInputs() + scan.getNumLagged();
    IRMapping map;
    for (BlockArgument arg : ArrayRef(oldArgs).take_front(nFront + k))
      map.map(arg, body->addArgument(arg.getType(), arg.getLoc()));
    SmallVector<Value> jac;
    for (unsigned e = 0; e < k * k; ++e)
      jac.push_back(body->addArgument(ct, loc));
    for (BlockArgument arg : ArrayRef(oldArgs).drop_front(nFront + k))
      map.map(arg, body->addArgument(arg.getType(), arg.getLoc()));

    OpBuilder b = OpBuilder::atBlockEnd(body);
    SmallVector<Operation *> step;
    for (Operation &op : old.without_terminator())
      step.push_back(b.clone(op, map));
    auto newStates = llvm::map_to_vector(
        old.getTerminator()->getOperands().drop_front(scan.getNumOutputs()),
        [&](Value v) { return map.lookupOrDefault(v); });

    SmallVector<Value> yield(newStates);
    SmallVector<Value> columns(k * k);
    for (unsigned j = 0; j < k; ++j) {
      Tangents t(b, loc);
      for (unsigned i = 0; i < k; ++i)
        t.seed(map.lookup(oldArgs[nFront + i]), jac[i * k + j]);
      for (Operation *op : step)
        t.visit(op);
      for (unsigned i = 0; i < k; ++i) {
        FailureOr<Value> d = t.of(newStates[i]);
        if (failed(d))
          return scan.emitOpError()
                 << "state #" << i
                 << " has no derivative along the states, although the "
                    "affine-states proof holds (an internal error)";
        columns[i * k + j] =
            *d ? *d
               : arith::ConstantOp::create(b, loc, ct, b.getFloatAttr(ct, 0.0))
                     .getResult();
      }
    }
    llvm::append_range(yield, columns);
    YieldOp::create(b, loc, yield);
    return success();
  }
};
} // namespace
