//===- ScanKernel.cpp - Kernel ABI and body emission for scans ------------===//

#include "flexsn/Conversion/ScanKernel.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::flexsn;

//===----------------------------------------------------------------------===//
// Names
//===----------------------------------------------------------------------===//

StringRef mlir::flexsn::stringifyKernelVariant(KernelVariant variant) {
  switch (variant) {
  case KernelVariant::Inference:
    return "inference";
  case KernelVariant::FinalState:
    return "final_state";
  }
  llvm_unreachable("unknown variant");
}

std::optional<KernelVariant>
mlir::flexsn::symbolizeKernelVariant(StringRef name) {
  for (KernelVariant v : getAllKernelVariants())
    if (stringifyKernelVariant(v) == name)
      return v;
  return std::nullopt;
}

ArrayRef<KernelVariant> mlir::flexsn::getAllKernelVariants() {
  static const KernelVariant all[] = {KernelVariant::Inference,
                                      KernelVariant::FinalState};
  return all;
}

StringRef mlir::flexsn::stringifyKernelArgRole(KernelArgRole role) {
  switch (role) {
  case KernelArgRole::Input:
    return "input";
  case KernelArgRole::Lagged:
    return "lagged";
  case KernelArgRole::LaggedInit:
    return "lagged_init";
  case KernelArgRole::InitState:
    return "init_state";
  case KernelArgRole::Param:
    return "param";
  case KernelArgRole::ParamScalar:
    return "param_scalar";
  case KernelArgRole::Output:
    return "output";
  case KernelArgRole::StateSeq:
    return "state_seq";
  case KernelArgRole::FinalState:
    return "final_state";
  case KernelArgRole::SumState:
    return "sum_state";
  case KernelArgRole::T:
    return "T";
  case KernelArgRole::NCL:
    return "NCL";
  case KernelArgRole::Begin:
    return "begin";
  case KernelArgRole::End:
    return "end";
  }
  llvm_unreachable("unknown role");
}

bool KernelArg::isPointer() const {
  return role != KernelArgRole::T && role != KernelArgRole::NCL &&
         role != KernelArgRole::Begin && role != KernelArgRole::End;
}

//===----------------------------------------------------------------------===//
// ABI
//===----------------------------------------------------------------------===//

std::optional<double> mlir::flexsn::getConstantInitState(ScanOp scan,
                                                         unsigned i) {
  auto splat = scan.getInitStates()[i].getDefiningOp<tensor::SplatOp>();
  FloatAttr value;
  if (!splat || !matchPattern(splat.getInput(), m_Constant(&value)))
    return std::nullopt;
  return value.getValueAsDouble();
}

SmallVector<KernelArg> mlir::flexsn::getKernelABI(ScanOp scan,
                                                  KernelVariant variant,
                                                  bool cpu) {
  SmallVector<KernelArg> abi;
  Type i64 = IntegerType::get(scan.getContext(), 64);
  auto add = [&](KernelArgRole role, unsigned i, Value v) {
    abi.push_back({role, i, getElementTypeOrSelf(v.getType())});
  };
  for (auto [i, v] : llvm::enumerate(scan.getInputs()))
    add(KernelArgRole::Input, i, v);
  for (auto [i, v] : llvm::enumerate(scan.getLagged()))
    add(KernelArgRole::Lagged, i, v);
  for (auto [i, v] : llvm::enumerate(scan.getLaggedInit()))
    add(KernelArgRole::LaggedInit, i, v);
  for (auto [i, v] : llvm::enumerate(scan.getInitStates()))
    if (!getConstantInitState(scan, i))
      add(KernelArgRole::InitState, i, v);
  for (auto [i, v] : llvm::enumerate(scan.getParams()))
    add(scan.isPerNeuronParam(i) ? KernelArgRole::Param
                                 : KernelArgRole::ParamScalar,
        i, v);
  for (auto [i, v] : llvm::enumerate(scan.getOutputResults()))
    if (!v.use_empty())
      add(KernelArgRole::Output, i, v);
  KernelArgRole stateRole = variant == KernelVariant::FinalState
                                ? KernelArgRole::FinalState
                                : KernelArgRole::StateSeq;
  for (auto [i, v] : llvm::enumerate(scan.getStateResults())) {
    if (v.use_empty())
      continue;
    if (scan.isSumState(i) && variant == KernelVariant::FinalState)
      // Sums over neurons accumulate in f64 across threads and blocks: the
      // error of an f32 running sum grows with NCL.
      abi.push_back({KernelArgRole::SumState, (unsigned)i,
                     Float64Type::get(scan.getContext())});
    else
      abi.push_back({stateRole, (unsigned)i,
                     getElementTypeOrSelf(scan.getInitStates()[i].getType())});
  }
  abi.push_back({KernelArgRole::T, 0, i64});
  abi.push_back({KernelArgRole::NCL, 0, i64});
  if (cpu) {
    abi.push_back({KernelArgRole::Begin, 0, i64});
    abi.push_back({KernelArgRole::End, 0, i64});
  }
  return abi;
}

ArgSource mlir::flexsn::getArgSource(ScanOp scan, const KernelArg &arg) {
  unsigned numIn = scan.getNumInputs(), numLa = scan.getNumLagged(),
           numSt = scan.getNumStates(), numOut = scan.getNumOutputs();
  switch (arg.role) {
  case KernelArgRole::Input:
    return {false, arg.index};
  case KernelArgRole::Lagged:
    return {false, numIn + arg.index};
  case KernelArgRole::LaggedInit:
    return {false, numIn + numLa + arg.index};
  case KernelArgRole::InitState:
    return {false, numIn + 2 * numLa + arg.index};
  case KernelArgRole::Param:
  case KernelArgRole::ParamScalar:
    return {false, numIn + 2 * numLa + numSt + arg.index};
  case KernelArgRole::Output:
    return {true, arg.index};
  default:
    assert(arg.isPointer() && "T/NCL/begin/end carry no scan value");
    return {true, numOut + arg.index};
  }
}

ArgMeaning mlir::flexsn::describeKernelArg(ScanOp scan, const KernelArg &arg) {
  ArgMeaning fallback{stringifyKernelArgRole(arg.role).str(), arg.index};
  auto func = dyn_cast<func::FuncOp>(scan->getParentOp());
  if (!func || !arg.isPointer())
    return fallback;
  auto fromAttrs = [&](DictionaryAttr attrs) {
    auto role = attrs ? attrs.getAs<StringAttr>(kRoleAttr) : StringAttr();
    auto index = attrs ? attrs.getAs<IntegerAttr>(kIndexAttr) : IntegerAttr();
    if (!role || !index)
      return fallback;
    return ArgMeaning{role.str(), static_cast<unsigned>(index.getInt())};
  };
  ArgSource source = getArgSource(scan, arg);
  if (!source.isResult) {
    auto blockArg = dyn_cast<BlockArgument>(scan->getOperand(source.number));
    if (!blockArg || blockArg.getOwner()->getParentOp() != func.getOperation())
      return fallback;
    return fromAttrs(func.getArgAttrDict(blockArg.getArgNumber()));
  }
  for (OpOperand &use : scan->getResult(source.number).getUses())
    if (isa<func::ReturnOp>(use.getOwner()))
      return fromAttrs(func.getResultAttrDict(use.getOperandNumber()));
  return fallback;
}

SmallVector<KernelSpec> mlir::flexsn::getKernelSpecs(ScanOp scan) {
  auto func = cast<func::FuncOp>(scan->getParentOp());
  if (auto kind = func->getAttrOfType<StringAttr>(kKernelKindAttr))
    return {{func.getSymName().str(),
             scan.getFinalStates() ? KernelVariant::FinalState
                                   : KernelVariant::Inference,
             kind.str()}};
  SmallVector<KernelSpec> specs;
  for (KernelVariant v : getAllKernelVariants())
    specs.push_back({getKernelName(func.getSymName(), v), v,
                     stringifyKernelVariant(v).str()});
  return specs;
}

void mlir::flexsn::emitAtomicAdd(OpBuilder &b, Location loc, Value ptr,
                                 Value value) {
  LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::fadd, ptr, value,
                            LLVM::AtomicOrdering::monotonic);
}

LogicalResult mlir::flexsn::verifyKernelForm(ScanOp scan) {
  auto func = scan->getParentOfType<func::FuncOp>();
  if (!func || scan->getParentOp() != func.getOperation())
    return scan.emitOpError(
        "must sit directly in a func.func to become a kernel");
  unsigned numScans = 0;
  func.walk([&](ScanOp) { ++numScans; });
  if (numScans != 1)
    return func.emitOpError() << "holds " << numScans
                              << " flexsn.scan ops; a kernel function holds "
                                 "exactly one";
  unsigned firstState = scan.getNumInputs() + 2 * scan.getNumLagged();
  for (auto [i, operand] : llvm::enumerate(scan->getOperands())) {
    if (auto arg = dyn_cast<BlockArgument>(operand))
      if (arg.getOwner()->getParentOp() == func.getOperation())
        continue;
    if (i >= firstState && i < firstState + scan.getNumStates() &&
        getConstantInitState(scan, i - firstState))
      continue;
    return scan.emitOpError()
           << "operand #" << i
           << " must be an argument of the enclosing function to become a "
              "kernel argument (run -canonicalize to fold constant params; an "
              "initial state may also be a tensor.splat of a constant)";
  }
  return success();
}

static bool hasLowering(Operation *op) {
  if (isa<SpikeOp, DetachOp>(op))
    return true;
  StringRef ns = op->getDialect() ? op->getDialect()->getNamespace() : "";
  return ns == arith::ArithDialect::getDialectNamespace() ||
         ns == math::MathDialect::getDialectNamespace();
}

LogicalResult mlir::flexsn::verifyBodyIsLowerable(ScanOp scan,
                                                  StringRef backend) {
  for (Operation &op : scan.getBodyBlock().without_terminator())
    if (!hasLowering(&op))
      return op.emitOpError()
             << "has no lowering to " << backend
             << " kernels; a scan body may use arith, math, flexsn.spike "
                "and flexsn.detach";
  return success();
}

LogicalResult mlir::flexsn::collectKernelScans(ModuleOp module,
                                              StringRef backend,
                                              SmallVectorImpl<ScanOp> &scans) {
  WalkResult walk = module.walk([&](ScanOp scan) {
    if (failed(verifyKernelForm(scan)) ||
        failed(verifyBodyIsLowerable(scan, backend)))
      return WalkResult::interrupt();
    scans.push_back(scan);
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

std::string mlir::flexsn::getKernelName(StringRef funcName,
                                        KernelVariant variant) {
  return (funcName + "_" + stringifyKernelVariant(variant)).str();
}

//===----------------------------------------------------------------------===//
// Emission
//===----------------------------------------------------------------------===//

namespace {
/// Builds the loads, stores and body copies of one neuron group.
class NeuronScanEmitter {
public:
  NeuronScanEmitter(OpBuilder &b, Location loc, ScanOp scan, unsigned width,
                    LaneAccess access, Value ncl, Value neuron)
      : b(b), loc(loc), scan(scan), width(width),
        vectorized(access == LaneAccess::Vector),
        guarded(access == LaneAccess::ScalarGuarded), ncl(ncl),
        neuron(neuron), computeType(scan.getComputeType()) {
    ptrType = LLVM::LLVMPointerType::get(b.getContext());
    if (vectorized)
      return;
    Value last =
        guarded ? arith::SubIOp::create(b, loc, ncl, cst(1)).getResult()
                : Value();
    for (unsigned l = 0; l < width; ++l) {
      Value n = l == 0 ? neuron
                       : arith::AddIOp::create(b, loc, neuron, cst(l)).getResult();
      if (!guarded) {
        laneIndex.push_back(n);
        continue;
      }
      laneIndex.push_back(arith::MinSIOp::create(b, loc, n, last));
      laneValid.push_back(
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, n, ncl));
    }
  }

  Value cst(int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
  }

  Value convert(Value v, Type to) {
    Type from = v.getType();
    if (from == to)
      return v;
    // Scalars or vectors: compare the element widths.
    if (getElementTypeOrSelf(from).getIntOrFloatBitWidth() <
        getElementTypeOrSelf(to).getIntOrFloatBitWidth())
      return arith::ExtFOp::create(b, loc, to, v);
    return arith::TruncFOp::create(b, loc, to, v);
  }

  Value gep(Value base, Type elt, Value offset) {
    return LLVM::GEPOp::create(b, loc, ptrType, elt, base, ValueRange{offset});
  }

  unsigned bytes(Type elt) { return elt.getIntOrFloatBitWidth() / 8; }

  /// rowOffset + index, or index alone for per-neuron tensors (no row).
  Value offsetOf(Value rowOffset, Value index) {
    return rowOffset ? arith::AddIOp::create(b, loc, rowOffset, index).getResult()
                     : index;
  }

  /// Loads `width` values of storage type `elt` from base[rowOffset + lane
  /// neuron] and converts them to the compute type.
  SmallVector<Value> load(Value base, Type elt, Value rowOffset) {
    SmallVector<Value> out;
    if (vectorized) {
      auto vecType = VectorType::get({width}, elt);
      Value offset = offsetOf(rowOffset, neuron);
      Value vec = LLVM::LoadOp::create(b, loc, vecType, gep(base, elt, offset),
                                       bytes(elt) * width);
      Value wide = convert(vec, VectorType::get({width}, computeType));
      for (unsigned l = 0; l < width; ++l)
        out.push_back(LLVM::ExtractElementOp::create(
            b, loc, wide,
            arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(l))));
      return out;
    }
    for (unsigned l = 0; l < width; ++l) {
      Value offset = offsetOf(rowOffset, laneIndex[l]);
      Value v = LLVM::LoadOp::create(b, loc, elt, gep(base, elt, offset),
                                     bytes(elt));
      out.push_back(convert(v, computeType));
    }
    return out;
  }

  /// Stores `values` (compute type) as `elt` at base[rowOffset + neuron].
  void store(Value base, Type elt, Value rowOffset, ArrayRef<Value> values) {
    if (vectorized) {
      auto vecType = VectorType::get({width}, elt);
      Value vec = LLVM::PoisonOp::create(b, loc, vecType);
      for (unsigned l = 0; l < width; ++l)
        vec = LLVM::InsertElementOp::create(
            b, loc, vec, convert(values[l], elt),
            arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(l)));
      Value offset = offsetOf(rowOffset, neuron);
      LLVM::StoreOp::create(b, loc, vec, gep(base, elt, offset),
                            bytes(elt) * width);
      return;
    }
    for (unsigned l = 0; l < width; ++l) {
      Value v = convert(values[l], elt);
      Value offset = offsetOf(rowOffset, laneIndex[l]);
      auto emitStore = [&](OpBuilder &nb) {
        LLVM::StoreOp::create(nb, loc, v, gep(base, elt, offset), bytes(elt));
      };
      if (!guarded) {
        emitStore(b);
        continue;
      }
      scf::IfOp::create(b, loc, laneValid[l], [&](OpBuilder &nb, Location) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
        emitStore(b);
        scf::YieldOp::create(b, loc);
      });
    }
  }

  /// The sum of `lanes` (compute type) over the lanes inside the tensors.
  Value sumValidLanes(ArrayRef<Value> lanes) {
    Value sum;
    for (auto [l, lane] : llvm::enumerate(lanes)) {
      Value v = lane;
      if (guarded)
        v = arith::SelectOp::create(
            b, loc, laneValid[l], v,
            arith::ConstantOp::create(b, loc, b.getFloatAttr(computeType, 0.0)));
      sum = sum ? arith::AddFOp::create(b, loc, sum, v).getResult() : v;
    }
    return sum;
  }

  /// Copies the body for one lane, lowering spike and detach on the way.
  /// Returns the yielded values (outputs, then new states).
  SmallVector<Value> emitBody(ArrayRef<Value> args) {
    Block &body = scan.getBodyBlock();
    IRMapping map;
    for (auto [arg, v] : llvm::zip_equal(body.getArguments(), args))
      map.map(arg, v);
    for (Operation &op : body.without_terminator()) {
      if (auto spike = dyn_cast<SpikeOp>(op)) {
        Value x = map.lookup(spike.getInput());
        Type t = x.getType();
        Value zero = arith::ConstantOp::create(b, loc, b.getFloatAttr(t, 0.0));
        Value one = arith::ConstantOp::create(b, loc, b.getFloatAttr(t, 1.0));
        Value ge = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGE, x,
                                         zero);
        map.map(spike.getResult(),
                arith::SelectOp::create(b, loc, ge, one, zero));
        continue;
      }
      if (auto detach = dyn_cast<DetachOp>(op)) {
        map.map(detach.getResult(), map.lookup(detach.getInput()));
        continue;
      }
      b.clone(op, map);
    }
    SmallVector<Value> results;
    for (Value v : scan.getYield().getValues())
      results.push_back(map.lookupOrDefault(v));
    return results;
  }

private:
  OpBuilder &b;
  Location loc;
  ScanOp scan;
  unsigned width;
  bool vectorized, guarded;
  Value ncl, neuron;
  Type computeType, ptrType;
  SmallVector<Value> laneIndex, laneValid;
};
} // namespace

SmallVector<Value> mlir::flexsn::emitNeuronScan(OpBuilder &b, Location loc,
                                                ScanOp scan,
                                                KernelVariant variant,
                                                ValueRange args, Value neuron,
                                                unsigned width,
                                                LaneAccess access) {
  SmallVector<KernelArg> abi = getKernelABI(scan, variant, /*cpu=*/false);
  unsigned numIn = scan.getNumInputs(), numLa = scan.getNumLagged(),
           numSt = scan.getNumStates(), numPa = scan.getNumParams(),
           numOut = scan.getNumOutputs();
  Value tSize, ncl;
  // Pointer (and storage type) of each operand/result, by role and index;
  // null where the ABI has none.
  using Slot = std::pair<Value, Type>;
  SmallVector<Slot> inputs(numIn), lagged(numLa), laggedInit(numLa),
      states(numSt), params(numPa), outputs(numOut), stateOuts(numSt);
  for (auto [arg, value] : llvm::zip(abi, args)) {
    Slot slot{value, arg.type};
    switch (arg.role) {
    case KernelArgRole::Input:
      inputs[arg.index] = slot;
      break;
    case KernelArgRole::Lagged:
      lagged[arg.index] = slot;
      break;
    case KernelArgRole::LaggedInit:
      laggedInit[arg.index] = slot;
      break;
    case KernelArgRole::InitState:
      states[arg.index] = slot;
      break;
    case KernelArgRole::Param:
    case KernelArgRole::ParamScalar:
      params[arg.index] = slot;
      break;
    case KernelArgRole::Output:
      outputs[arg.index] = slot;
      break;
    case KernelArgRole::StateSeq:
    case KernelArgRole::FinalState:
    case KernelArgRole::SumState:
      stateOuts[arg.index] = slot;
      break;
    case KernelArgRole::T:
      tSize = value;
      break;
    case KernelArgRole::NCL:
      ncl = value;
      break;
    default:
      break;
    }
  }

  NeuronScanEmitter e(b, loc, scan, width, access, ncl, neuron);
  Type computeType = scan.getComputeType();
  auto splat = [&](SmallVectorImpl<Value> &into, Value v) {
    into.append(width, v);
  };

  // Lane-major values: value[k * width + lane].
  SmallVector<Value> init;
  for (auto [k, slot] : llvm::enumerate(states)) {
    if (slot.first) {
      llvm::append_range(init, e.load(slot.first, slot.second, Value()));
      continue;
    }
    double c = *getConstantInitState(scan, k);
    splat(init, arith::ConstantOp::create(b, loc,
                                          b.getFloatAttr(computeType, c)));
  }
  SmallVector<Value> paramVals;
  for (auto [k, slot] : llvm::enumerate(params)) {
    if (scan.isPerNeuronParam(k)) {
      llvm::append_range(paramVals, e.load(slot.first, slot.second, Value()));
      continue;
    }
    Value v = LLVM::LoadOp::create(b, loc, slot.second, slot.first,
                                   slot.second.getIntOrFloatBitWidth() / 8);
    splat(paramVals, e.convert(v, computeType));
  }

  Value zero = e.cst(0), one = e.cst(1);
  Value tLast = arith::SubIOp::create(b, loc, tSize, one);
  bool reverse = scan.getReverse();
  bool finalOnly = variant == KernelVariant::FinalState;
  auto loop = scf::ForOp::create(
      b, loc, zero, tSize, one, init,
      [&](OpBuilder &nb, Location, Value iv, ValueRange carried) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
        Value t = reverse ? arith::SubIOp::create(b, loc, tLast, iv).getResult()
                          : iv;
        Value row = arith::MulIOp::create(b, loc, t, ncl);
        SmallVector<Value> inVals;
        for (auto &[ptr, elt] : inputs)
          llvm::append_range(inVals, e.load(ptr, elt, row));
        // Lagged operands read row t-1, or their init at t = 0.
        SmallVector<Value> lagVals;
        if (numLa) {
          Value started = arith::CmpIOp::create(
              b, loc, arith::CmpIPredicate::sgt, t, zero);
          Value prevRow = arith::SubIOp::create(b, loc, row, ncl);
          for (auto [seq, first] : llvm::zip_equal(lagged, laggedInit)) {
            Value fromSeq = e.gep(seq.first, seq.second, prevRow);
            Value base = LLVM::SelectOp::create(b, loc, started, fromSeq,
                                                first.first);
            llvm::append_range(lagVals, e.load(base, seq.second, Value()));
          }
        }

        // One body copy per lane.
        unsigned numYield = numOut + numSt;
        SmallVector<Value> yielded(numYield * width);
        for (unsigned l = 0; l < width; ++l) {
          SmallVector<Value> laneArgs;
          for (unsigned k = 0; k < numIn; ++k)
            laneArgs.push_back(inVals[k * width + l]);
          for (unsigned k = 0; k < numLa; ++k)
            laneArgs.push_back(lagVals[k * width + l]);
          for (unsigned k = 0; k < numSt; ++k)
            laneArgs.push_back(carried[k * width + l]);
          for (unsigned k = 0; k < numPa; ++k)
            laneArgs.push_back(paramVals[k * width + l]);
          SmallVector<Value> res = e.emitBody(laneArgs);
          for (unsigned k = 0; k < numYield; ++k)
            yielded[k * width + l] = res[k];
        }
        for (auto [k, out] : llvm::enumerate(outputs))
          if (out.first)
            e.store(out.first, out.second, row,
                    ArrayRef<Value>(yielded).slice(k * width, width));
        SmallVector<Value> next(
            ArrayRef<Value>(yielded).drop_front(numOut * width));
        if (!finalOnly)
          for (auto [k, st] : llvm::enumerate(stateOuts))
            if (st.first)
              e.store(st.first, st.second, row,
                      ArrayRef<Value>(next).slice(k * width, width));
        scf::YieldOp::create(b, loc, next);
      });
  SmallVector<Value> partials;
  if (!finalOnly)
    return partials;
  for (auto [k, st] : llvm::enumerate(stateOuts)) {
    SmallVector<Value> lanes(loop.getResults().slice(k * width, width));
    if (scan.isSumState(k)) {
      if (st.first)
        partials.push_back(e.sumValidLanes(lanes));
      continue;
    }
    if (st.first)
      e.store(st.first, st.second, Value(), lanes);
  }
  return partials;
}
