//===- TimeLoops.cpp - Loop emission shared by both lowerings -------------===//

#include "TimeLoops.h"
#include "flexsn/Conversion/Passes.h"
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

void mlir::flexsn::collectSumStates(ArrayRef<KernelArg> abi, ValueRange args,
                                    SmallVectorImpl<Value> &ptrs,
                                    SmallVectorImpl<Type> &types) {
  for (auto [arg, value] : llvm::zip(abi, args))
    if (arg.role == KernelArgRole::SumState) {
      ptrs.push_back(value);
      types.push_back(arg.type);
    }
}

//===----------------------------------------------------------------------===//
// Emission
//===----------------------------------------------------------------------===//

namespace {
/// Builds the loads, stores and body copies of one neuron group.
class NeuronScanEmitter {
public:
  /// `kernelArg`: an argument of the kernel function being built (a block
  /// argument of its entry block), which locates its symbol table.
  /// `rawBits`: scalar loads of 16-bit float storage yield their bits (i16)
  /// until widen() (CPU kernels, below). `invariantReads`: the loads of
  /// loadRawAt() are invariant (GPU kernels: ld.global.nc, which ptxas may
  /// move across the kernel's stores; every tensor a kernel reads is one
  /// it does not write).
  NeuronScanEmitter(OpBuilder &b, Location loc, ScanOp scan, unsigned width,
                    LaneAccess access, Value neuron, Value kernelArg,
                    bool rawBits, bool invariantReads = false)
      : b(b), loc(loc), scan(scan), width(width),
        vectorized(access == LaneAccess::Vector), rawBits(rawBits),
        invariantReads(invariantReads), neuron(neuron), kernelArg(kernelArg),
        computeType(scan.getComputeType()) {
    ptrType = LLVM::LLVMPointerType::get(b.getContext());
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

  /// base + offset elements of `elt`, in `base`'s address space.
  Value gep(Value base, Type elt, Value offset) {
    return LLVM::GEPOp::create(b, loc, base.getType(), elt, base,
                               ValueRange{offset});
  }

  unsigned bytes(Type elt) { return elt.getIntOrFloatBitWidth() / 8; }

  /// The address of element [row, neuron] of `base` (storage type `elt`):
  /// `rowOffset` is the row's first element, or null for a per-neuron
  /// tensor (no row). Lane l of a scalar group is l elements further.
  Value addressOf(Value base, Type elt, Value rowOffset) {
    Value offset =
        rowOffset
            ? arith::AddIOp::create(b, loc, rowOffset, seqNeuron()).getResult()
            : neuron;
    return gep(base, elt, offset);
  }

  /// Where the group's neuron sits in a row of a sequence: the neuron
  /// itself, or with chunks side by side (flexsn.chunk_width W, T steps a
  /// chunk) its chunk's first element (neuron / W) * T * W plus neuron % W,
  /// where `whole` (NCL a multiple of W; else rows of NCL, in bounds).
  void setChunkedRows(Value width, Value steps, Value whole) {
    Value chunk = arith::DivUIOp::create(b, loc, neuron, width);
    Value chunkStart = arith::MulIOp::create(
        b, loc, chunk, arith::MulIOp::create(b, loc, steps, width));
    Value chunked = arith::AddIOp::create(
        b, loc, chunkStart, arith::RemUIOp::create(b, loc, neuron, width));
    chunkedNeuron = arith::SelectOp::create(b, loc, whole, chunked, neuron);
  }
  Value seqNeuron() const { return chunkedNeuron ? chunkedNeuron : neuron; }

  /// `addr`, or the block of zeros when `given` (an i1) is false: an
  /// optional pointer that is null reads zeros, through a select on a flag
  /// that does not change during the scan, no branch.
  Value orZeros(Value addr, Value given) {
    return given ? LLVM::SelectOp::create(b, loc, given, addr, zerosAddress())
                       .getResult()
                 : addr;
  }

  /// Loads `width` values of storage type `elt` from the group's lanes at
  /// `addr` (its first lane's element), as they are in memory: one
  /// `width`-wide vector when the access is vectorized, else `width`
  /// scalars. Nothing uses the loaded registers until widen(): a load
  /// carried ahead by the pipelined loop does not stall the thread at a
  /// conversion right after it.
  ///
  /// With `rawBits`, a scalar 16-bit float is loaded as its bits (i16): a
  /// value the pipelined loop carries across blocks (a slot) must not be
  /// of a 16-bit float type on the CPU, where LLVM's x86 back end, lacking
  /// AVX512-BF16, keeps such a value promoted to f32 and rounds it back
  /// through a call of __truncsfbf2, which the JIT cannot resolve.
  SmallVector<Value> loadRawAt(Value addr, Type elt) {
    if (vectorized) {
      auto vecType = VectorType::get({width}, elt);
      return {LLVM::LoadOp::create(b, loc, vecType, addr, bytes(elt) * width,
                                   /*isVolatile=*/false,
                                   /*isNonTemporal=*/false, invariantReads)};
    }
    Type loaded = elt;
    if (rawBits && elt.getIntOrFloatBitWidth() == 16)
      loaded = b.getIntegerType(16);
    SmallVector<Value> out;
    for (unsigned l = 0; l < width; ++l)
      out.push_back(LLVM::LoadOp::create(
          b, loc, loaded, l == 0 ? addr : gep(addr, elt, cst(l)), bytes(elt),
          /*isVolatile=*/false, /*isNonTemporal=*/false, invariantReads));
    return out;
  }

  /// How many values loadRaw() returns per operand.
  unsigned rawValuesPerOperand() const { return vectorized ? 1 : width; }

  /// The `width` lanes of loadRaw()'s values (storage type `elt`), in the
  /// compute type.
  SmallVector<Value> widen(ArrayRef<Value> raw, Type elt) {
    SmallVector<Value> out;
    if (vectorized) {
      Value wide = convert(raw.front(), VectorType::get({width}, computeType));
      for (unsigned l = 0; l < width; ++l)
        out.push_back(LLVM::ExtractElementOp::create(
            b, loc, wide,
            arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(l))));
      return out;
    }
    for (Value v : raw) {
      if (v.getType() != elt) // its bits (rawBits)
        v = arith::BitcastOp::create(b, loc, elt, v);
      out.push_back(convert(v, computeType));
    }
    return out;
  }

  /// The group's lanes of the per-neuron tensor `base`, in the compute
  /// type; zeros where `given` is false (an optional pointer).
  SmallVector<Value> load(Value base, Type elt, Value given = Value()) {
    return widen(loadRawAt(orZeros(addressOf(base, elt, Value()), given), elt),
                 elt);
  }

  /// Whether `base` is non-null (for an optional pointer).
  Value isGiven(Value base) {
    Value null = LLVM::ZeroOp::create(b, loc, ptrType);
    return LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::ne, base, null);
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

  /// Stores `values` (compute type) as `elt` to the group's lanes at
  /// `addr` (its first lane's element).
  void storeAt(Value addr, Type elt, ArrayRef<Value> values) {
    if (vectorized) {
      auto vecType = VectorType::get({width}, elt);
      Value vec = LLVM::PoisonOp::create(b, loc, vecType);
      for (unsigned l = 0; l < width; ++l)
        vec = LLVM::InsertElementOp::create(
            b, loc, vec, convert(values[l], elt),
            arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(l)));
      LLVM::StoreOp::create(b, loc, vec, addr, bytes(elt) * width);
      return;
    }
    for (unsigned l = 0; l < width; ++l)
      LLVM::StoreOp::create(b, loc, convert(values[l], elt),
                            l == 0 ? addr : gep(addr, elt, cst(l)),
                            bytes(elt));
  }

  /// The sum of `lanes` (compute type).
  Value sumLanes(ArrayRef<Value> lanes) {
    Value sum;
    for (Value lane : lanes)
      sum = sum ? arith::AddFOp::create(b, loc, sum, lane).getResult() : lane;
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
  bool vectorized, rawBits, invariantReads;
  Value neuron, kernelArg;
  /// The neuron's place in a sequence's row when chunks sit side by side.
  Value chunkedNeuron;
  Type computeType, ptrType;
};
} // namespace

/// The most op copies (body ops x lanes x slots) a kernel entry's loop
/// body is unrolled to by the prefetch depth.
static constexpr unsigned kMaxUnrolledOps = 1024;

/// Ops in the scan's body (nested ones included).
static unsigned countBodyOps(ScanOp scan) {
  unsigned ops = 0;
  scan.getBodyBlock().walk([&](Operation *) { ++ops; });
  return std::max(ops, 1u);
}

namespace {
/// The pointers (and storage types) of a scan kernel's arguments by role
/// and index, null where the ABI has none; which may be null at run time
/// (see isOptionalKernelArg); T and NCL.
struct ScanOperands {
  using Slot = std::pair<Value, Type>;
  SmallVector<Slot> inputs, lagged, laggedInit, states, params, outputs,
      stateOuts;
  llvm::SmallPtrSet<Value, 4> optional;
  Value tSize, ncl;

  /// `args`: the kernel's arguments in ABI order (trailing ones ignored).
  ScanOperands(ScanOp scan, KernelVariant variant, ValueRange args)
      : inputs(scan.getNumInputs()), lagged(scan.getNumLagged()),
        laggedInit(scan.getNumLagged()), states(scan.getNumStates()),
        params(scan.getNumParams()), outputs(scan.getNumOutputs()),
        stateOuts(scan.getNumStates()) {
    SmallVector<KernelArg> abi = getKernelABI(scan, variant, /*cpu=*/false);
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
  }
};
} // namespace

namespace {
/// Emits the time loop of one neuron group (emitNeuronScan): per step, the
/// reads of every sequence, one body copy per lane and the writes; with a
/// prefetch depth P > 1, P steps of reads are kept in flight in registers
/// (slots) and sequences are walked by cursors. Values of several lanes are
/// lane-major: value[k * width + lane].
class TimeLoopEmitter {
public:
  TimeLoopEmitter(OpBuilder &b, Location loc, ScanOp scan,
                  KernelVariant variant, ValueRange args, Value neuron,
                  unsigned width, LaneAccess access, unsigned prefetch,
                  CursorStep cursorStep, unsigned l2Ahead, Value l2Gate)
      : b(b), loc(loc), scan(scan), ops(scan, variant, args),
        e(b, loc, scan, width, access, neuron, args.front(),
          /*rawBits=*/cursorStep == CursorStep::Plain,
          /*invariantReads=*/cursorStep == CursorStep::OpaqueGlobal),
        width(width), prefetch(prefetch), l2Ahead(l2Ahead), l2Gate(l2Gate),
        computeType(scan.getComputeType()),
        globalPtr(LLVM::LLVMPointerType::get(b.getContext(), 1)),
        numIn(scan.getNumInputs()), numLa(scan.getNumLagged()),
        numSt(scan.getNumStates()), numPa(scan.getNumParams()),
        numOut(scan.getNumOutputs()), reverse(scan.getReverse()),
        finalOnly(variant == KernelVariant::FinalState),
        opaque(cursorStep == CursorStep::OpaqueGlobal) {}

  /// Emits the loop; returns the group's partial sums of `sum_states`.
  SmallVector<Value> emit();

private:
  using Slot = ScanOperands::Slot;
  using Build = llvm::function_ref<SmallVector<Value>()>;
  /// A sequence walked by a cursor: its storage type and its stride a step
  /// (elements for a GEP, bytes for the opaque add).
  struct Seq {
    Type elt;
    Value stride;
  };

  /// Whether the optional pointer `ptr` is non-null (loop-invariant); null
  /// for a pointer that is never null.
  Value givenFlag(Value ptr) {
    return ops.optional.contains(ptr) ? e.isGiven(ptr) : Value();
  }
  SmallVector<Value> loadInitialStates();
  void loadParams();
  void collectAddresses();
  void setUpCursors();

  /// The time index of the s-th step (backwards in a reverse scan).
  Value timeOf(Value s) {
    return reverse ? arith::SubIOp::create(b, loc, tLast, s).getResult() : s;
  }
  /// The first element of step s's row.
  Value rowOf(Value s) {
    return arith::MulIOp::create(b, loc, timeOf(s), rowStride);
  }
  /// A cursor (or address) from a generic address.
  Value toCursor(Value addr) {
    return opaque ? LLVM::AddrSpaceCastOp::create(b, loc, globalPtr, addr)
                        .getResult()
                  : addr;
  }
  std::pair<SmallVector<Value>, SmallVector<Value>> rowAddresses(Value row);
  Seq strideOf(Type elt, Value given, Value stride);
  LLVM::InlineAsmOp asmOp(TypeRange results, ValueRange operands,
                          StringRef text, StringRef constraints, bool effects);
  Value addBytes(Value ptr, Value bytes);
  SmallVector<Value> advance(ArrayRef<Value> cursors, ArrayRef<Seq> seqs);

  SmallVector<Value> loadStep(Value s, ArrayRef<Value> at);
  SmallVector<Value> emitStep(ArrayRef<Value> raw, ValueRange stateVals,
                              ArrayRef<Value> writeAt);
  SmallVector<Value> finishScan(ValueRange finals);

  SmallVector<Value> emitPlainLoop(ArrayRef<Value> init);
  SmallVector<Value> emitPipelinedLoop(ArrayRef<Value> init);
  std::pair<SmallVector<Value>, SmallVector<Value>>
  cursorsOf(ValueRange carried);
  SmallVector<Value> ifElse(Value cond, Build thenVals, Build elseVals);
  Value below(Value s, Value bound) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, s, bound);
  }
  SmallVector<Value> refill(Value a, ArrayRef<Value> cursors,
                            ArrayRef<Value> old);
  SmallVector<Value> emitIteration(Value iv, ValueRange carried,
                                   bool checked);
  void emitL2Prefetch(Value iv, ValueRange carried);

  OpBuilder &b;
  Location loc;
  ScanOp scan;
  ScanOperands ops;
  NeuronScanEmitter e;
  unsigned width, prefetch, l2Ahead;
  Value l2Gate;
  Type computeType, globalPtr;
  unsigned numIn, numLa, numSt, numPa, numOut;
  bool reverse, finalOnly, opaque;

  // Set by emit(), in this order.
  SmallVector<Value> paramVals;
  Value zero, one, tLast;
  /// Elements from one step's row to the next: NCL, or the chunk width.
  Value rowStride;
  /// Reads a step: inputs, then lagged operands; how many raw values each
  /// gives (loadRawAt), and in all; the prefetch depth.
  unsigned numOperandReads = 0, rawPerOperand = 0, numRaw = 0, depth = 1;
  SmallVector<Value> inputGiven, laggedInitAddr;
  /// The pointers written every step: outputs, then state sequences.
  SmallVector<Slot> written;
  SmallVector<Seq> readSeqs, writeSeqs;
  SmallVector<Value> readStart, writeStart;
  unsigned numCarriedStates = 0, numReadCursors = 0;
  /// The L2 prefetch's cursor offsets (l2Ahead steps), when it is on.
  SmallVector<Value> aheadOffsets;
};
} // namespace

SmallVector<Value> TimeLoopEmitter::emit() {
  SmallVector<Value> init = loadInitialStates();
  loadParams();
  zero = e.cst(0);
  one = e.cst(1);
  tLast = arith::SubIOp::create(b, loc, ops.tSize, one);
  rowStride = ops.ncl;
  if (int64_t width = scan.getChunkWidth()) {
    // Whole chunks only: a launch whose NCL is not a multiple of W reads
    // rows of NCL, as without the attribute, never past its tensors.
    Value w = e.cst(width);
    Value whole = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::eq,
        arith::RemUIOp::create(b, loc, ops.ncl, w), zero);
    rowStride = arith::SelectOp::create(b, loc, whole, w, ops.ncl);
    e.setChunkedRows(w, ops.tSize, whole);
  }

  // How many steps of reads are in flight: see choosePrefetchDepth.
  numOperandReads = numIn + numLa;
  rawPerOperand = e.rawValuesPerOperand();
  numRaw = numOperandReads * rawPerOperand;
  depth = numRaw ? std::max(prefetch, 1u) : 1;
  collectAddresses();
  if (depth > 1)
    setUpCursors();
  numCarriedStates = init.size();
  numReadCursors = readStart.size();
  if (depth == 1)
    return emitPlainLoop(init);
  return emitPipelinedLoop(init);
}

SmallVector<Value> TimeLoopEmitter::loadInitialStates() {
  SmallVector<Value> init;
  for (auto [k, slot] : llvm::enumerate(ops.states)) {
    if (slot.first) {
      llvm::append_range(init, e.load(slot.first, slot.second,
                                      givenFlag(slot.first)));
      continue;
    }
    double c = *getConstantInitState(scan, k);
    init.append(width, arith::ConstantOp::create(
                           b, loc, b.getFloatAttr(computeType, c)));
  }
  return init;
}

void TimeLoopEmitter::loadParams() {
  for (auto [k, slot] : llvm::enumerate(ops.params)) {
    if (scan.isPerNeuronParam(k)) {
      llvm::append_range(paramVals, e.load(slot.first, slot.second));
      continue;
    }
    Value v = LLVM::LoadOp::create(b, loc, slot.second, slot.first,
                                   slot.second.getIntOrFloatBitWidth() / 8);
    paramVals.append(width, e.convert(v, computeType));
  }
}

/// The loop-invariant parts of the addresses: which inputs are given, where
/// each lagged operand's init is (zeros when that optional pointer is
/// null), and which pointers are written each step.
void TimeLoopEmitter::collectAddresses() {
  for (auto &[ptr, elt] : ops.inputs)
    inputGiven.push_back(givenFlag(ptr));
  // A lagged operand reads its init at t = 0: a select per step between
  // the row t - 1 and this.
  for (auto [seq, first] : llvm::zip_equal(ops.lagged, ops.laggedInit))
    laggedInitAddr.push_back(
        toCursor(e.orZeros(e.addressOf(first.first, seq.second, Value()),
                           givenFlag(first.first))));
  for (Slot out : ops.outputs)
    if (out.first)
      written.push_back(out);
  if (!finalOnly)
    for (Slot st : ops.stateOuts)
      if (st.first)
        written.push_back(st);
}

/// The addresses of the reads (inputs, then lagged operands at row t - 1)
/// and of the writes (in the order of `written`) in row `row`.
std::pair<SmallVector<Value>, SmallVector<Value>>
TimeLoopEmitter::rowAddresses(Value row) {
  SmallVector<Value> reads, writes;
  for (auto [k, input] : llvm::enumerate(ops.inputs))
    reads.push_back(toCursor(e.orZeros(
        e.addressOf(input.first, input.second, row), inputGiven[k])));
  if (numLa) {
    Value before = arith::SubIOp::create(b, loc, row, rowStride);
    for (auto &[ptr, elt] : ops.lagged)
      reads.push_back(toCursor(e.addressOf(ptr, elt, before)));
  }
  for (auto &[ptr, elt] : written)
    writes.push_back(toCursor(e.addressOf(ptr, elt, row)));
  return std::make_pair(reads, writes);
}

// The pipelined loop (depth > 1) walks sequences by cursors: per [T, NCL]
// pointer, the address of the group's element in the row of the step being
// read or written, advanced a step by a loop-invariant stride (+NCL
// elements, -NCL in a reverse scan, 0 for an optional pointer that is null,
// whose cursor stays on the block of zeros). A step costs one address
// addition per sequence: no row index, product, clamp or null test (that
// index arithmetic was 55 of about 90 instructions a step of lif's bf16
// backward). Cursors may point outside their tensor before t = 0 or past
// T - 1; such an address is never read or written.
//
// The loop of depth 1 addresses row t * NCL of each pointer instead: its
// kernels read many sequences a step (that is why they have depth 1), and a
// cursor is a register pair per sequence where a kernel argument sits in a
// uniform register: with cursors two_in_two_state's bf16 backward entry went
// from 86 to 94 registers, 23 to 21 resident warps, and 88% to 83% of copy
// at T=4 NCL=4M on an H100.
TimeLoopEmitter::Seq TimeLoopEmitter::strideOf(Type elt, Value given,
                                               Value stride) {
  Value st = given
                 ? arith::SelectOp::create(b, loc, given, stride, zero)
                       .getResult()
                 : stride;
  if (opaque)
    st = arith::MulIOp::create(b, loc, st, e.cst(e.bytes(elt)));
  return {elt, st};
}

void TimeLoopEmitter::setUpCursors() {
  Value stride = reverse
                     ? arith::SubIOp::create(b, loc, zero, rowStride).getResult()
                     : rowStride;
  for (auto [k, input] : llvm::enumerate(ops.inputs))
    readSeqs.push_back(strideOf(input.second, inputGiven[k], stride));
  for (auto &[ptr, elt] : ops.lagged)
    readSeqs.push_back(strideOf(elt, Value(), stride));
  for (auto &[ptr, elt] : written)
    writeSeqs.push_back(strideOf(elt, Value(), stride));
  std::tie(readStart, writeStart) = rowAddresses(rowOf(zero));
}

/// One PTX instruction as inline assembly, which LLVM does not see through.
LLVM::InlineAsmOp TimeLoopEmitter::asmOp(TypeRange results,
                                         ValueRange operands, StringRef text,
                                         StringRef constraints, bool effects) {
  return LLVM::InlineAsmOp::create(
      b, loc, results, operands, text, constraints, effects,
      /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
      LLVM::AsmDialectAttr(), ArrayAttr());
}

/// A global address plus `bytes`, opaque to LLVM (CursorStep::OpaqueGlobal).
Value TimeLoopEmitter::addBytes(Value ptr, Value bytes) {
  return asmOp(TypeRange{globalPtr}, ValueRange{ptr, bytes},
               "add.s64 $0, $1, $2;", "=l,l,l", /*effects=*/false)
      .getResult(0);
}

/// Every cursor advanced one step.
SmallVector<Value> TimeLoopEmitter::advance(ArrayRef<Value> cursors,
                                            ArrayRef<Seq> seqs) {
  SmallVector<Value> next;
  for (auto [cursor, seq] : llvm::zip_equal(cursors, seqs))
    next.push_back(opaque ? addBytes(cursor, seq.stride)
                          : e.gep(cursor, seq.elt, seq.stride));
  return next;
}

/// Every sequence read of step `s` from its read addresses (`at`). None
/// depends on the states, so they can be issued ahead of the step that uses
/// them; they stay in the storage type (loadRawAt) until that step.
SmallVector<Value> TimeLoopEmitter::loadStep(Value s, ArrayRef<Value> at) {
  SmallVector<Value> vals;
  for (unsigned k = 0; k < numIn; ++k)
    llvm::append_range(vals, e.loadRawAt(at[k], ops.inputs[k].second));
  if (numLa) {
    Value started = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt,
                                          timeOf(s), zero);
    for (unsigned k = 0; k < numLa; ++k) {
      Value addr = LLVM::SelectOp::create(b, loc, started, at[numIn + k],
                                          laggedInitAddr[k]);
      llvm::append_range(vals, e.loadRawAt(addr, ops.lagged[k].second));
    }
  }
  return vals;
}

/// One step: the body for each lane on the step's reads (`raw`), the
/// stores to the step's write addresses (`writeAt`, in the order of
/// `written`); returns the new states.
SmallVector<Value> TimeLoopEmitter::emitStep(ArrayRef<Value> raw,
                                             ValueRange stateVals,
                                             ArrayRef<Value> writeAt) {
  SmallVector<Value> current;
  for (unsigned k = 0; k < numOperandReads; ++k)
    llvm::append_range(
        current, e.widen(raw.slice(k * rawPerOperand, rawPerOperand),
                         k < numIn ? ops.inputs[k].second
                                   : ops.lagged[k - numIn].second));
  ArrayRef<Value> inVals = ArrayRef<Value>(current).take_front(numIn * width);
  ArrayRef<Value> lagVals = ArrayRef<Value>(current).drop_front(numIn * width);
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
  SmallVector<Value> next(ArrayRef<Value>(yielded).drop_front(numOut * width));
  unsigned w = 0;
  for (auto [k, out] : llvm::enumerate(ops.outputs))
    if (out.first)
      e.storeAt(writeAt[w++], out.second,
                ArrayRef<Value>(yielded).slice(k * width, width));
  if (!finalOnly)
    for (auto [k, st] : llvm::enumerate(ops.stateOuts))
      if (st.first)
        e.storeAt(writeAt[w++], st.second,
                  ArrayRef<Value>(next).slice(k * width, width));
  return next;
}

/// After the loop: the final states of a final_state kernel, stored or, for
/// sums over neurons, this group's partial sums (returned).
SmallVector<Value> TimeLoopEmitter::finishScan(ValueRange finals) {
  SmallVector<Value> partials;
  if (!finalOnly)
    return partials;
  for (auto [k, st] : llvm::enumerate(ops.stateOuts)) {
    SmallVector<Value> lanes(finals.slice(k * width, width));
    if (scan.isSumState(k)) {
      if (st.first)
        partials.push_back(e.sumLanes(lanes));
      continue;
    }
    if (st.first)
      e.storeAt(e.addressOf(st.first, st.second, Value()), st.second, lanes);
  }
  return partials;
}

SmallVector<Value> TimeLoopEmitter::emitPlainLoop(ArrayRef<Value> init) {
  auto loop = scf::ForOp::create(
      b, loc, zero, ops.tSize, one, init,
      [&](OpBuilder &nb, Location, Value iv, ValueRange carried) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
        auto [reads, writes] = rowAddresses(rowOf(iv));
        scf::YieldOp::create(b, loc,
                             emitStep(loadStep(iv, reads), carried, writes));
      });
  return finishScan(loop.getResults());
}

/// The read and write cursors among the pipelined loop's carried values
/// (the states, the slots, then the read and the write cursors).
std::pair<SmallVector<Value>, SmallVector<Value>>
TimeLoopEmitter::cursorsOf(ValueRange carried) {
  unsigned skip = numCarriedStates + depth * numRaw;
  SmallVector<Value> reads(carried.slice(skip, numReadCursors));
  SmallVector<Value> writes(carried.drop_front(skip + numReadCursors));
  return std::make_pair(reads, writes);
}

/// An scf.if on `cond` yielding thenVals() or elseVals(), each built by `b`
/// inside its region (then first).
SmallVector<Value> TimeLoopEmitter::ifElse(Value cond, Build thenVals,
                                           Build elseVals) {
  auto region = [&](Build vals) {
    return [this, vals](OpBuilder &rb, Location) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(rb.getInsertionBlock(), rb.getInsertionPoint());
      scf::YieldOp::create(b, loc, vals());
    };
  };
  auto ifOp =
      scf::IfOp::create(b, loc, cond, region(thenVals), region(elseVals));
  return SmallVector<Value>(ifOp.getResults());
}

/// The reads of step `a` when a < T, else `old` (zeros when there is none:
/// the types are the then-branch's).
SmallVector<Value> TimeLoopEmitter::refill(Value a, ArrayRef<Value> cursors,
                                           ArrayRef<Value> old) {
  SmallVector<Type> types;
  return ifElse(
      below(a, ops.tSize),
      [&] {
        SmallVector<Value> vals = loadStep(a, cursors);
        for (Value v : vals)
          types.push_back(v.getType());
        return vals;
      },
      [&] {
        if (!old.empty())
          return SmallVector<Value>(old);
        SmallVector<Value> zeros;
        for (Type t : types)
          zeros.push_back(LLVM::ZeroOp::create(b, loc, t));
        return zeros;
      });
}

/// One iteration: steps iv .. iv + depth - 1, each followed by the refill
/// of its slot with step + depth. `checked`: steps and refills past T are
/// skipped (the last iterations); unchecked, every one runs.
SmallVector<Value> TimeLoopEmitter::emitIteration(Value iv, ValueRange carried,
                                                  bool checked) {
  SmallVector<Value> stateVals(carried.take_front(numCarriedStates));
  SmallVector<Value> slots(carried.slice(numCarriedStates, depth * numRaw));
  auto [reads, writes] = cursorsOf(carried);
  SmallVector<Value> refilled;
  for (unsigned j = 0; j < depth; ++j) {
    Value s = j == 0 ? iv
                     : arith::AddIOp::create(b, loc, iv, e.cst(j)).getResult();
    ArrayRef<Value> raw = ArrayRef<Value>(slots).slice(j * numRaw, numRaw);
    // The refill follows the step in program order. The GPU's reads are
    // invariant loads (ld.global.nc), which ptxas may move across the
    // step's stores, so it places them itself; issuing them first made the
    // step's registers outlive more of the iteration (lif's unchecked
    // backward block: 400 SASS instructions at 75 registers against 363 at
    // 64) and lost 2-8 points of copy bandwidth on long-T kernels.
    Value ahead = arith::AddIOp::create(b, loc, s, e.cst(depth));
    if (j == 0 || !checked)
      stateVals = emitStep(raw, stateVals, writes);
    else
      stateVals = ifElse(
          below(s, ops.tSize),
          [&] { return emitStep(raw, stateVals, writes); },
          [&] { return stateVals; });
    if (checked)
      llvm::append_range(refilled, refill(ahead, reads, raw));
    else
      llvm::append_range(refilled, loadStep(ahead, reads));
    reads = advance(reads, readSeqs);
    writes = advance(writes, writeSeqs);
  }
  SmallVector<Value> next(stateVals);
  llvm::append_range(next, refilled);
  llvm::append_range(next, reads);
  llvm::append_range(next, writes);
  return next;
}

// L2 prefetch (l2Ahead = D > 0, GPU cursors): at the start of each
// iteration, when l2Gate holds and the steps iv + depth + D ..
// iv + 2 depth + D - 1 lie inside T but the last (a lagged read of a reverse
// scan reads the row before its step's), the thread asks L2 for those
// steps' reads (prefetch.global.L2): D steps ahead of the slots' refills,
// with no register held. The test is uniform across the launch.
void TimeLoopEmitter::emitL2Prefetch(Value iv, ValueRange carried) {
  SmallVector<Value> reads = cursorsOf(carried).first;
  Value limit =
      arith::SubIOp::create(b, loc, ops.tSize, e.cst(2 * depth + l2Ahead));
  Value cond = below(iv, limit);
  if (l2Gate)
    cond = arith::AndIOp::create(b, loc, cond, l2Gate);
  scf::IfOp::create(b, loc, cond, [&](OpBuilder &nb, Location) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
    for (auto [k, cursor] : llvm::enumerate(reads)) {
      Value p = addBytes(cursor, aheadOffsets[k]);
      for (unsigned j = 0; j < depth; ++j) {
        if (j)
          p = addBytes(p, readSeqs[k].stride);
        asmOp(TypeRange{}, ValueRange{p}, "prefetch.global.L2 [$0];", "l",
              true);
      }
    }
    scf::YieldOp::create(b, loc);
  });
}

// Software pipelining with depth P: P slots each hold one step's reads, in
// registers, as loaded. The loop advances P steps per iteration; its body is
// unrolled P times, and copy j computes step iv + j from slot j's current
// value, then issues the reads of step iv + j + P into the slot's next
// value. Every slot keeps its registers across the back edge: no copy
// between slots, so no instruction waits on a load until the step that uses
// it, and each thread keeps P steps of loads in flight. Copies past T (the
// last iteration, T not a multiple of P) are skipped, and so are refills
// past T, by branches that are uniform across the launch: nothing is read or
// written outside the tensors (T = 0 reads nothing: the buffers may then be
// empty or null).
SmallVector<Value> TimeLoopEmitter::emitPipelinedLoop(ArrayRef<Value> init) {
  SmallVector<Value> slots, reads(readStart);
  for (unsigned j = 0; j < depth; ++j) {
    llvm::append_range(slots, refill(e.cst(j), reads, {}));
    reads = advance(reads, readSeqs);
  }
  SmallVector<Value> carriedInit(init);
  llvm::append_range(carriedInit, slots);
  llvm::append_range(carriedInit, reads);
  llvm::append_range(carriedInit, writeStart);
  // A small body gets a second, unchecked copy of the iteration for every
  // iteration but the last one or two (iv + 2 * depth - 1 < T: all its
  // steps and refills are inside): the per-step bound tests and the
  // predication ptxas makes of them are about a fifth of lif's step (6 of
  // 31 SASS instructions, bf16 inference). A large body keeps one copy
  // (compile time; its tests are a small part of its step).
  bool unchecked = depth * width * countBodyOps(scan) <= kMaxUnrolledOps / 2;
  bool l2 = l2Ahead && opaque && numReadCursors;
  if (l2)
    for (const Seq &seq : readSeqs)
      aheadOffsets.push_back(
          arith::MulIOp::create(b, loc, seq.stride, e.cst(l2Ahead)));
  auto loop = scf::ForOp::create(
      b, loc, zero, ops.tSize, e.cst(depth), carriedInit,
      [&](OpBuilder &nb, Location, Value iv, ValueRange carried) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
        if (l2)
          emitL2Prefetch(iv, carried);
        if (!unchecked) {
          scf::YieldOp::create(b, loc, emitIteration(iv, carried, true));
          return;
        }
        // iv < T - (2 * depth - 1), signed: no overflow for any T >= 0.
        Value bound =
            arith::SubIOp::create(b, loc, ops.tSize, e.cst(2 * depth - 1));
        scf::YieldOp::create(
            b, loc,
            ifElse(
                below(iv, bound),
                [&] { return emitIteration(iv, carried, false); },
                [&] { return emitIteration(iv, carried, true); }));
      });
  return finishScan(loop.getResults().take_front(numCarriedStates));
}

SmallVector<Value> mlir::flexsn::emitNeuronScan(
    OpBuilder &b, Location loc, ScanOp scan, KernelVariant variant,
    ValueRange args, Value neuron, unsigned width, LaneAccess access,
    unsigned prefetch, CursorStep cursorStep, unsigned l2Ahead, Value l2Gate) {
  return TimeLoopEmitter(b, loc, scan, variant, args, neuron, width, access,
                         prefetch, cursorStep, l2Ahead, l2Gate)
      .emit();
}

/// Loads of states a chunk repair kernel's search keeps in flight (two a
/// chunk and state): its thread per neuron is alone on its neuron's
/// chunks, so the search's time is its round trips to memory.
static constexpr unsigned kRepairScanLoads = 64;

namespace {
/// Emits a chunk repair kernel's body (emitChunkRepair) for the thread of
/// one neuron.
class ChunkRepairEmitter {
public:
  ChunkRepairEmitter(OpBuilder &b, Location loc, ScanOp scan,
                     KernelVariant variant, ValueRange args, Value neuron)
      : b(b), loc(loc), scan(scan), variant(variant), args(args),
        neuron(neuron), ops(scan, variant, args),
        e(b, loc, scan, 1, LaneAccess::Scalar, neuron, args.front(),
          /*rawBits=*/false),
        numSt(scan.getNumStates()),
        finals(variant == KernelVariant::FinalState), one(e.cst(1)),
        w(e.cst(scan.getChunkWidth())) {}

  void emit();

private:
  /// Where chunk `c`'s neuron sits in the per-neuron tensors.
  Value neuronOf(OpBuilder &nb, Value c) {
    return arith::AddIOp::create(nb, loc, arith::MulIOp::create(nb, loc, c, w),
                                 neuron);
  }
  /// State k where chunk `c` ends: its final state, or its last step
  /// (chunk c's block of T rows of W).
  Value endOf(OpBuilder &nb, unsigned k, Value c);
  /// Chunk c's starts and the ends of the chunk before in this launch, in
  /// pairs (state k: 2k, 2k + 1).
  SmallVector<Value> borderOf(OpBuilder &nb, Value c);
  /// Whether a chunk started from a state other than the end before it.
  Value startDiffers(OpBuilder &nb, ArrayRef<Value> border);
  /// The first chunk from `from` on whose start differs from the end of
  /// the chunk before in memory (C: none).
  Value firstWrongFrom(OpBuilder &nb, Value from);
  /// Chunk `c`'s start set to the end before it, and the chunk rerun.
  void rerun(OpBuilder &nb, Value c);

  OpBuilder &b;
  Location loc;
  ScanOp scan;
  KernelVariant variant;
  ValueRange args;
  Value neuron;
  ScanOperands ops;
  NeuronScanEmitter e;
  unsigned numSt;
  bool finals;
  Value one, w;
  Value lastRow, chunkSize, chunks, lastChunk; // set by emit()
};
} // namespace

Value ChunkRepairEmitter::endOf(OpBuilder &nb, unsigned k, Value c) {
  auto [base, elt] = ops.stateOuts[k];
  Value at = finals ? neuronOf(nb, c)
                    : arith::AddIOp::create(
                          nb, loc, arith::MulIOp::create(nb, loc, c, chunkSize),
                          arith::AddIOp::create(nb, loc, lastRow, neuron))
                          .getResult();
  return LLVM::LoadOp::create(nb, loc, elt, e.gep(base, elt, at),
                              e.bytes(elt));
}

SmallVector<Value> ChunkRepairEmitter::borderOf(OpBuilder &nb, Value c) {
  Value at = neuronOf(nb, c);
  Value before = arith::SubIOp::create(nb, loc, c, one);
  SmallVector<Value> vals;
  for (unsigned k = 0; k < numSt; ++k) {
    auto [base, elt] = ops.states[k];
    vals.push_back(LLVM::LoadOp::create(nb, loc, elt, e.gep(base, elt, at),
                                        e.bytes(elt)));
    vals.push_back(endOf(nb, k, before));
  }
  return vals;
}

Value ChunkRepairEmitter::startDiffers(OpBuilder &nb, ArrayRef<Value> border) {
  auto bits = [&](Value v) -> Value {
    Type t = nb.getIntegerType(v.getType().getIntOrFloatBitWidth());
    return arith::BitcastOp::create(nb, loc, t, v);
  };
  Value differs;
  for (unsigned k = 0; k < numSt; ++k) {
    Value ne = arith::CmpIOp::create(nb, loc, arith::CmpIPredicate::ne,
                                     bits(border[2 * k]),
                                     bits(border[2 * k + 1]));
    differs = differs ? arith::OrIOp::create(nb, loc, differs, ne).getResult()
                      : ne;
  }
  return differs;
}

// `perTrip` chunks an iteration up to the first that holds one: their loads
// independent of one another, so that a search costs about C / perTrip
// round trips to memory, not C.
Value ChunkRepairEmitter::firstWrongFrom(OpBuilder &nb, Value from) {
  int perTrip = std::clamp<int>(kRepairScanLoads / (2 * numSt), 4, 32);
  Type i64 = nb.getI64Type();
  auto search = scf::WhileOp::create(
      nb, loc, TypeRange{i64, i64}, ValueRange{from, chunks},
      [&](OpBuilder &wb, Location, ValueRange at) {
        Value more = arith::AndIOp::create(
            wb, loc,
            arith::CmpIOp::create(wb, loc, arith::CmpIPredicate::ult, at[0],
                                  chunks),
            arith::CmpIOp::create(wb, loc, arith::CmpIPredicate::eq, at[1],
                                  chunks));
        scf::ConditionOp::create(wb, loc, more, at);
      },
      [&](OpBuilder &lb, Location, ValueRange at) {
        // Every load of the trip before the first comparison: ptxas keeps
        // the order it is given here, and loads interleaved with their
        // comparisons went one round trip at a time (about 150 ns a chunk
        // on an H200).
        SmallVector<Value> cs;
        SmallVector<SmallVector<Value>> borders;
        for (int u = 0; u < perTrip; ++u) {
          cs.push_back(arith::AddIOp::create(lb, loc, at[0], e.cst(u)));
          borders.push_back(borderOf(
              lb, arith::MinUIOp::create(lb, loc, cs.back(), lastChunk)));
        }
        Value found = chunks;
        for (int u = perTrip - 1; u >= 0; --u) {
          Value inside = arith::CmpIOp::create(
              lb, loc, arith::CmpIPredicate::ult, cs[u], chunks);
          Value hit = arith::AndIOp::create(lb, loc, inside,
                                            startDiffers(lb, borders[u]));
          found = arith::SelectOp::create(lb, loc, hit, cs[u], found);
        }
        scf::YieldOp::create(
            lb, loc,
            ValueRange{arith::AddIOp::create(lb, loc, at[0], e.cst(perTrip)),
                       found});
      });
  return search.getResult(1);
}

void ChunkRepairEmitter::rerun(OpBuilder &nb, Value c) {
  Value at = neuronOf(nb, c);
  Value before = arith::SubIOp::create(nb, loc, c, one);
  // Plain loads and stores: this thread writes the start it then reads,
  // and reads the end the rerun writes.
  for (unsigned k = 0; k < numSt; ++k) {
    auto [base, elt] = ops.states[k];
    LLVM::StoreOp::create(nb, loc, endOf(nb, k, before), e.gep(base, elt, at),
                          e.bytes(elt));
  }
  // Its reads in flight as the deep entry has them (one thread a neuron
  // is a launch of few threads): a core that never forgets reruns every
  // chunk, which is then the sequential scan, and one step of reads in
  // flight made that a round trip to memory a step.
  unsigned deep = getDeepEntryPrefetch(scan, variant, 0);
  emitNeuronScan(nb, loc, scan, variant, args, at, 1, LaneAccess::Scalar,
                 deep ? deep : choosePrefetchDepth(scan, 1), CursorStep::Plain);
}

void ChunkRepairEmitter::emit() {
  Value zero = e.cst(0), T = ops.tSize;
  // Whole chunks of a launch that has steps, and every start given: else
  // the launch read rows of NCL or zeros, and there is nothing to repair.
  Value ready = arith::AndIOp::create(
      b, loc,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                            arith::RemUIOp::create(b, loc, ops.ncl, w), zero),
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, T, zero));
  for (auto &slot : ops.states)
    ready = arith::AndIOp::create(b, loc, ready, e.isGiven(slot.first));
  lastRow = arith::MulIOp::create(b, loc, arith::SubIOp::create(b, loc, T, one),
                                  w);
  chunkSize = arith::MulIOp::create(b, loc, T, w);
  scf::IfOp::create(b, loc, ready, [&](OpBuilder &tb, Location) {
    chunks = arith::DivUIOp::create(tb, loc, ops.ncl, w);
    lastChunk = arith::SubIOp::create(tb, loc, chunks, one);
    // The chunks before `from` are the sequential scan's (chunk 0 is: it
    // starts from the call's state). Each round finds the first wrong
    // chunk from there, stores the end before it as its start and reruns
    // it in place, which makes it the sequential scan's; the chunks after
    // it that started from the end it now has are right without a rerun
    // (a neuron that forgot where the wrong chunk started).
    scf::WhileOp::create(
        tb, loc, TypeRange{tb.getI64Type()}, ValueRange{one},
        [&](OpBuilder &wb, Location, ValueRange from) {
          Value wrong = firstWrongFrom(wb, from[0]);
          Value more = arith::CmpIOp::create(wb, loc, arith::CmpIPredicate::ult,
                                             wrong, chunks);
          scf::ConditionOp::create(wb, loc, more, ValueRange{wrong});
        },
        [&](OpBuilder &wb, Location, ValueRange wrong) {
          rerun(wb, wrong[0]);
          scf::YieldOp::create(
              wb, loc, ValueRange{arith::AddIOp::create(wb, loc, wrong[0], one)});
        });
    scf::YieldOp::create(tb, loc);
  });
}

void mlir::flexsn::emitChunkRepair(OpBuilder &b, Location loc, ScanOp scan,
                                   KernelVariant variant, ValueRange args,
                                   Value neuron) {
  assert(hasChunkRepair(scan, variant) && "a scan without a repair kernel");
  ChunkRepairEmitter(b, loc, scan, variant, args, neuron).emit();
}

namespace {
/// Emits a CPU kernel's scan of neurons [begin, end) in blocks
/// (emitBlockScan): per block, the initial states into a stack buffer, the
/// steps with time outside and the block's neurons inside, then the final
/// states. Every address is a run's base (loop-invariant in the neuron
/// loop) plus the neuron's index i in the block, so that each run is
/// consecutive.
class BlockScanEmitter {
public:
  BlockScanEmitter(OpBuilder &b, Location loc, ScanOp scan,
                   KernelVariant variant, ValueRange args, unsigned block)
      : b(b), loc(loc), scan(scan), ops(scan, variant, args), args(args),
        block(block), computeType(scan.getComputeType()),
        f64(b.getF64Type()),
        ptrType(LLVM::LLVMPointerType::get(b.getContext())),
        numLa(scan.getNumLagged()), numSt(scan.getNumStates()),
        numPa(scan.getNumParams()), numOut(scan.getNumOutputs()),
        reverse(scan.getReverse()),
        finalOnly(variant == KernelVariant::FinalState),
        zero(arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0))
                 .getResult()),
        // Conversions, loads and stores at given addresses (one lane).
        e(b, loc, scan, 1, LaneAccess::Scalar, zero, args.front(),
          /*rawBits=*/true) {}

  SmallVector<Value> emit(Value begin, Value end);

private:
  using Slot = ScanOperands::Slot;
  using InnerBody = llvm::function_ref<SmallVector<Value>(Value, ValueRange)>;

  void setUp();
  SmallVector<Value> emitBlock(Value first, ValueRange acc);
  void emitInitialStates(Value first);
  void emitSteps(Value first);
  void emitStep(Value first, Value s);
  SmallVector<Value> emitFinalStates(Value first, ValueRange acc);

  /// The value at element i of the run at `base`, in the compute type.
  Value loadAt(Value base, Type elt, Value i) {
    return e.widen(e.loadRawAt(e.gep(base, elt, i), elt), elt).front();
  }
  /// The run of `slot` starting at element `offset`, or the zeros.
  Value run(const Slot &slot, Value offset) {
    Value at = e.gep(slot.first, slot.second, offset);
    auto it = givenOf.find(slot.first);
    if (it == givenOf.end())
      return at;
    return LLVM::SelectOp::create(b, loc, it->second, at, zeros);
  }
  Value stateAddr(unsigned k, Value i) {
    return e.gep(buffer, computeType,
                 arith::AddIOp::create(b, loc, e.cst(int64_t(k) * block), i));
  }
  Value loadState(unsigned k, Value i) {
    return LLVM::LoadOp::create(b, loc, computeType, stateAddr(k, i),
                                e.bytes(computeType));
  }
  void storeState(unsigned k, Value i, Value v) {
    LLVM::StoreOp::create(b, loc, v, stateAddr(k, i), e.bytes(computeType));
  }
  /// for (i = 0; i < count; ++i) carried = body(i, carried)
  SmallVector<Value> overBlock(ValueRange carried, InnerBody body) {
    auto loop = scf::ForOp::create(
        b, loc, zero, count, one, carried,
        [&](OpBuilder &ib, Location, Value i, ValueRange c) {
          OpBuilder::InsertionGuard g(b);
          b.setInsertionPoint(ib.getInsertionBlock(), ib.getInsertionPoint());
          scf::YieldOp::create(b, loc, body(i, c));
        });
    return SmallVector<Value>(loop.getResults());
  }

  OpBuilder &b;
  Location loc;
  ScanOp scan;
  ScanOperands ops;
  ValueRange args;
  unsigned block;
  Type computeType, f64, ptrType;
  unsigned numLa, numSt, numPa, numOut;
  bool reverse, finalOnly;
  Value zero;
  NeuronScanEmitter e;

  // Set by setUp().
  Value one, blockSize, tLast;
  /// A block of zeros on the stack, as long as a run of 8-byte elements: an
  /// optional pointer that is null reads its runs there.
  Value zeros;
  /// Per optional pointer, whether it is non-null.
  llvm::DenseMap<Value, Value> givenOf;
  /// The block's states, numSt rows of `block` compute-type values.
  Value buffer;
  /// Scalar params (loaded once); null for per-neuron ones.
  SmallVector<Value> scalarParams;
  // Per block: its size and its per-neuron params' runs.
  Value count;
  SmallVector<Value> paramRuns;
};
} // namespace

void BlockScanEmitter::setUp() {
  one = e.cst(1);
  blockSize = e.cst(block);
  if (!ops.optional.empty()) {
    zeros = LLVM::AllocaOp::create(b, loc, ptrType, b.getI8Type(),
                                   e.cst(int64_t(block) * 8), 64);
    LLVM::MemsetOp::create(
        b, loc, zeros,
        arith::ConstantOp::create(b, loc, b.getI8IntegerAttr(0)),
        e.cst(int64_t(block) * 8), /*isVolatile=*/false);
  }
  for (Value arg : args)
    if (ops.optional.contains(arg))
      givenOf[arg] = e.isGiven(arg);
  if (numSt)
    buffer = LLVM::AllocaOp::create(b, loc, ptrType, computeType,
                                    e.cst(int64_t(numSt) * block), 64);
  scalarParams.resize(numPa);
  for (auto [k, slot] : llvm::enumerate(ops.params))
    if (!scan.isPerNeuronParam(k))
      scalarParams[k] = e.convert(
          LLVM::LoadOp::create(b, loc, slot.second, slot.first,
                               e.bytes(slot.second)),
          computeType);
  tLast = arith::SubIOp::create(b, loc, ops.tSize, one);
}

SmallVector<Value> BlockScanEmitter::emit(Value begin, Value end) {
  setUp();
  SmallVector<Value> accInit;
  if (finalOnly)
    for (unsigned k = 0; k < numSt; ++k)
      if (scan.isSumState(k) && ops.stateOuts[k].first)
        accInit.push_back(
            arith::ConstantOp::create(b, loc, b.getFloatAttr(f64, 0.0)));
  // for (first = begin; first < end; first += block)
  auto blocks = scf::ForOp::create(
      b, loc, begin, end, blockSize, accInit,
      [&](OpBuilder &nb, Location, Value first, ValueRange acc) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
        count = arith::MinSIOp::create(
            b, loc, blockSize, arith::SubIOp::create(b, loc, end, first));
        scf::YieldOp::create(b, loc, emitBlock(first, acc));
      });
  return SmallVector<Value>(blocks.getResults());
}

SmallVector<Value> BlockScanEmitter::emitBlock(Value first, ValueRange acc) {
  paramRuns.assign(numPa, Value());
  for (auto [k, slot] : llvm::enumerate(ops.params))
    if (!scalarParams[k])
      paramRuns[k] = run(slot, first);
  emitInitialStates(first);
  emitSteps(first);
  if (!finalOnly)
    return SmallVector<Value>(acc);
  return emitFinalStates(first, acc);
}

void BlockScanEmitter::emitInitialStates(Value first) {
  SmallVector<Value> initRuns(numSt);
  for (auto [k, slot] : llvm::enumerate(ops.states))
    if (slot.first)
      initRuns[k] = run(slot, first);
  overBlock({}, [&](Value i, ValueRange) {
    for (unsigned k = 0; k < numSt; ++k) {
      Value v = initRuns[k]
                    ? loadAt(initRuns[k], ops.states[k].second, i)
                    : arith::ConstantOp::create(
                          b, loc,
                          b.getFloatAttr(computeType,
                                         *getConstantInitState(scan, k)))
                          .getResult();
      storeState(k, i, v);
    }
    return SmallVector<Value>();
  });
}

/// The steps: time outside, the block's neurons inside.
void BlockScanEmitter::emitSteps(Value first) {
  scf::ForOp::create(b, loc, zero, ops.tSize, one, ValueRange{},
                     [&](OpBuilder &tb, Location, Value s, ValueRange) {
                       OpBuilder::InsertionGuard g(b);
                       b.setInsertionPoint(tb.getInsertionBlock(),
                                           tb.getInsertionPoint());
                       emitStep(first, s);
                       scf::YieldOp::create(b, loc);
                     });
}

/// Step s of the block's neurons.
void BlockScanEmitter::emitStep(Value first, Value s) {
  Value t = reverse ? arith::SubIOp::create(b, loc, tLast, s).getResult() : s;
  Value at = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, t, ops.ncl), first);
  SmallVector<Value> inRuns, lagRuns, outRuns, seqRuns;
  for (const Slot &slot : ops.inputs)
    inRuns.push_back(run(slot, at));
  // A lagged operand reads row t - 1, or its init at t = 0.
  if (numLa) {
    Value started =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, t, zero);
    Value before = arith::SubIOp::create(b, loc, at, ops.ncl);
    for (auto [seq, init] : llvm::zip_equal(ops.lagged, ops.laggedInit))
      lagRuns.push_back(LLVM::SelectOp::create(
          b, loc, started, run(seq, before), run(init, first)));
  }
  for (const Slot &slot : ops.outputs)
    outRuns.push_back(slot.first ? run(slot, at) : Value());
  for (const Slot &slot : ops.stateOuts)
    seqRuns.push_back(!finalOnly && slot.first ? run(slot, at) : Value());
  overBlock({}, [&](Value i, ValueRange) {
    SmallVector<Value> laneArgs;
    for (auto [k, slot] : llvm::enumerate(ops.inputs))
      laneArgs.push_back(loadAt(inRuns[k], slot.second, i));
    for (auto [k, slot] : llvm::enumerate(ops.lagged))
      laneArgs.push_back(loadAt(lagRuns[k], slot.second, i));
    for (unsigned k = 0; k < numSt; ++k)
      laneArgs.push_back(loadState(k, i));
    for (auto [k, slot] : llvm::enumerate(ops.params))
      laneArgs.push_back(scalarParams[k]
                             ? scalarParams[k]
                             : loadAt(paramRuns[k], slot.second, i));
    SmallVector<Value> res = e.emitBody(laneArgs);
    for (auto [k, out] : llvm::enumerate(ops.outputs))
      if (outRuns[k])
        e.storeAt(e.gep(outRuns[k], out.second, i), out.second, res[k]);
    for (unsigned k = 0; k < numSt; ++k) {
      Value next = res[numOut + k];
      if (seqRuns[k])
        e.storeAt(e.gep(seqRuns[k], ops.stateOuts[k].second, i),
                  ops.stateOuts[k].second, next);
      storeState(k, i, next);
    }
    return SmallVector<Value>();
  });
}

/// The final states (final_state kernels): stored, or summed over neurons
/// into this call's f64 partial sums (`acc`, returned updated).
SmallVector<Value> BlockScanEmitter::emitFinalStates(Value first,
                                                     ValueRange acc) {
  SmallVector<Value> finalRuns(numSt);
  for (unsigned k = 0; k < numSt; ++k)
    if (ops.stateOuts[k].first && !scan.isSumState(k))
      finalRuns[k] = run(ops.stateOuts[k], first);
  return overBlock(acc, [&](Value i, ValueRange partial) {
    SmallVector<Value> next;
    unsigned a = 0;
    for (unsigned k = 0; k < numSt; ++k) {
      const Slot &st = ops.stateOuts[k];
      if (!st.first)
        continue;
      Value v = loadState(k, i);
      if (scan.isSumState(k)) {
        next.push_back(
            arith::AddFOp::create(b, loc, partial[a++], e.convert(v, f64)));
        continue;
      }
      e.storeAt(e.gep(finalRuns[k], st.second, i), st.second, v);
    }
    return next;
  });
}

SmallVector<Value> mlir::flexsn::emitBlockScan(OpBuilder &b, Location loc,
                                               ScanOp scan,
                                               KernelVariant variant,
                                               ValueRange args, Value begin,
                                               Value end, unsigned block) {
  return BlockScanEmitter(b, loc, scan, variant, args, block).emit(begin, end);
}

unsigned mlir::flexsn::getDeepEntryPrefetch(ScanOp scan, KernelVariant variant,
                                            unsigned prefetchOption) {
  if (prefetchOption)
    return 0;
  unsigned bytes = 0;
  for (Value v : llvm::concat<Value>(scan.getInputs(), scan.getLagged()))
    bytes += getElementTypeOrSelf(v.getType()).getIntOrFloatBitWidth() / 8;
  if (bytes == 0)
    return 0;
  // A kernel that writes no sequence (final states alone: chunk guesses,
  // transfer functions) moves only what it reads, so it needs twice the
  // reads in flight of one that also writes to move bytes at the same pace.
  bool readsOnly =
      variant == KernelVariant::FinalState && scan.getNumOutputs() == 0;
  unsigned wanted = readsOnly ? 2 * kDeepReadBytes : kDeepReadBytes;
  // About `wanted` bytes of reads, and at least kDeepMinSteps steps within
  // kDeepMaxReadBytes: a kernel reading many 16-bit sequences a step
  // (two_in_two_state's bf16 backward: 8, 16 bytes) has a shallow scalar
  // entry (5 steps), and 64 bytes would be shallower still. Within the
  // unchecked copy's size bound (emitNeuronScan), which is what makes a
  // deep loop cheap once T is several depths long.
  unsigned minSteps = std::min(kDeepMinSteps, kDeepMaxReadBytes / bytes);
  unsigned depth = std::min({kMaxPrefetchDepth,
                             std::max(wanted / bytes, minSteps),
                             kMaxUnrolledOps / 2 / countBodyOps(scan)});
  return depth > choosePrefetchDepth(scan, 1) ? depth : 0;
}

unsigned mlir::flexsn::choosePrefetchDepth(ScanOp scan, unsigned width) {
  unsigned reads = (scan.getNumInputs() + scan.getNumLagged()) * width;
  // With 32 or more registers of reads a step (two_in_two_state's backward
  // at 4 lanes: 8 sequences), a second slot took that kernel past 128
  // registers on sm_90 and halved its occupancy (103% of copy -> 76% at
  // T=4 NCL=4M, f32, on an H100).
  if (reads == 0 || reads >= 32)
    return 1;
  unsigned byReads = std::clamp(1 + 32 / reads, 1u, 8u);
  // Each slot is one more copy of the body per lane. A large body is
  // mostly arithmetic, which covers its own loads' latency, while its
  // copies cost compile time in MLIR -> PTX and in the driver's PTX -> SASS
  // (here, a generated 300-op core's training program: MLIR -> PTX 3.6 s
  // -> 1.0 s, ptxas of its forward and backward entries 2.3 s -> 0.8 s;
  // every example core and the tutorial's stay as they were).
  unsigned bySize =
      std::max(1u, kMaxUnrolledOps / (countBodyOps(scan) * width));
  return std::min(byReads, bySize);
}
