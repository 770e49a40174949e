//===- Differentiate.cpp - BPTT forward and backward scans ----------------===//
//
// flexsn-differentiate: from a kernel function @f holding a flexsn.scan,
// builds @f_forward (the training forward) and @f_backward (the reverse-time
// scan that rematerializes the body and runs its adjoint). Under the `auto`
// saving policy it chooses the values the forward saves by a minimum cut of
// the step's dataflow, and, for a scan with states, adds @f_forward_final
// and @f_backward_final (final states out, and only the state sequences the
// backward reads; final-state gradients in).
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/Utils/KernelABI.h"
#include "flexsn/Dialect/FlexSN/Utils/MinCut.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNInterfaces.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringSet.h"

namespace mlir {
namespace flexsn {
#define GEN_PASS_DEF_FLEXSNDIFFERENTIATE
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h.inc"
} // namespace flexsn
} // namespace mlir

using namespace mlir;
using namespace mlir::flexsn;

namespace {

/// A value the generated functions take or return, with its meaning.
struct RoledType {
  Type type;
  ArgMeaning role;
  unsigned index;
};

/// Collects typed, roled arguments or results of a generated function.
struct Signature {
  SmallVector<RoledType> entries;
  unsigned add(Type type, ArgMeaning role, unsigned index) {
    entries.push_back({type, role, index});
    return entries.size() - 1;
  }
  SmallVector<Type> types() const {
    return llvm::map_to_vector(entries, [](const RoledType &e) { return e.type; });
  }
};

void setRoles(func::FuncOp func, const Signature &args, const Signature &results) {
  Builder b(func.getContext());
  for (auto [i, e] : llvm::enumerate(args.entries)) {
    func.setArgAttr(i, kRoleAttr,
                    b.getStringAttr(stringifyArgMeaning(e.role)));
    func.setArgAttr(i, kIndexAttr, b.getI64IntegerAttr(e.index));
  }
  for (auto [i, e] : llvm::enumerate(results.entries)) {
    func.setResultAttr(i, kRoleAttr,
                         b.getStringAttr(stringifyArgMeaning(e.role)));
    func.setResultAttr(i, kIndexAttr, b.getI64IntegerAttr(e.index));
  }
}

class Differentiator {
public:
  Differentiator(ScanOp scan, const llvm::StringSet<> &saveOps, bool autoSave)
      : scan(scan), func(cast<func::FuncOp>(scan->getParentOp())),
        ctx(scan.getContext()), saveOps(saveOps), autoSave(autoSave) {}

  LogicalResult run();

private:
  /// The recomputed step and the adjoints of its values (steps 1-3 of the
  /// backward body).
  struct Sweep {
    IRMapping map;
    SmallVector<Operation *> clones;
    llvm::DenseMap<Value, Value> adj;
  };

  /// A set of step values whose crossing the forward pays for: their cost
  /// in bytes per neuron and step, and whether a state is among them.
  struct SaveCut {
    int64_t cost = 0;
    SmallVector<Value> values;
    bool hasState = false;
  };

  LogicalResult analyze();
  LogicalResult chooseSaves();
  FailureOr<llvm::DenseSet<Value>> findNeeds();
  FailureOr<SaveCut> minimumSaveCut(const llvm::DenseSet<Value> &needs,
                                    int64_t stateReads);
  FailureOr<Sweep> sweep(OpBuilder &b, ArrayRef<Value> ins, ArrayRef<Value> gy,
                         ArrayRef<Value> gseq, ArrayRef<Value> lagged,
                         ArrayRef<Value> carries, ArrayRef<Value> params);
  func::FuncOp createFunc(StringRef suffix, StringRef kind, const Signature &args,
                          const Signature &results);
  void buildForward();
  /// The backward's arguments and results, where each of the primal's
  /// operands and gradients sits among them, and its scan's result types.
  struct BackwardSignature {
    Signature args, results;
    SmallVector<unsigned> xArg, vseqArg, v0Arg, pArg, savedArg, gyArg, gstArg;
    SmallVector<unsigned> gyIndex, gstIndex, accParams;
    SmallVector<Type> scanResultTypes;
    SmallVector<int64_t> sums;
  };
  BackwardSignature backwardSignature();
  FailureOr<std::pair<Value, int64_t>>
  nclSourceOf(ValueRange a, const BackwardSignature &sig);
  LogicalResult simplifyBackward(func::FuncOp bwd);
  FailureOr<func::FuncOp> buildBackward();
  LogicalResult buildBackwardBody(Block &body, ArrayRef<Value> ins,
                                  ArrayRef<Value> saved, ArrayRef<Value> gy,
                                  ArrayRef<Value> gseq, ArrayRef<Value> lagged,
                                  ArrayRef<Value> carries,
                                  ArrayRef<Value> accs, ArrayRef<Value> params);

  RankedTensorType seqType(Type elt) {
    return RankedTensorType::get({tDim, nclDim}, elt);
  }
  RankedTensorType perNeuronType(Type elt) {
    return RankedTensorType::get({nclDim}, elt);
  }

  ScanOp scan;
  func::FuncOp func;
  Operation *lastCreated = nullptr;
  MLIRContext *ctx;
  const llvm::StringSet<> &saveOps;
  /// Choose the saved values (a minimum cut) and build the final-state pair.
  bool autoSave;
  /// Building @f_forward_final / @f_backward_final: the forward writes final
  /// states, the backward takes their gradients.
  bool finalPair = false;
  /// The states whose sequences the backward reads: the final-state pair's
  /// forward writes these as well, after its saved values.
  llvm::BitVector finalSeqs;
  Type computeType;
  int64_t tDim = ShapedType::kDynamic, nclDim = ShapedType::kDynamic;
  /// Body ops whose result the forward saves, in body order.
  SmallVector<Operation *> savedOps;
  /// Of those, the ones the IR asks for (flexsn.save, save-ops by name).
  llvm::SmallPtrSet<Operation *, 8> forcedSaves;
  /// Requires-grad of each input, state, param; grad given for each output
  /// and state result.
  llvm::BitVector gradInput, gradState, gradParam, gradOutput, gradStateResult;
};

LogicalResult Differentiator::analyze() {
  if (scan.getReverse())
    return scan.emitOpError("cannot be differentiated: it runs backwards in "
                            "time (reverse); only forward-time scans are");
  if (scan.getNumLagged() || scan.getSumStates())
    return scan.emitOpError("cannot be differentiated: lagged operands and "
                            "sum_states belong to generated backward scans");
  computeType = scan.getComputeType();
  for (Value v : llvm::concat<Value>(scan.getInputs(), scan.getResults())) {
    auto t = cast<RankedTensorType>(v.getType());
    if (t.getRank() == 2 && !ShapedType::isDynamic(t.getDimSize(0)))
      tDim = t.getDimSize(0);
  }
  for (Value v : scan->getOperands())
    if (auto t = dyn_cast<RankedTensorType>(v.getType()))
      if (!ShapedType::isDynamic(t.getDimSize(t.getRank() - 1)))
        nclDim = t.getDimSize(t.getRank() - 1);

  // Requires-grad from the function's argument and result attributes.
  auto argWantsGrad = [&](Value operand) {
    auto arg = cast<BlockArgument>(operand);
    return !func.getArgAttr(arg.getArgNumber(), kNoGradAttr);
  };
  gradInput.resize(scan.getNumInputs());
  gradState.resize(scan.getNumStates());
  gradParam.resize(scan.getNumParams());
  for (auto [i, v] : llvm::enumerate(scan.getInputs()))
    gradInput[i] = argWantsGrad(v);
  for (auto [i, v] : llvm::enumerate(scan.getInitStates()))
    gradState[i] = argWantsGrad(v);
  for (auto [i, v] : llvm::enumerate(scan.getParams()))
    gradParam[i] = argWantsGrad(v);
  auto resultTakesGrad = [&](Value result) {
    for (OpOperand &use : result.getUses())
      if (auto ret = dyn_cast<func::ReturnOp>(use.getOwner()))
        if (!func.getResultAttr(use.getOperandNumber(), kNoGradAttr))
          return true;
    return false;
  };
  gradOutput.resize(scan.getNumOutputs());
  gradStateResult.resize(scan.getNumStates());
  for (auto [i, r] : llvm::enumerate(scan.getOutputResults()))
    gradOutput[i] = resultTakesGrad(r);
  for (auto [i, r] : llvm::enumerate(scan.getStateResults()))
    gradStateResult[i] = resultTakesGrad(r);

  // Saved intermediates and adjoint rules.
  for (Operation &op : scan.getBodyBlock().without_terminator()) {
    bool save = op.hasAttr(kSaveAttr) ||
                saveOps.contains(op.getName().getStringRef());
    if (save) {
      if (op.getNumResults() != 1 ||
          op.getResult(0).getType() != computeType)
        return op.emitOpError() << "cannot be saved for the backward: only "
                                   "ops with one result of the compute type "
                                << computeType << " can";
      savedOps.push_back(&op);
      forcedSaves.insert(&op);
    }
    // Ops with only integer results carry no gradient and need no rule.
    bool floatResult = llvm::any_of(op.getResultTypes(), [](Type t) {
      return isa<FloatType>(t);
    });
    if (floatResult && !isa<AdjointOpInterface>(op))
      return op.emitOpError()
             << "has no adjoint rule, so the scan cannot be differentiated";
  }
  return success();
}

/// The bytes a step of state `i`'s sequence costs the cut: its storage
/// outside chunk borders (flexsn.state_storage) where the scan names one,
/// else its type's.
static int64_t stateSeqBytes(ScanOp scan, unsigned i) {
  Type t = getElementTypeOrSelf(scan.getInitStates()[i].getType());
  if (auto storage = scan->getAttrOfType<TypeAttr>(kStateStorageAttr))
    t = storage.getValue();
  return t.getIntOrFloatBitWidth() / 8;
}

/// The `auto` policy. What the backward's adjoint reads of the step (its
/// "needs") must come from the forward: read (an input: its bytes; a state:
/// a sequence the forward writes and the backward reads), saved (a
/// compute-type sequence written and read), or recomputed from such values,
/// which costs no memory traffic. The cheapest choice is a minimum s-t cut
/// of the step's dataflow graph in which each value is an in node and an
/// out node joined by an edge of its cost; the source feeds the inputs and
/// states, the needs drain to the sink. Ties go to the leaves (the cut
/// nearest the source), i.e. to rematerialization.
LogicalResult Differentiator::chooseSaves() {
  Block &primal = scan.getBodyBlock();
  // An op with regions could read values the dataflow edges below miss.
  for (Operation &op : primal.without_terminator())
    if (op.getNumRegions())
      return success();
  FailureOr<llvm::DenseSet<Value>> needs = findNeeds();
  if (failed(needs))
    return failure();

  // With no state in the cut the final-state pair writes no state
  // sequence; else every sequence is written and read where cut. The
  // cheaper choice wins; a tie keeps the sequences (rematerialization).
  FailureOr<SaveCut> noSeqs = minimumSaveCut(*needs, 2),
                     seqs = minimumSaveCut(*needs, 1);
  if (failed(noSeqs) || failed(seqs))
    return failure();
  int64_t seqWrites = 0;
  for (unsigned i = 0; i < scan.getNumStates(); ++i)
    seqWrites += stateSeqBytes(scan, i);
  const SaveCut &best =
      !noSeqs->hasState && noSeqs->cost < seqs->cost + seqWrites ? *noSeqs
                                                                 : *seqs;

  // The cut's op results are saved (in body order); its leaves are read.
  llvm::SmallPtrSet<Operation *, 8> chosen(forcedSaves.begin(),
                                           forcedSaves.end());
  for (Value v : best.values)
    if (Operation *op = v.getDefiningOp())
      chosen.insert(op);
  savedOps.clear();
  for (Operation &op : primal.without_terminator())
    if (chosen.contains(&op))
      savedOps.push_back(&op);
  return success();
}

/// The needs: the adjoint sweep is built in a scratch function and walked
/// back from the gradients the backward yields through the adjoint ops;
/// every recomputed step value or leaf they read is a need.
FailureOr<llvm::DenseSet<Value>> Differentiator::findNeeds() {
  Block &primal = scan.getBodyBlock();
  unsigned numIn = scan.getNumInputs(), numSt = scan.getNumStates(),
           numPa = scan.getNumParams(), numOut = scan.getNumOutputs();
  Location loc = scan.getLoc();
  OpBuilder tb(ctx);
  auto scratch = func::FuncOp::create(tb, loc, "__flexsn_needs",
                                      FunctionType::get(ctx, {}, {}));
  llvm::scope_exit eraseScratch([&] { scratch.erase(); });
  Block *blk = scratch.addEntryBlock();
  auto args = [&](unsigned n, const llvm::BitVector *present = nullptr) {
    SmallVector<Value> v;
    for (unsigned i = 0; i < n; ++i)
      v.push_back(!present || (*present)[i]
                      ? Value(blk->addArgument(computeType, loc))
                      : Value());
    return v;
  };
  SmallVector<Value> ins = args(numIn), lagged = args(numSt),
                     params = args(numPa), gy = args(numOut, &gradOutput);
  llvm::BitVector noSeq(numSt);
  SmallVector<Value> gseq =
      args(numSt, scan.getFinalStates() ? &noSeq : &gradStateResult);
  SmallVector<Value> carries = args(numSt);
  OpBuilder b = OpBuilder::atBlockEnd(blk);
  FailureOr<Sweep> sw = sweep(b, ins, gy, gseq, lagged, carries, params);
  if (failed(sw))
    return failure();

  llvm::DenseMap<Value, Value> toPrimal;
  for (auto [from, to] : llvm::zip_equal(scan.getInputArgs(), ins))
    toPrimal[to] = from;
  for (auto [from, to] : llvm::zip_equal(scan.getStateArgs(), lagged))
    toPrimal[to] = from;
  for (auto [from, to] : llvm::zip_equal(scan.getParamArgs(), params))
    toPrimal[to] = from;
  llvm::DenseMap<Operation *, Operation *> primalOf;
  for (auto [op, clone] : llvm::zip_equal(primal.without_terminator(),
                                          sw->clones))
    primalOf[clone] = &op;
  llvm::DenseSet<Value> needs;
  llvm::DenseSet<Operation *> seen;
  SmallVector<Operation *> work;
  auto visit = [&](Value v) {
    if (!v)
      return;
    if (Value leaf = toPrimal.lookup(v)) {
      needs.insert(leaf);
      return;
    }
    Operation *def = v.getDefiningOp();
    if (!def)
      return; // a gradient argument
    if (Operation *op = primalOf.lookup(def)) {
      needs.insert(op->getResult(cast<OpResult>(v).getResultNumber()));
      return;
    }
    if (seen.insert(def).second)
      work.push_back(def);
  };
  for (auto [i, x] : llvm::enumerate(ins))
    if (gradInput[i])
      visit(sw->adj.lookup(x));
  for (Value v : lagged)
    visit(sw->adj.lookup(v));
  for (auto [i, p] : llvm::enumerate(params))
    if (gradParam[i])
      visit(sw->adj.lookup(p));
  while (!work.empty())
    for (Value operand : work.pop_back_val()->getOperands())
      visit(operand);
  return needs;
}

/// A minimum cut between the leaves and `needs` for a given cost of a
/// state (`stateReads`: 1 when the forward writes the state sequences
/// anyway, 2 when a cut without states lets the final-state pair write
/// none): value k has in node 2k and out node 2k + 1.
FailureOr<Differentiator::SaveCut>
Differentiator::minimumSaveCut(const llvm::DenseSet<Value> &needs,
                               int64_t stateReads) {
  Block &primal = scan.getBodyBlock();
  llvm::DenseMap<Value, unsigned> id;
  SmallVector<Value> values;
  auto number = [&](Value v) {
    id[v] = values.size();
    values.push_back(v);
  };
  for (BlockArgument a : primal.getArguments())
    number(a);
  for (Operation &op : primal.without_terminator())
    for (Value r : op.getResults())
      number(r);
  constexpr int64_t inf = MinCut::kInfinite;
  auto bytes = [](Type t) -> int64_t {
    return getElementTypeOrSelf(t).getIntOrFloatBitWidth() / 8;
  };
  unsigned source = 2 * values.size(), sink = source + 1;
  MinCut graph(sink + 1);
  for (auto [i, a] : llvm::enumerate(scan.getInputArgs())) {
    graph.addEdge(source, 2 * id[a], inf);
    graph.addEdge(2 * id[a], 2 * id[a] + 1,
                  bytes(scan.getInputs()[i].getType()));
  }
  for (auto [i, a] : llvm::enumerate(scan.getStateArgs())) {
    graph.addEdge(source, 2 * id[a], inf);
    graph.addEdge(2 * id[a], 2 * id[a] + 1,
                  stateReads * stateSeqBytes(scan, i));
  }
  // Params are read by both scans anyway: free, never cut.
  for (Value a : scan.getParamArgs())
    graph.addEdge(2 * id[a], 2 * id[a] + 1, inf);
  for (Operation &op : primal.without_terminator()) {
    bool saveable =
        op.getNumResults() == 1 && op.getResult(0).getType() == computeType;
    int64_t cost = forcedSaves.contains(&op) ? 0
                   : saveable               ? 2 * bytes(computeType)
                                            : inf;
    for (Value r : op.getResults()) {
      graph.addEdge(2 * id[r], 2 * id[r] + 1, cost);
      for (Value operand : op.getOperands())
        if (id.count(operand))
          graph.addEdge(2 * id[operand] + 1, 2 * id[r], inf);
    }
  }
  for (Value v : needs)
    graph.addEdge(2 * id[v] + 1, sink, inf);
  // Every path crosses a leaf's finite edge, so a cut always exists.
  if (!graph.solve(source, sink))
    return (LogicalResult)scan.emitOpError(
        "auto saving policy: a need with no finite cut");
  SaveCut cut;
  for (auto [k, v] : llvm::enumerate(values)) {
    if (!graph.onSourceSide(2 * k) || graph.onSourceSide(2 * k + 1))
      continue;
    cut.values.push_back(v);
    cut.cost += graph.getCapacity(2 * k, 2 * k + 1);
    cut.hasState |= llvm::is_contained(scan.getStateArgs(), v);
  }
  return cut;
}

func::FuncOp Differentiator::createFunc(StringRef suffix, StringRef kind,
                                        const Signature &args,
                                        const Signature &results) {
  OpBuilder b(ctx);
  b.setInsertionPointAfter(lastCreated ? lastCreated : func.getOperation());
  auto fn = func::FuncOp::create(
      b, func.getLoc(), (func.getSymName() + suffix).str(),
      FunctionType::get(ctx, args.types(), results.types()));
  fn->setAttr(kKernelKindAttr, b.getStringAttr(kind));
  fn->setAttr(kPrimalAttr, FlatSymbolRefAttr::get(func.getSymNameAttr()));
  fn.addEntryBlock();
  setRoles(fn, args, results);
  lastCreated = fn;
  return fn;
}

void Differentiator::buildForward() {
  Signature args, results;
  for (auto [i, v] : llvm::enumerate(scan.getInputs()))
    args.add(v.getType(), ArgMeaning::Input, i);
  for (auto [i, v] : llvm::enumerate(scan.getInitStates()))
    args.add(v.getType(), ArgMeaning::InitState, i);
  for (auto [i, v] : llvm::enumerate(scan.getParams()))
    args.add(v.getType(), ArgMeaning::Param, i);
  for (auto [i, r] : llvm::enumerate(scan.getOutputResults()))
    results.add(r.getType(), ArgMeaning::Output, i);
  for (auto [i, v] : llvm::enumerate(scan.getInitStates())) {
    if (finalPair)
      results.add(v.getType(), ArgMeaning::FinalState, i);
    else
      results.add(
          seqType(cast<RankedTensorType>(v.getType()).getElementType()),
          ArgMeaning::StateSeq, i);
  }
  for (unsigned k = 0; k < savedOps.size(); ++k)
    results.add(seqType(computeType), ArgMeaning::Saved, k);
  SmallVector<unsigned> seqStates;
  if (finalPair)
    for (unsigned i : finalSeqs.set_bits()) {
      seqStates.push_back(i);
      auto state = cast<RankedTensorType>(scan.getInitStates()[i].getType());
      results.add(seqType(state.getElementType()), ArgMeaning::StateSeq, i);
    }

  func::FuncOp fwd = createFunc(finalPair ? "_forward_final" : "_forward",
                                "forward", args, results);
  Block &entry = fwd.getBody().front();
  OpBuilder b = OpBuilder::atBlockBegin(&entry);
  ValueRange a = entry.getArguments();
  unsigned numIn = scan.getNumInputs(), numSt = scan.getNumStates(),
           numOut = scan.getNumOutputs(), numSaved = savedOps.size(),
           numSeq = seqStates.size();
  // The scan's results are its outputs (the primal's, the saved values,
  // then, in the final-state pair, the state sequences the backward reads,
  // as outputs: its states give final states) followed by its states; the
  // function returns outputs, state results, saved values, those sequences.
  SmallVector<Type> types = results.types();
  SmallVector<Type> scanTypes(ArrayRef<Type>(types).take_front(numOut));
  llvm::append_range(scanTypes, ArrayRef<Type>(types).slice(
                                    numOut + numSt, numSaved + numSeq));
  llvm::append_range(scanTypes, ArrayRef<Type>(types).slice(numOut, numSt));
  auto newScan = ScanOp::create(
      b, scan.getLoc(), scanTypes, a.take_front(numIn), ValueRange{},
      ValueRange{}, a.slice(numIn, numSt), a.drop_front(numIn + numSt),
      /*reverse=*/UnitAttr(),
      /*final_states=*/finalPair ? b.getUnitAttr() : UnitAttr(),
      DenseI64ArrayAttr());
  if (Attribute chunk = scan->getAttr(kChunkWidthAttr))
    newScan->setAttr(kChunkWidthAttr, chunk);
  IRMapping map;
  scan.getBody().cloneInto(&newScan.getBody(), map);
  YieldOp yield = newScan.getYield();
  SmallVector<Value> values(yield.getValues().take_front(numOut));
  for (Operation *op : savedOps)
    values.push_back(map.lookup(op->getResult(0)));
  // A state's new value, stored as an output, is what its sequence holds.
  for (unsigned i : seqStates)
    values.push_back(yield.getValues()[numOut + i]);
  llvm::append_range(values, yield.getValues().drop_front(numOut));
  b.setInsertionPoint(yield);
  YieldOp::create(b, yield.getLoc(), values);
  yield.erase();
  b.setInsertionPointToEnd(&entry);
  ResultRange r = newScan.getResults();
  SmallVector<Value> ret(r.take_front(numOut));
  llvm::append_range(ret, r.take_back(numSt));
  llvm::append_range(ret, r.slice(numOut, numSaved + numSeq));
  func::ReturnOp::create(b, scan.getLoc(), ret);
}

Differentiator::BackwardSignature Differentiator::backwardSignature() {
  unsigned numSt = scan.getNumStates();
  bool primalFinal = scan.getFinalStates() || finalPair;
  BackwardSignature sig;
  for (auto [i, v] : llvm::enumerate(scan.getInputs()))
    sig.xArg.push_back(sig.args.add(v.getType(), ArgMeaning::Input, i));
  for (auto [i, v] : llvm::enumerate(scan.getInitStates()))
    sig.vseqArg.push_back(sig.args.add(
        seqType(cast<RankedTensorType>(v.getType()).getElementType()),
        ArgMeaning::StateSeq, i));
  for (auto [i, v] : llvm::enumerate(scan.getInitStates()))
    sig.v0Arg.push_back(sig.args.add(v.getType(), ArgMeaning::InitState, i));
  for (auto [i, v] : llvm::enumerate(scan.getParams()))
    sig.pArg.push_back(sig.args.add(v.getType(), ArgMeaning::Param, i));
  for (unsigned k = 0; k < savedOps.size(); ++k)
    sig.savedArg.push_back(
        sig.args.add(seqType(computeType), ArgMeaning::Saved, k));
  for (auto [i, r] : llvm::enumerate(scan.getOutputResults()))
    if (gradOutput[i]) {
      sig.gyArg.push_back(sig.args.add(r.getType(), ArgMeaning::GradOutput, i));
      sig.gyIndex.push_back(i);
    }
  for (auto [i, r] : llvm::enumerate(scan.getStateResults()))
    if (gradStateResult[i]) {
      Type type = finalPair ? scan.getInitStates()[i].getType() : r.getType();
      sig.gstArg.push_back(sig.args.add(
          type,
          primalFinal ? ArgMeaning::GradFinalState : ArgMeaning::GradStateSeq,
          i));
      sig.gstIndex.push_back(i);
    }

  // Results, and the backward scan's result types in scan order: grad
  // inputs (outputs of the scan), then carries (one per state), then param
  // accumulators.
  for (auto [i, v] : llvm::enumerate(scan.getInputs()))
    if (gradInput[i]) {
      sig.results.add(v.getType(), ArgMeaning::GradInput, i);
      sig.scanResultTypes.push_back(v.getType());
    }
  for (auto [i, v] : llvm::enumerate(scan.getInitStates())) {
    if (gradState[i])
      sig.results.add(v.getType(), ArgMeaning::GradInitState, i);
    sig.scanResultTypes.push_back(v.getType());
  }
  for (auto [i, v] : llvm::enumerate(scan.getParams())) {
    if (!gradParam[i])
      continue;
    Type t = scan.isPerNeuronParam(i) ? v.getType()
                                      : RankedTensorType::get({}, computeType);
    if (!scan.isPerNeuronParam(i))
      sig.sums.push_back(numSt + sig.accParams.size());
    sig.results.add(t, ArgMeaning::GradParam, i);
    sig.scanResultTypes.push_back(t);
    sig.accParams.push_back(i);
  }

  return sig;
}

/// Where the backward reads NCL at run time (for its zero-initialized
/// carries and accumulators): a tensor and the dimension that holds it.
FailureOr<std::pair<Value, int64_t>>
Differentiator::nclSourceOf(ValueRange a, const BackwardSignature &sig) {
  Value nclSource;
  int64_t nclDimIdx = 0;
  unsigned numIn = scan.getNumInputs(), numSt = scan.getNumStates();
  if (numSt) {
    nclSource = a[sig.v0Arg[0]];
  } else if (numIn) {
    nclSource = a[sig.xArg[0]];
    nclDimIdx = 1;
  } else {
    // A scan of params alone (outputs depend only on params): a
    // per-neuron param gives NCL, else any [T, NCL] sequence the backward
    // reads (an output's gradient, a saved value).
    for (unsigned i : sig.pArg)
      if (isa<RankedTensorType>(a[i].getType()) && !nclSource)
        nclSource = a[i];
    for (ArrayRef<unsigned> seqs : {ArrayRef<unsigned>(sig.gyArg),
                                    ArrayRef<unsigned>(sig.gstArg),
                                    ArrayRef<unsigned>(sig.savedArg)})
      for (unsigned i : seqs)
        if (!nclSource &&
            cast<RankedTensorType>(a[i].getType()).getRank() == 2) {
          nclSource = a[i];
          nclDimIdx = 1;
        }
    if (!nclSource)
      return scan.emitOpError("cannot be differentiated: it reads no input, "
                              "no state and no per-neuron param, and no "
                              "result takes a gradient, so nothing gives the "
                              "number of neurons");
  }
  return std::make_pair(nclSource, nclDimIdx);
}

/// Drops what no gradient reaches from `bwd`, then its unused arguments.
LogicalResult Differentiator::simplifyBackward(func::FuncOp bwd) {
  RewritePatternSet patterns(ctx);
  for (Dialect *dialect : ctx->getLoadedDialects())
    dialect->getCanonicalizationPatterns(patterns);
  for (RegisteredOperationName op : ctx->getRegisteredOperations())
    op.getCanonicalizationPatterns(patterns, ctx);
  if (failed(applyPatternsGreedily(bwd, std::move(patterns))))
    return bwd.emitOpError(
        "backward simplification did not converge");
  llvm::BitVector unused(bwd.getNumArguments());
  for (BlockArgument arg : bwd.getArguments())
    unused[arg.getArgNumber()] = arg.use_empty();
  return bwd.eraseArguments(unused);
}

FailureOr<func::FuncOp> Differentiator::buildBackward() {
  unsigned numIn = scan.getNumInputs(), numSt = scan.getNumStates(),
           numPa = scan.getNumParams(), numOut = scan.getNumOutputs();
  bool primalFinal = scan.getFinalStates() || finalPair;
  BackwardSignature sig = backwardSignature();
  func::FuncOp bwd = createFunc(finalPair ? "_backward_final" : "_backward",
                                "backward", sig.args, sig.results);
  Block &entry = bwd.getBody().front();
  OpBuilder b = OpBuilder::atBlockBegin(&entry);
  Location loc = scan.getLoc();
  ValueRange a = entry.getArguments();
  auto pick = [&](ArrayRef<unsigned> idx) {
    return llvm::map_to_vector(idx, [&](unsigned i) { return a[i]; });
  };

  FailureOr<std::pair<Value, int64_t>> nclAt = nclSourceOf(a, sig);
  if (failed(nclAt))
    return failure();
  Value nclSource = nclAt->first;
  int64_t nclDimIdx = nclAt->second;
  Value ncl;
  auto zeros = [&](Type tensorType) -> Value {
    auto t = cast<RankedTensorType>(tensorType);
    Value zero = arith::ConstantOp::create(
        b, loc, b.getFloatAttr(computeType, 0.0));
    if (t.getElementType() != computeType)
      zero = arith::ConstantOp::create(
          b, loc, b.getFloatAttr(t.getElementType(), 0.0));
    SmallVector<Value> dyn;
    if (ShapedType::isDynamic(t.getDimSize(0))) {
      if (!ncl)
        ncl = tensor::DimOp::create(b, loc, nclSource, nclDimIdx);
      dyn.push_back(ncl);
    }
    return tensor::SplatOp::create(b, loc, t, zero, dyn);
  };

  SmallVector<Value> ins = pick(sig.xArg);
  SmallVector<Value> savedVals = pick(sig.savedArg);
  SmallVector<Value> gyVals = pick(sig.gyArg);
  SmallVector<Value> gseqVals, carryInit(numSt);
  for (auto [k, s] : llvm::enumerate(sig.gstIndex)) {
    if (primalFinal)
      carryInit[s] = a[sig.gstArg[k]];
    else
      gseqVals.push_back(a[sig.gstArg[k]]);
  }
  for (unsigned s = 0; s < numSt; ++s)
    if (!carryInit[s])
      carryInit[s] = zeros(scan.getInitStates()[s].getType());
  SmallVector<Value> accInit;
  for (unsigned i : sig.accParams)
    accInit.push_back(
        zeros(scan.isPerNeuronParam(i) ? scan.getParams()[i].getType()
                                       : perNeuronType(computeType)));

  SmallVector<Value> scanIns;
  llvm::append_range(scanIns, ins);
  llvm::append_range(scanIns, savedVals);
  llvm::append_range(scanIns, gyVals);
  llvm::append_range(scanIns, gseqVals);
  SmallVector<Value> states(carryInit);
  llvm::append_range(states, accInit);
  auto bscan = ScanOp::create(
      b, loc, sig.scanResultTypes, scanIns, pick(sig.vseqArg),
      pick(sig.v0Arg), states, pick(sig.pArg), /*reverse=*/b.getUnitAttr(),
      /*final_states=*/b.getUnitAttr(),
      sig.sums.empty() ? DenseI64ArrayAttr()
                       : b.getDenseI64ArrayAttr(sig.sums));
  if (Attribute chunk = scan->getAttr(kChunkWidthAttr))
    bscan->setAttr(kChunkWidthAttr, chunk);
  Block *body = b.createBlock(&bscan.getBody());
  unsigned numBodyArgs = scanIns.size() + numSt + states.size() + numPa;
  for (unsigned i = 0; i < numBodyArgs; ++i)
    body->addArgument(computeType, loc);
  ValueRange ba = body->getArguments();
  unsigned off = 0;
  auto take = [&](unsigned n) {
    SmallVector<Value> v(ba.slice(off, n));
    off += n;
    return v;
  };
  SmallVector<Value> bx = take(numIn), bsaved = take(savedOps.size()),
                     bgy = take(gyVals.size()), bgseq = take(gseqVals.size()),
                     blag = take(numSt), bcarry = take(numSt),
                     bacc = take(accInit.size()), bp = take(numPa);
  // Map the grad-seq block sig.args to their state index.
  SmallVector<Value> gseqByState(numSt), gyByOutput(numOut);
  if (!primalFinal)
    for (auto [k, s] : llvm::enumerate(sig.gstIndex))
      gseqByState[s] = bgseq[k];
  for (auto [k, o] : llvm::enumerate(sig.gyIndex))
    gyByOutput[o] = bgy[k];
  if (failed(buildBackwardBody(*body, bx, bsaved, gyByOutput, gseqByState,
                               blag, bcarry, bacc, bp)))
    return failure();

  // Return what requires a gradient.
  SmallVector<Value> ret;
  // The scan's sig.results: grad inputs, one carry per state, accumulators.
  unsigned numGx = gradInput.count();
  llvm::append_range(ret, bscan.getResults().take_front(numGx));
  for (unsigned s = 0; s < numSt; ++s)
    if (gradState[s])
      ret.push_back(bscan.getResult(numGx + s));
  llvm::append_range(ret, bscan.getResults().drop_front(numGx + numSt));
  b.setInsertionPointToEnd(&entry);
  func::ReturnOp::create(b, loc, ret);

  if (failed(simplifyBackward(bwd)))
    return failure();
  return bwd;
}

LogicalResult Differentiator::buildBackwardBody(
    Block &body, ArrayRef<Value> ins, ArrayRef<Value> saved,
    ArrayRef<Value> gy, ArrayRef<Value> gseq, ArrayRef<Value> lagged,
    ArrayRef<Value> carries, ArrayRef<Value> accs, ArrayRef<Value> params) {
  OpBuilder b = OpBuilder::atBlockEnd(&body);
  Location loc = scan.getLoc();
  FailureOr<Sweep> swept = sweep(b, ins, gy, gseq, lagged, carries, params);
  if (failed(swept))
    return failure();
  IRMapping &map = swept->map;
  llvm::DenseMap<Value, Value> &adj = swept->adj;

  // 4. Saved intermediates replace their recomputation everywhere.
  for (auto [op, value] : llvm::zip_equal(savedOps, saved))
    map.lookup(op->getResult(0)).replaceAllUsesWith(value);

  // 5. Yield grad inputs, carries (grad of the state before the step), and
  //    accumulated param grads.
  auto orZero = [&](Value v) -> Value {
    return v ? v
             : arith::ConstantOp::create(b, loc,
                                         b.getFloatAttr(computeType, 0.0))
                   .getResult();
  };
  SmallVector<Value> values;
  for (auto [i, x] : llvm::enumerate(ins))
    if (gradInput[i])
      values.push_back(orZero(adj.lookup(x)));
  for (Value v : lagged)
    values.push_back(orZero(adj.lookup(v)));
  unsigned k = 0;
  for (auto [i, p] : llvm::enumerate(params)) {
    if (!gradParam[i])
      continue;
    Value g = adj.lookup(p);
    values.push_back(g ? arith::AddFOp::create(b, loc, accs[k], g).getResult()
                       : accs[k]);
    ++k;
  }
  YieldOp::create(b, loc, values);
  return success();
}

FailureOr<Differentiator::Sweep>
Differentiator::sweep(OpBuilder &b, ArrayRef<Value> ins, ArrayRef<Value> gy,
                      ArrayRef<Value> gseq, ArrayRef<Value> lagged,
                      ArrayRef<Value> carries, ArrayRef<Value> params) {
  Location loc = scan.getLoc();
  Sweep result;
  IRMapping &map = result.map;
  // 1. Recompute the step from x_t and the state before it.
  for (auto [from, to] : llvm::zip_equal(scan.getInputArgs(), ins))
    map.map(from, to);
  for (auto [from, to] : llvm::zip_equal(scan.getStateArgs(), lagged))
    map.map(from, to);
  for (auto [from, to] : llvm::zip_equal(scan.getParamArgs(), params))
    map.map(from, to);
  SmallVector<Operation *> &clones = result.clones;
  for (Operation &op : scan.getBodyBlock().without_terminator())
    clones.push_back(b.clone(op, map));

  // 2. Seed the adjoints of the yielded values.
  llvm::DenseMap<Value, Value> &adj = result.adj;
  auto accumulate = [&](Value v, Value g) {
    if (!g || !isa<FloatType>(v.getType()))
      return;
    Value &slot = adj[v];
    slot = slot ? arith::AddFOp::create(b, loc, slot, g).getResult() : g;
  };
  YieldOp yield = scan.getYield();
  unsigned numOut = scan.getNumOutputs();
  for (auto [o, g] : llvm::enumerate(gy))
    accumulate(map.lookupOrDefault(yield.getValues()[o]), g);
  for (unsigned s = 0; s < scan.getNumStates(); ++s) {
    Value seed = carries[s];
    if (gseq[s])
      seed = arith::AddFOp::create(b, loc, seed, gseq[s]);
    accumulate(map.lookupOrDefault(yield.getValues()[numOut + s]), seed);
  }

  // 3. Sweep the recomputed ops in reverse.
  for (Operation *op : llvm::reverse(clones)) {
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value r : op->getResults()) {
      resultGrads.push_back(adj.lookup(r));
      any |= static_cast<bool>(resultGrads.back());
    }
    if (!any)
      continue;
    SmallVector<Value> operandGrads;
    // Only float results are seeded, and analyze() checked that every op
    // with a float result has a rule.
    if (failed(cast<AdjointOpInterface>(op).buildAdjoint(b, resultGrads,
                                                         operandGrads)))
      return failure();
    for (auto [operand, g] : llvm::zip(op->getOperands(), operandGrads))
      accumulate(operand, g);
  }
  return result;
}

LogicalResult Differentiator::run() {
  if (failed(verifyKernelForm(scan)) || failed(analyze()))
    return failure();
  ModuleOp module = func->getParentOfType<ModuleOp>();
  SmallVector<StringRef> suffixes{"_forward", "_backward"};
  if (autoSave)
    suffixes.append({"_forward_final", "_backward_final"});
  for (StringRef suffix : suffixes) {
    std::string name = (func.getSymName() + suffix).str();
    if (SymbolTable::lookupSymbolIn(module, name))
      return func.emitOpError() << "cannot be differentiated: a symbol named '"
                                << name << "' already exists";
  }
  // Nothing requires a gradient: no backward to build (not an empty one).
  bool anyGrad = gradInput.any() || gradState.any() || gradParam.any();
  if (autoSave && anyGrad && failed(chooseSaves()))
    return failure();
  buildForward();
  if (!anyGrad)
    return success();
  FailureOr<func::FuncOp> bwd = buildBackward();
  if (failed(bwd))
    return failure();
  // The final-state pair: its forward writes final states, and the state
  // sequences only where the backward reads them; its backward takes the
  // final states' gradients ([NCL], not [T, NCL] rows of zeros).
  if (!autoSave || scan.getFinalStates() || !scan.getNumStates())
    return success();
  StringRef seqRole = stringifyArgMeaning(ArgMeaning::StateSeq);
  finalSeqs = llvm::BitVector(scan.getNumStates());
  for (unsigned i = 0, e = bwd->getNumArguments(); i < e; ++i)
    if (auto role = bwd->getArgAttrOfType<StringAttr>(i, kRoleAttr))
      if (role.getValue() == seqRole)
        finalSeqs.set(
            bwd->getArgAttrOfType<IntegerAttr>(i, kIndexAttr).getInt());
  finalPair = true;
  buildForward();
  return buildBackward();
}

struct FlexSNDifferentiatePass
    : public mlir::flexsn::impl::FlexSNDifferentiateBase<
          FlexSNDifferentiatePass> {
  using Base::Base;
  void runOnOperation() override {
    llvm::StringSet<> saveSet;
    bool autoSave = false;
    for (const std::string &name : saveOps) {
      if (name == "auto") {
        autoSave = true;
        continue;
      }
      if (!RegisteredOperationName::lookup(name, &getContext())) {
        getOperation()->emitError()
            << "save-ops names '" << name
            << "', which is neither 'auto' nor a registered operation (e.g. "
               "math.exp, flexsn.spike)";
        return signalPassFailure();
      }
      saveSet.insert(name);
    }
    SmallVector<ScanOp> scans;
    getOperation().walk([&](ScanOp scan) {
      auto func = scan->getParentOfType<func::FuncOp>();
      if (!func || !func->hasAttr(kKernelKindAttr))
        scans.push_back(scan);
    });
    for (ScanOp scan : scans)
      if (failed(Differentiator(scan, saveSet, autoSave).run()))
        return signalPassFailure();
  }
};
} // namespace
