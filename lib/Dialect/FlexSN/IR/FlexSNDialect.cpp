//===- FlexSNDialect.cpp - FlexSN dialect ---------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::flexsn;

#include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.cpp.inc"

void FlexSNDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.cpp.inc"
      >();
  registerAttributes();
}

Operation *FlexSNDialect::materializeConstant(OpBuilder &builder,
                                              Attribute value, Type type,
                                              Location loc) {
  return arith::ConstantOp::materialize(builder, value, type, loc);
}

//===----------------------------------------------------------------------===//
// Discardable attributes
//===----------------------------------------------------------------------===//

static std::string knownNames() {
  std::string names;
  for (StringRef n : {kKernelKindAttr, kPrimalAttr, kRoleAttr, kIndexAttr,
                      kNoGradAttr, kSaveAttr, kVariantAttr, kAffineStatesAttr,
                      kStateReadsAttr, kChunkWidthAttr, kStateStorageAttr})
    names += (names.empty() ? "" : ", ") + n.str();
  return names;
}

/// flexsn.affine_states (one bool per state) and flexsn.state_reads (per
/// state, increasing state indices) on a flexsn.scan.
static LogicalResult verifyAffineStatesAttribute(Operation *op, StringRef name,
                                                 Attribute value) {
  auto scan = dyn_cast<ScanOp>(op);
  if (!scan)
    return op->emitError() << "'" << name << "' belongs on a flexsn.scan";
  int64_t numStates = scan.getNumStates();
  if (name == kAffineStatesAttr) {
    auto flags = dyn_cast<DenseBoolArrayAttr>(value);
    if (!flags || flags.size() != numStates)
      return op->emitError() << "'" << name << "' must be an array<i1> of "
                             << numStates << " (one per state), got " << value;
    return success();
  }
  auto rows = dyn_cast<ArrayAttr>(value);
  if (!rows || static_cast<int64_t>(rows.size()) != numStates)
    return op->emitError() << "'" << name << "' must be an array of "
                           << numStates << " array<i64> (one per state), got "
                           << value;
  for (auto [i, row] : llvm::enumerate(rows)) {
    auto reads = dyn_cast<DenseI64ArrayAttr>(row);
    if (!reads)
      return op->emitError() << "'" << name << "' entry #" << i
                             << " must be an array<i64>, got " << row;
    int64_t last = -1;
    for (int64_t j : reads.asArrayRef()) {
      if (j <= last || j >= numStates)
        return op->emitError()
               << "'" << name << "' entry #" << i
               << " must list increasing state indices below " << numStates
               << ", got " << row;
      last = j;
    }
  }
  return success();
}

LogicalResult FlexSNDialect::verifyOperationAttribute(Operation *op,
                                                      NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == kKernelKindAttr) {
    auto kind = dyn_cast<StringAttr>(attr.getValue());
    if (!isa<FunctionOpInterface>(op))
      return op->emitError() << "'" << name << "' belongs on a function";
    if (!kind || (kind.getValue() != "forward" && kind.getValue() != "backward"))
      return op->emitError() << "'" << name
                             << "' must be \"forward\" or \"backward\", got "
                             << attr.getValue();
    return success();
  }
  if (name == kVariantAttr) {
    auto kind = dyn_cast<StringAttr>(attr.getValue());
    if (!isa<FunctionOpInterface>(op))
      return op->emitError() << "'" << name << "' belongs on a function";
    if (!kind || !llvm::is_contained({"inference", "final_state", "forward",
                                      "backward"},
                                     kind.getValue()))
      return op->emitError() << "'" << name
                             << "' must be \"inference\", \"final_state\", "
                                "\"forward\" or \"backward\", got "
                             << attr.getValue();
    return success();
  }
  if (name == kPrimalAttr) {
    auto ref = dyn_cast<FlatSymbolRefAttr>(attr.getValue());
    if (!isa<FunctionOpInterface>(op) || !op->hasAttr(kKernelKindAttr))
      return op->emitError() << "'" << name << "' belongs on a function made "
                             << "by flexsn-differentiate (with '"
                             << kKernelKindAttr << "')";
    if (!ref)
      return op->emitError() << "'" << name
                             << "' must be a symbol reference, got "
                             << attr.getValue();
    if (!SymbolTable::lookupNearestSymbolFrom(op, ref))
      return op->emitError() << "'" << name << "' names " << ref
                             << ", which does not exist";
    return success();
  }
  if (name == kSaveAttr) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError() << "'" << name << "' must be a unit attribute";
    if (!isa_and_nonnull<ScanOp>(op->getParentOp()))
      return op->emitError() << "'" << name
                             << "' belongs on an op of a flexsn.scan body";
    return success();
  }
  if (name == kAffineStatesAttr || name == kStateReadsAttr)
    return verifyAffineStatesAttribute(op, name, attr.getValue());
  if (name == kChunkWidthAttr) {
    auto width = dyn_cast<IntegerAttr>(attr.getValue());
    if (!isa<ScanOp>(op))
      return op->emitError() << "'" << name << "' belongs on a flexsn.scan";
    if (!width || !width.getType().isInteger(64) || width.getInt() < 1)
      return op->emitError() << "'" << name
                             << "' must be an i64 of at least 1 (the "
                                "neurons of a chunk's row), got "
                             << attr.getValue();
    return success();
  }
  if (name == kStateStorageAttr) {
    auto type = dyn_cast<TypeAttr>(attr.getValue());
    if (!isa<ScanOp>(op))
      return op->emitError() << "'" << name << "' belongs on a flexsn.scan";
    if (!type || !isa<FloatType>(type.getValue()))
      return op->emitError() << "'" << name
                             << "' must be a float type (the states' "
                                "storage outside chunk borders), got "
                             << attr.getValue();
    return success();
  }
  if (name == kRoleAttr || name == kIndexAttr || name == kNoGradAttr)
    return op->emitError() << "'" << name
                           << "' belongs on a function argument or result";
  return op->emitError() << "unknown attribute '" << name
                         << "' of the flexsn dialect (known: " << knownNames()
                         << ")";
}

/// flexsn.role, flexsn.index and flexsn.no_grad on a function argument or
/// result (`what`).
static LogicalResult verifyValueAttribute(Operation *op, StringRef what,
                                          unsigned index,
                                          NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  auto fail = [&]() {
    return op->emitError() << what << " #" << index << ": ";
  };
  if (!isa<FunctionOpInterface>(op))
    return fail() << "'" << name << "' belongs on a function";
  if (name == kRoleAttr) {
    auto role = dyn_cast<StringAttr>(attr.getValue());
    if (!role || !symbolizeArgMeaning(role.getValue())) {
      std::string known;
      for (uint32_t m = 0; m <= getMaxEnumValForArgMeaning(); ++m)
        known += (known.empty() ? "" : ", ") +
                 stringifyArgMeaning(static_cast<ArgMeaning>(m)).str();
      return fail() << "'" << name << "' must be one of " << known << ", got "
                    << attr.getValue();
    }
    return success();
  }
  if (name == kIndexAttr) {
    auto i = dyn_cast<IntegerAttr>(attr.getValue());
    if (!i || !i.getType().isInteger(64) || i.getInt() < 0)
      return fail() << "'" << name << "' must be an i64 >= 0, got "
                    << attr.getValue();
    return success();
  }
  if (name == kNoGradAttr) {
    if (!isa<UnitAttr>(attr.getValue()))
      return fail() << "'" << name << "' must be a unit attribute";
    return success();
  }
  if (name == kKernelKindAttr || name == kPrimalAttr || name == kSaveAttr ||
      name == kVariantAttr || name == kAffineStatesAttr ||
      name == kStateReadsAttr || name == kChunkWidthAttr ||
      name == kStateStorageAttr)
    return fail() << "'" << name << "' belongs on an op, not on a "
                  << (what == "argument" ? "function argument"
                                         : "function result");
  return fail() << "unknown attribute '" << name
                << "' of the flexsn dialect (known: " << knownNames() << ")";
}

LogicalResult FlexSNDialect::verifyRegionArgAttribute(Operation *op,
                                                      unsigned regionIndex,
                                                      unsigned argIndex,
                                                      NamedAttribute attr) {
  return verifyValueAttribute(op, "argument", argIndex, attr);
}

LogicalResult FlexSNDialect::verifyRegionResultAttribute(Operation *op,
                                                         unsigned regionIndex,
                                                         unsigned resultIndex,
                                                         NamedAttribute attr) {
  return verifyValueAttribute(op, "result", resultIndex, attr);
}
