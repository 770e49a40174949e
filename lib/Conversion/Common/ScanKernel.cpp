//===- ScanKernel.cpp - Loop emission shared by both lowerings ------------===//

#include "ScanKernel.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace mlir::flexsn;

void mlir::flexsn::emitAtomicAdd(OpBuilder &b, Location loc, Value ptr,
                                 Value value) {
  LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::fadd, ptr, value,
                            LLVM::AtomicOrdering::monotonic);
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
  SmallVector<Value> load(Value base, Type elt, Value rowOffset,
                          Value given = Value()) {
    // An optional pointer (given: whether it is non-null) reads a constant
    // block of zeros instead when null: a select of the address on a
    // loop-invariant flag, no branch in the loop.
    auto at = [&](Value offset) -> Value {
      Value addr = gep(base, elt, offset);
      return given ? LLVM::SelectOp::create(b, loc, given, addr, zerosAddress())
                         .getResult()
                   : addr;
    };
    SmallVector<Value> out;
    if (vectorized) {
      auto vecType = VectorType::get({width}, elt);
      Value offset = offsetOf(rowOffset, neuron);
      Value vec = LLVM::LoadOp::create(b, loc, vecType, at(offset),
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
      Value v = LLVM::LoadOp::create(b, loc, elt, at(offset), bytes(elt));
      out.push_back(convert(v, computeType));
    }
    return out;
  }

  /// load(), or zeros when `base` is null (an optional pointer: a gradient
  /// the caller does not have).
  SmallVector<Value> loadOrZeros(Value base, Type elt, Value rowOffset) {
    Value null = LLVM::ZeroOp::create(b, loc, ptrType);
    Value given =
        LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::ne, base, null);
    return load(base, elt, rowOffset, given);
  }

  /// The address of a 64-byte, 16-byte-aligned constant block of zeros in
  /// the enclosing symbol table (the gpu.module or the module), made once.
  Value zerosAddress() {
    static constexpr llvm::StringLiteral name = "__flexsn_zeros";
    // The kernel's own parent (gpu.module or module): the block being built
    // may not be attached yet.
    Operation *table = SymbolTable::getNearestSymbolTable(
        kernelArg.getParentBlock()->getParentOp()->getParentOp());
    auto arrayType = LLVM::LLVMArrayType::get(b.getI8Type(), 64);
    if (!SymbolTable::lookupSymbolIn(table, name)) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&table->getRegion(0).front());
      auto global = LLVM::GlobalOp::create(
          b, loc, arrayType, /*isConstant=*/true, LLVM::Linkage::Internal, name,
          Attribute(), /*alignment=*/16);
      Block *init = b.createBlock(&global.getInitializerRegion());
      b.setInsertionPointToStart(init);
      LLVM::ReturnOp::create(b, loc,
                             LLVM::ZeroOp::create(b, loc, arrayType).getResult());
    }
    return LLVM::AddressOfOp::create(b, loc, ptrType, name);
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
      // The saving policy means nothing outside a scan body.
      b.clone(op, map)->removeAttr(kSaveAttr);
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

public:
  /// An argument of the kernel function being built (block argument of its
  /// entry block).
  Value kernelArg;

private:
  SmallVector<Value> laneIndex, laneValid;
};
} // namespace

SmallVector<Value> mlir::flexsn::emitNeuronScan(OpBuilder &b, Location loc,
                                                ScanOp scan,
                                                KernelVariant variant,
                                                ValueRange args, Value neuron,
                                                unsigned width,
                                                LaneAccess access,
                                                unsigned prefetch) {
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
  // Pointers that may be null (read as zeros): see isOptionalKernelArg.
  llvm::SmallPtrSet<Value, 4> optional;
  for (auto [arg, value] : llvm::zip(abi, args)) {
    Slot slot{value, arg.type};
    if (isOptionalKernelArg(scan, arg))
      optional.insert(value);
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
  e.kernelArg = args.front();
  Type computeType = scan.getComputeType();
  auto splat = [&](SmallVectorImpl<Value> &into, Value v) {
    into.append(width, v);
  };

  // Lane-major values: value[k * width + lane].
  SmallVector<Value> init;
  for (auto [k, slot] : llvm::enumerate(states)) {
    if (slot.first) {
      llvm::append_range(init, optional.contains(slot.first)
                                   ? e.loadOrZeros(slot.first, slot.second,
                                                   Value())
                                   : e.load(slot.first, slot.second, Value()));
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

  // Every sequence read of step `s` (s-th iteration; the time index runs
  // backwards in a reverse scan), lane-major per operand: inputs, then
  // lagged operands (row t-1, or their init at t = 0). None depends on the
  // states, so they can be issued ahead of the step that uses them.
  unsigned numReads = (numIn + numLa) * width;
  auto rowOf = [&](Value s) -> std::pair<Value, Value> {
    Value t = reverse ? arith::SubIOp::create(b, loc, tLast, s).getResult() : s;
    return {t, arith::MulIOp::create(b, loc, t, ncl)};
  };
  auto loadStep = [&](Value s) {
    auto [t, row] = rowOf(s);
    SmallVector<Value> vals;
    for (auto &[ptr, elt] : inputs)
      llvm::append_range(vals, optional.contains(ptr)
                                   ? e.loadOrZeros(ptr, elt, row)
                                   : e.load(ptr, elt, row));
    if (numLa) {
      Value started =
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, t, zero);
      Value prevRow = arith::SubIOp::create(b, loc, row, ncl);
      for (auto [seq, first] : llvm::zip_equal(lagged, laggedInit)) {
        Value fromSeq = e.gep(seq.first, seq.second, prevRow);
        Value base =
            LLVM::SelectOp::create(b, loc, started, fromSeq, first.first);
        llvm::append_range(vals, e.load(base, seq.second, Value()));
      }
    }
    return vals;
  };
  // Software pipelining: with depth P the loop carries the reads of the
  // next P - 1 steps and issues those of step iv + P - 1 (clamped to the
  // last step) before computing step iv, so each thread keeps P steps of
  // loads in flight. The prologue reads nothing when T = 0 (the buffers
  // may then be empty or null).
  unsigned depth = numReads ? std::max(prefetch, 1u) : 1;
  SmallVector<Value> init2(init);
  if (depth > 1) {
    Value any =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, tSize, zero);
    SmallVector<Type> types((depth - 1) * numReads, computeType);
    auto prologue = scf::IfOp::create(
        b, loc, any,
        [&](OpBuilder &tb, Location) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(tb.getInsertionBlock(), tb.getInsertionPoint());
          SmallVector<Value> vals;
          for (unsigned j = 0; j + 1 < depth; ++j)
            llvm::append_range(
                vals, loadStep(arith::MinSIOp::create(b, loc, e.cst(j), tLast)));
          scf::YieldOp::create(b, loc, vals);
        },
        [&](OpBuilder &eb, Location) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(eb.getInsertionBlock(), eb.getInsertionPoint());
          Value z = arith::ConstantOp::create(b, loc,
                                              b.getFloatAttr(computeType, 0.0));
          scf::YieldOp::create(b, loc,
                               SmallVector<Value>(types.size(), z));
        });
    llvm::append_range(init2, prologue.getResults());
  }
  unsigned numCarriedStates = init.size();
  auto loop = scf::ForOp::create(
      b, loc, zero, tSize, one, init2,
      [&](OpBuilder &nb, Location, Value iv, ValueRange carried) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
        ValueRange stateVals = carried.take_front(numCarriedStates);
        ValueRange buffered = carried.drop_front(numCarriedStates);
        SmallVector<Value> ahead;
        if (depth > 1) {
          Value s = arith::MinSIOp::create(
              b, loc, arith::AddIOp::create(b, loc, iv, e.cst(depth - 1)),
              tLast);
          ahead = loadStep(s);
        }
        SmallVector<Value> current =
            depth > 1 ? SmallVector<Value>(buffered.take_front(numReads))
                      : loadStep(iv);
        Value row = rowOf(iv).second;
        ArrayRef<Value> inVals = ArrayRef<Value>(current).take_front(numIn * width);
        ArrayRef<Value> lagVals = ArrayRef<Value>(current).drop_front(numIn * width);

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
            laneArgs.push_back(stateVals[k * width + l]);
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
        if (depth > 1) {
          llvm::append_range(next, buffered.drop_front(numReads));
          llvm::append_range(next, ahead);
        }
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

unsigned mlir::flexsn::choosePrefetchDepth(ScanOp scan, unsigned width) {
  unsigned reads = (scan.getNumInputs() + scan.getNumLagged()) * width;
  if (reads == 0)
    return 1;
  return std::clamp(1 + 32 / reads, 1u, 8u);
}
