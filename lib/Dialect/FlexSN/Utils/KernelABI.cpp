//===- KernelABI.cpp - The kernel contract of a flexsn.scan ---------------===//

#include "flexsn/Dialect/FlexSN/Utils/KernelABI.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/SmallBitVector.h"

using namespace mlir;
using namespace mlir::flexsn;

#include "flexsn/Dialect/FlexSN/Utils/KernelABIEnums.cpp.inc"

//===----------------------------------------------------------------------===//
// Names
//===----------------------------------------------------------------------===//

ArrayRef<KernelVariant> mlir::flexsn::getAllKernelVariants() {
  static const KernelVariant all[] = {KernelVariant::Inference,
                                      KernelVariant::FinalState};
  return all;
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

std::string ArgDescription::str() const {
  return (stringifyArgMeaning(meaning) + " #" + Twine(index)).str();
}

/// The meaning of a pointer whose function carries no flexsn.role.
static ArgMeaning meaningOfRole(KernelArgRole role) {
  switch (role) {
  case KernelArgRole::Input:
    return ArgMeaning::Input;
  case KernelArgRole::Lagged:
    return ArgMeaning::Lagged;
  case KernelArgRole::LaggedInit:
    return ArgMeaning::LaggedInit;
  case KernelArgRole::InitState:
    return ArgMeaning::InitState;
  case KernelArgRole::Param:
  case KernelArgRole::ParamScalar:
    return ArgMeaning::Param;
  case KernelArgRole::Output:
    return ArgMeaning::Output;
  case KernelArgRole::StateSeq:
    return ArgMeaning::StateSeq;
  case KernelArgRole::FinalState:
    return ArgMeaning::FinalState;
  case KernelArgRole::SumState:
    return ArgMeaning::SumState;
  default:
    llvm_unreachable("T/NCL/begin/end are not pointers");
  }
}

ArgDescription mlir::flexsn::describeKernelArg(ScanOp scan,
                                               const KernelArg &arg) {
  assert(arg.isPointer() && "only pointers have a meaning");
  ArgDescription fallback{meaningOfRole(arg.role), arg.index};
  auto func = dyn_cast<func::FuncOp>(scan->getParentOp());
  if (!func)
    return fallback;
  auto fromAttrs = [&](DictionaryAttr attrs) {
    auto role = attrs ? attrs.getAs<StringAttr>(kRoleAttr) : StringAttr();
    auto index = attrs ? attrs.getAs<IntegerAttr>(kIndexAttr) : IntegerAttr();
    std::optional<ArgMeaning> meaning =
        role ? symbolizeArgMeaning(role.getValue()) : std::nullopt;
    if (!meaning || !index)
      return fallback;
    return ArgDescription{*meaning, static_cast<unsigned>(index.getInt())};
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

bool mlir::flexsn::isOptionalKernelArg(ScanOp scan, const KernelArg &arg) {
  if (arg.role != KernelArgRole::Input && arg.role != KernelArgRole::InitState &&
      arg.role != KernelArgRole::LaggedInit)
    return false;
  ArgMeaning m = describeKernelArg(scan, arg).meaning;
  // A gradient the caller does not have, or initial states that are zeros
  // (read by an inference or training forward, and as the lagged operand's
  // row before t = 0 by a backward).
  return m == ArgMeaning::GradOutput || m == ArgMeaning::GradStateSeq ||
         m == ArgMeaning::GradFinalState || m == ArgMeaning::InitState;
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

std::string mlir::flexsn::getScalarEntryName(StringRef kernel) {
  return (kernel + "_scalar").str();
}

std::string mlir::flexsn::getDeepEntryName(StringRef kernel) {
  return (kernel + "_deep").str();
}

bool mlir::flexsn::hasChunkRepair(ScanOp scan, KernelVariant variant) {
  if (!scan.getChunkWidth() || scan.getReverse())
    return false;
  unsigned numStates = scan.getNumStates();
  llvm::SmallBitVector reads(numStates), writes(numStates);
  for (const KernelArg &arg : getKernelABI(scan, variant, /*cpu=*/false)) {
    if (arg.role == KernelArgRole::SumState)
      return false;
    if (arg.role == KernelArgRole::InitState)
      reads.set(arg.index);
    if (arg.role == KernelArgRole::StateSeq ||
        arg.role == KernelArgRole::FinalState)
      writes.set(arg.index);
  }
  return numStates > 0 && reads.all() && writes.all();
}

std::string mlir::flexsn::getRepairKernelName(StringRef kernel) {
  return (kernel + "_repair").str();
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


bool mlir::flexsn::isResultRole(KernelArgRole role) {
  return role == KernelArgRole::Output || role == KernelArgRole::StateSeq ||
         role == KernelArgRole::FinalState || role == KernelArgRole::SumState;
}

ArgShape mlir::flexsn::getArgShape(KernelArgRole role) {
  switch (role) {
  case KernelArgRole::Input:
  case KernelArgRole::Lagged:
  case KernelArgRole::Output:
  case KernelArgRole::StateSeq:
    return ArgShape::Sequence;
  case KernelArgRole::ParamScalar:
  case KernelArgRole::SumState:
  case KernelArgRole::T:
  case KernelArgRole::NCL:
  case KernelArgRole::Begin:
  case KernelArgRole::End:
    return ArgShape::Scalar;
  case KernelArgRole::LaggedInit:
  case KernelArgRole::InitState:
  case KernelArgRole::Param:
  case KernelArgRole::FinalState:
    return ArgShape::PerNeuron;
  }
  llvm_unreachable("unknown role");
}

StringRef mlir::flexsn::stringifyArgShape(ArgShape shape) {
  switch (shape) {
  case ArgShape::Sequence:
    return "[T, NCL]";
  case ArgShape::PerNeuron:
    return "[NCL]";
  case ArgShape::Scalar:
    return "[]";
  }
  llvm_unreachable("unknown shape");
}

std::optional<int64_t> mlir::flexsn::getElementCount(ArgShape shape,
                                                     int64_t T, int64_t NCL) {
  switch (shape) {
  case ArgShape::Sequence: {
    int64_t elements;
    if (__builtin_mul_overflow(T, NCL, &elements))
      return std::nullopt;
    return elements;
  }
  case ArgShape::PerNeuron:
    return NCL;
  case ArgShape::Scalar:
    return 1;
  }
  llvm_unreachable("unknown shape");
}

int64_t mlir::flexsn::getElementCount(KernelArgRole role, int64_t T,
                                      int64_t NCL) {
  std::optional<int64_t> elements = getElementCount(getArgShape(role), T, NCL);
  assert(elements && "T * NCL overflows: callers bound it first");
  return *elements;
}
