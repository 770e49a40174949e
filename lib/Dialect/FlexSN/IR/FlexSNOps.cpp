//===- FlexSNOps.cpp - FlexSN operations ----------------------------------===//
//
// Verifiers, folders and canonicalization patterns of the flexsn ops.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::flexsn;

#define GET_OP_CLASSES
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// Element types a sequence or state may be stored as.
static bool isStorageType(Type type) {
  return type.isF16() || type.isBF16() || type.isF32() || type.isF64();
}

/// Checks `type` is a ranked tensor of `rank` with a storage element type;
/// `what` names the value in the message ("input #0").
static LogicalResult verifyStorageTensor(Operation *op, Type type,
                                         int64_t rank, const Twine &what,
                                         StringRef shape) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || tensor.getRank() != rank)
    return op->emitOpError() << what << " must be a rank-" << rank
                             << " tensor " << shape << ", got " << type;
  if (!isStorageType(tensor.getElementType()))
    return op->emitOpError()
           << what << " must be stored as f16, bf16, f32 or f64, got "
           << tensor.getElementType();
  return success();
}

namespace {
/// Static sizes seen so far for the time (T) and neuron (NCL) dimensions.
struct DimChecker {
  Operation *op;
  int64_t t = ShapedType::kDynamic;
  int64_t ncl = ShapedType::kDynamic;
  std::string tWhere, nclWhere;

  LogicalResult check(int64_t &seen, std::string &seenWhere, int64_t size,
                      const Twine &where, StringRef dimName) {
    if (ShapedType::isDynamic(size))
      return success();
    if (ShapedType::isDynamic(seen)) {
      seen = size;
      seenWhere = where.str();
      return success();
    }
    if (seen != size)
      return op->emitOpError()
             << dimName << " mismatch: " << seenWhere << " has " << seen
             << " but " << where << " has " << size;
    return success();
  }
  LogicalResult sequence(Type type, const Twine &where) {
    auto tensor = cast<RankedTensorType>(type);
    if (failed(check(t, tWhere, tensor.getDimSize(0), where,
                     "time dimension (T)")))
      return failure();
    return check(ncl, nclWhere, tensor.getDimSize(1), where,
                 "neuron dimension (NCL)");
  }
  LogicalResult perNeuron(Type type, const Twine &where) {
    return check(ncl, nclWhere, cast<RankedTensorType>(type).getDimSize(0),
                 where, "neuron dimension (NCL)");
  }
};
} // namespace

//===----------------------------------------------------------------------===//
// ScanOp
//===----------------------------------------------------------------------===//

YieldOp ScanOp::getYield() {
  return cast<YieldOp>(getBodyBlock().getTerminator());
}

int64_t ScanOp::getChunkWidth() {
  auto width = (*this)->getAttrOfType<IntegerAttr>(kChunkWidthAttr);
  return width ? width.getInt() : 0;
}

Type ScanOp::getComputeType() {
  Block &block = getBodyBlock();
  if (block.getNumArguments() > 0)
    return block.getArgument(0).getType();
  if (auto yield = dyn_cast<YieldOp>(block.getTerminator()))
    if (!yield.getValues().empty())
      return yield.getValues().front().getType();
  return Float32Type::get(getContext());
}

LogicalResult ScanOp::verify() {
  Operation *op = getOperation();
  DimChecker dims{op};
  for (auto [i, v] : llvm::enumerate(getInputs())) {
    std::string what = "input #" + std::to_string(i);
    if (failed(verifyStorageTensor(op, v.getType(), 2, what, "[T, NCL]")) ||
        failed(dims.sequence(v.getType(), what)))
      return failure();
  }
  if (getLagged().size() != getLaggedInit().size())
    return emitOpError() << "has " << getLagged().size()
                         << " lagged sequence(s) but " << getLaggedInit().size()
                         << " lagged_init value(s); they come in pairs";
  for (auto [i, pair] :
       llvm::enumerate(llvm::zip_equal(getLagged(), getLaggedInit()))) {
    auto [seq, init] = pair;
    std::string what = "lagged #" + std::to_string(i);
    if (failed(verifyStorageTensor(op, seq.getType(), 2, what, "[T, NCL]")) ||
        failed(dims.sequence(seq.getType(), what)) ||
        failed(verifyStorageTensor(op, init.getType(), 1, what + " init",
                                   "[NCL]")) ||
        failed(dims.perNeuron(init.getType(), what + " init")))
      return failure();
    Type seqElt = cast<RankedTensorType>(seq.getType()).getElementType();
    Type initElt = cast<RankedTensorType>(init.getType()).getElementType();
    if (seqElt != initElt)
      return emitOpError() << what << " is stored as " << seqElt
                           << " but its lagged_init as " << initElt
                           << "; a lagged pair shares its storage type";
  }
  for (auto [i, v] : llvm::enumerate(getInitStates())) {
    std::string what = "initial state #" + std::to_string(i);
    if (failed(verifyStorageTensor(op, v.getType(), 1, what, "[NCL]")) ||
        failed(dims.perNeuron(v.getType(), what)))
      return failure();
  }
  for (auto [i, v] : llvm::enumerate(getParams())) {
    std::string what = "param #" + std::to_string(i);
    Type type = v.getType();
    if (isa<RankedTensorType>(type)) {
      if (failed(verifyStorageTensor(op, type, 1, what, "[NCL]")) ||
          failed(dims.perNeuron(type, what)))
        return failure();
    } else if (!isStorageType(type)) {
      return emitOpError() << what
                           << " must be a float scalar (f16, bf16, f32, f64) "
                              "or a per-neuron tensor [NCL], got "
                           << type;
    }
  }

  unsigned numStates = getNumStates();
  if (getResults().size() < numStates)
    return emitOpError() << "has " << getResults().size()
                         << " result(s), fewer than its " << numStates
                         << " state(s): results are outputs, then one per "
                            "state";
  if (getResults().empty())
    return emitOpError("produces nothing: it needs at least one output or "
                       "state");

  for (auto [i, r] : llvm::enumerate(getOutputResults())) {
    std::string what = "output #" + std::to_string(i);
    if (failed(verifyStorageTensor(op, r.getType(), 2, what, "[T, NCL]")) ||
        failed(dims.sequence(r.getType(), what)))
      return failure();
  }
  bool finalOnly = getFinalStates();
  if (auto sums = getSumStates()) {
    if (!finalOnly)
      return emitOpError("sum_states needs final_states: only a final state "
                         "can be summed over neurons");
    int64_t prev = -1;
    for (int64_t idx : *sums) {
      if (idx <= prev || idx >= static_cast<int64_t>(numStates))
        return emitOpError()
               << "sum_states must list state indices in increasing order, "
                  "each below the number of states ("
               << numStates << "), got " << idx;
      prev = idx;
    }
  }
  for (auto [i, r] : llvm::enumerate(getStateResults())) {
    std::string what = "state result #" + std::to_string(i);
    if (isSumState(i)) {
      auto tensor = dyn_cast<RankedTensorType>(r.getType());
      if (!tensor || tensor.getRank() != 0 ||
          !(tensor.getElementType().isF32() ||
            tensor.getElementType().isF64()))
        return emitOpError() << what
                             << " is in sum_states and must be a rank-0 "
                                "tensor of f32 or f64, got "
                             << r.getType();
      continue;
    }
    if (finalOnly) {
      if (failed(verifyStorageTensor(op, r.getType(), 1,
                                     what + " (final_states)", "[NCL]")) ||
          failed(dims.perNeuron(r.getType(), what)))
        return failure();
    } else if (failed(verifyStorageTensor(op, r.getType(), 2,
                                          what + " (a state sequence)",
                                          "[T, NCL]")) ||
               failed(dims.sequence(r.getType(), what))) {
      return failure();
    }
    Type stateElt =
        cast<RankedTensorType>(getInitStates()[i].getType()).getElementType();
    Type resultElt = cast<RankedTensorType>(r.getType()).getElementType();
    if (stateElt != resultElt)
      return emitOpError() << what << " is stored as " << resultElt
                           << " but initial state #" << i << " as "
                           << stateElt << "; a state keeps its storage type";
  }
  return success();
}

LogicalResult ScanOp::verifyRegions() {
  Block &block = getBodyBlock();
  unsigned numOperands =
      getNumInputs() + getNumLagged() + getNumStates() + getNumParams();
  if (block.getNumArguments() != numOperands) {
    InFlightDiagnostic diag = emitOpError()
                              << "body has " << block.getNumArguments()
                              << " argument(s), but the scan has "
                              << getNumInputs() << " input(s) + ";
    if (getNumLagged())
      diag << getNumLagged() << " lagged pair(s) + ";
    diag << getNumStates() << " state(s) + " << getNumParams()
         << " param(s) = " << numOperands;
    return diag;
  }

  Type computeType = getComputeType();
  if (!computeType.isF32() && !computeType.isF64())
    return emitOpError() << "body computes in " << computeType
                         << "; the compute type must be f32 or f64";
  for (BlockArgument arg : block.getArguments())
    if (arg.getType() != computeType)
      return emitOpError() << "body argument #" << arg.getArgNumber()
                           << " has type " << arg.getType()
                           << " but argument #0 has " << computeType
                           << "; all body arguments share the compute type";

  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  if (!yield)
    return emitOpError("body must end in 'flexsn.yield'");
  unsigned numResults = getResults().size();
  if (yield.getValues().size() != numResults)
    return yield.emitOpError()
           << "yields " << yield.getValues().size()
           << " value(s), but the scan has " << getNumOutputs()
           << " output(s) + " << getNumStates() << " state(s) = "
           << numResults;
  for (auto [i, v] : llvm::enumerate(yield.getValues()))
    if (v.getType() != computeType)
      return yield.emitOpError()
             << "value #" << i << " has type " << v.getType()
             << "; yielded values must have the compute type "
             << computeType;
  for (auto [i, r] : llvm::enumerate(getStateResults()))
    if (isSumState(i) &&
        cast<RankedTensorType>(r.getType()).getElementType() != computeType)
      return emitOpError() << "state result #" << i
                           << " is in sum_states and must be a rank-0 "
                              "tensor of the compute type "
                           << computeType << ", got " << r.getType();

  for (Operation &inner : block.without_terminator()) {
    if (inner.getNumRegions() != 0)
      return inner.emitOpError()
             << "is not allowed in a flexsn.scan body: the body is "
                "straight-line scalar code without nested regions";
    if (!isMemoryEffectFree(&inner))
      return inner.emitOpError()
             << "is not allowed in a flexsn.scan body: it has (or may "
                "have) side effects";
    for (Type t : llvm::concat<const Type>(inner.getOperandTypes(),
                                           inner.getResultTypes()))
      if (!t.isIntOrIndexOrFloat())
        return inner.emitOpError()
               << "is not allowed in a flexsn.scan body: it uses a value of "
                  "type "
               << t << "; the body is elementwise, on scalars only";
  }
  return success();
}

namespace {
/// Moves constant scalar params into the body; returns whether it moved
/// any (it frees block arguments).
bool inlineConstantParams(ScanOp scan, PatternRewriter &rewriter) {
  Block &body = scan.getBodyBlock();
  bool changed = false;
  for (unsigned i = 0, e = scan.getNumParams(); i < e; ++i) {
    Value param = scan.getParams()[i];
    FloatAttr attr;
    BlockArgument arg = scan.getParamArgs()[i];
    if (arg.use_empty() || !matchPattern(param, m_Constant(&attr)))
      continue;
    rewriter.setInsertionPointToStart(&body);
    auto cst = arith::ConstantOp::create(
        rewriter, param.getLoc(),
        rewriter.getFloatAttr(arg.getType(), attr.getValueAsDouble()));
    rewriter.replaceAllUsesWith(arg, cst);
    changed = true;
  }
  return changed;
}

/// Which of a scan's operands and results stay.
struct ScanLiveness {
  llvm::BitVector out, state, in, lagged, param;

  bool dead() const { return out.none() && state.none(); }
  bool all() const {
    return out.all() && state.all() && in.all() && lagged.all() &&
           param.all();
  }
};

/// Liveness of yielded values: outputs with uses, states with used
/// results, and (to a fixpoint) states whose argument feeds a live value;
/// then the inputs, lagged values and params those read. Backward functions
/// made by flexsn-differentiate name each argument's meaning (flexsn.role,
/// flexsn.index) and must shed what they do not read: their operands may
/// go. A training forward keeps its inputs like the function it was made
/// from (and a scan with no input left would have no sequence to take T
/// from).
ScanLiveness computeLiveness(ScanOp scan) {
  YieldOp yield = scan.getYield();
  unsigned numIn = scan.getNumInputs(), numLa = scan.getNumLagged(),
           numSt = scan.getNumStates(), numPa = scan.getNumParams(),
           numOut = scan.getNumOutputs();
  Operation *func = scan->getParentOp();
  auto kind = func ? func->getAttrOfType<StringAttr>(kKernelKindAttr)
                   : StringAttr();
  bool inFunction = func && isa<FunctionOpInterface>(func) &&
                    (!kind || kind.getValue() != "backward");
  auto isFunctionArg = [&](Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    return inFunction && arg && arg.getOwner()->getParentOp() == func;
  };
  ScanLiveness live;
  live.out.resize(numOut);
  live.state.resize(numSt);
  for (unsigned i = 0; i < numOut; ++i)
    live.out[i] = inFunction || !scan.getOutputResults()[i].use_empty();
  for (unsigned i = 0; i < numSt; ++i)
    live.state[i] = inFunction || !scan.getStateResults()[i].use_empty() ||
                    isFunctionArg(scan.getInitStates()[i]);
  auto argsReachedBy = [&](Value root, llvm::SetVector<Value> &seen) {
    SmallVector<Value> stack{root};
    while (!stack.empty()) {
      Value v = stack.pop_back_val();
      if (!seen.insert(v))
        continue;
      if (Operation *def = v.getDefiningOp())
        for (Value operand : def->getOperands())
          stack.push_back(operand);
    }
  };
  llvm::SetVector<Value> reached;
  bool grew = true;
  while (grew) {
    grew = false;
    reached.clear();
    for (unsigned i = 0; i < numOut; ++i)
      if (live.out[i])
        argsReachedBy(yield.getValues()[i], reached);
    for (unsigned i = 0; i < numSt; ++i)
      if (live.state[i])
        argsReachedBy(yield.getValues()[numOut + i], reached);
    for (unsigned i = 0; i < numSt; ++i)
      if (!live.state[i] && reached.contains(scan.getStateArgs()[i])) {
        live.state[i] = true;
        grew = true;
      }
  }
  live.in.resize(numIn);
  live.lagged.resize(numLa);
  live.param.resize(numPa);
  for (unsigned i = 0; i < numIn; ++i)
    live.in[i] = reached.contains(scan.getInputArgs()[i]) ||
                 isFunctionArg(scan.getInputs()[i]);
  for (unsigned i = 0; i < numLa; ++i)
    live.lagged[i] = reached.contains(scan.getLaggedArgs()[i]) ||
                     isFunctionArg(scan.getLagged()[i]) ||
                     isFunctionArg(scan.getLaggedInit()[i]);
  for (unsigned i = 0; i < numPa; ++i)
    live.param[i] = reached.contains(scan.getParamArgs()[i]) ||
                    isFunctionArg(scan.getParams()[i]);
  return live;
}

/// Replaces `scan` by a scan of its live operands and results, its body
/// moved over.
void rebuildLive(ScanOp scan, const ScanLiveness &live,
                 PatternRewriter &rewriter) {
  Block &body = scan.getBodyBlock();
  YieldOp yield = scan.getYield();
  unsigned numIn = scan.getNumInputs(), numLa = scan.getNumLagged(),
           numSt = scan.getNumStates(), numPa = scan.getNumParams(),
           numOut = scan.getNumOutputs();
  SmallVector<Value> inputs, lagged, laggedInit, states, params;
  SmallVector<int64_t> sums;
  SmallVector<Type> resultTypes;
  SmallVector<Value> oldResults;
  llvm::BitVector keepArgs(body.getNumArguments());
  for (unsigned i = 0; i < numIn; ++i)
    if (live.in[i]) {
      inputs.push_back(scan.getInputs()[i]);
      keepArgs.set(i);
    }
  for (unsigned i = 0; i < numLa; ++i)
    if (live.lagged[i]) {
      lagged.push_back(scan.getLagged()[i]);
      laggedInit.push_back(scan.getLaggedInit()[i]);
      keepArgs.set(numIn + i);
    }
  for (unsigned i = 0; i < numSt; ++i)
    if (live.state[i]) {
      if (scan.isSumState(i))
        sums.push_back(states.size());
      states.push_back(scan.getInitStates()[i]);
      keepArgs.set(numIn + numLa + i);
    }
  for (unsigned i = 0; i < numPa; ++i)
    if (live.param[i]) {
      params.push_back(scan.getParams()[i]);
      keepArgs.set(numIn + numLa + numSt + i);
    }
  SmallVector<Value> yielded;
  for (unsigned i = 0; i < numOut; ++i)
    if (live.out[i]) {
      resultTypes.push_back(scan.getOutputResults()[i].getType());
      oldResults.push_back(scan.getOutputResults()[i]);
      yielded.push_back(yield.getValues()[i]);
    }
  for (unsigned i = 0; i < numSt; ++i)
    if (live.state[i]) {
      resultTypes.push_back(scan.getStateResults()[i].getType());
      oldResults.push_back(scan.getStateResults()[i]);
      yielded.push_back(yield.getValues()[numOut + i]);
    }

  rewriter.setInsertionPoint(scan);
  auto newScan = ScanOp::create(
      rewriter, scan.getLoc(), resultTypes, inputs, lagged, laggedInit,
      states, params, scan.getReverseAttr(), scan.getFinalStatesAttr(),
      sums.empty() ? DenseI64ArrayAttr()
                   : rewriter.getDenseI64ArrayAttr(sums));
  newScan->setDiscardableAttrs(scan->getDiscardableAttrDictionary());
  // what flexsn-affine-states proved describes the old list of states
  if (numSt != states.size()) {
    newScan->removeAttr(kAffineStatesAttr);
    newScan->removeAttr(kStateReadsAttr);
  }
  rewriter.inlineRegionBefore(scan.getBody(), newScan.getBody(),
                              newScan.getBody().end());
  Block &newBody = newScan.getBodyBlock();
  rewriter.setInsertionPoint(yield);
  rewriter.replaceOpWithNewOp<YieldOp>(yield, yielded);
  // Dead block arguments may still have (dead) uses: give them a
  // placeholder zero so the body stays valid; canonicalization removes it.
  rewriter.setInsertionPointToStart(&newBody);
  for (int i = newBody.getNumArguments() - 1; i >= 0; --i) {
    if (keepArgs.test(i))
      continue;
    BlockArgument arg = newBody.getArgument(i);
    if (!arg.use_empty()) {
      auto zero = arith::ConstantOp::create(
          rewriter, arg.getLoc(), rewriter.getFloatAttr(arg.getType(), 0.0));
      rewriter.replaceAllUsesWith(arg, zero);
    }
    newBody.eraseArgument(i);
  }
  for (auto [oldResult, newResult] :
       llvm::zip_equal(oldResults, newScan.getResults()))
    rewriter.replaceAllUsesWith(oldResult, newResult);
  rewriter.eraseOp(scan);
}

/// Drops what a scan computes for nobody: unused output results, states
/// whose result is unused and whose value feeds no live result, and
/// inputs/params the body no longer reads. Scalar params that are constants
/// move into the body.
///
/// A scan directly in a function is a kernel (or will be one): its results
/// and its operands that are function arguments are the kernel's ABI, and a
/// caller numbers them as written ("input #1" is the second input of the
/// source, whatever the body reads). In a user's function those stay, unused
/// or not: the lowering stores nothing for an unused result and its unused
/// loads fold away.
struct SimplifyScanOperands : public OpRewritePattern<ScanOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ScanOp scan,
                                PatternRewriter &rewriter) const override {
    // Inline constant scalar params first: it frees block arguments.
    bool changed = inlineConstantParams(scan, rewriter);
    ScanLiveness live = computeLiveness(scan);
    if (live.dead() || live.all())
      return success(changed); // a dead scan is left whole
    rebuildLive(scan, live, rewriter);
    return success();
  }
};
} // namespace

void ScanOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                         MLIRContext *context) {
  results.add<SimplifyScanOperands>(context);
}

//===----------------------------------------------------------------------===//
// SpikeOp / DetachOp
//===----------------------------------------------------------------------===//

OpFoldResult SpikeOp::fold(FoldAdaptor adaptor) {
  auto input = dyn_cast_or_null<FloatAttr>(adaptor.getInput());
  if (!input)
    return {};
  // NaN >= 0 is false: a NaN never spikes.
  double x = input.getValueAsDouble();
  return FloatAttr::get(getType(), x >= 0.0 ? 1.0 : 0.0);
}

OpFoldResult DetachOp::fold(FoldAdaptor adaptor) {
  if (adaptor.getInput())
    return adaptor.getInput();
  if (auto inner = getInput().getDefiningOp<DetachOp>())
    return inner.getResult();
  return {};
}
