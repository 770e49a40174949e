//===- AffineStates.cpp - Mark scans whose states update affinely ---------===//
//
// flexsn-affine-states: records analyzeAffineStates' proof on every scan
// (flexsn.affine_states, flexsn.state_reads), and with `explain` remarks at
// the op where an update stops being affine.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/Utils/AffineStates.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir {
namespace flexsn {
#define GEN_PASS_DEF_FLEXSNAFFINESTATES
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h.inc"
} // namespace flexsn
} // namespace mlir

using namespace mlir;
using namespace mlir::flexsn;

namespace {
struct FlexSNAffineStatesPass
    : public mlir::flexsn::impl::FlexSNAffineStatesBase<FlexSNAffineStatesPass> {
  using Base::Base;

  void runOnOperation() override {
    getOperation().walk([&](ScanOp scan) { mark(scan); });
  }

  void mark(ScanOp scan) {
    Builder b(scan.getContext());
    SmallVector<bool> affine;
    SmallVector<Attribute> reads;
    for (auto [i, u] : llvm::enumerate(analyzeAffineStates(scan))) {
      affine.push_back(u.affine);
      SmallVector<int64_t> which;
      if (u.affine)
        for (unsigned j : u.reads.set_bits())
          which.push_back(j);
      reads.push_back(b.getDenseI64ArrayAttr(which));
      if (explain && !u.affine)
        (u.culprit ? u.culprit : scan.getOperation())->emitRemark()
            << "state #" << i << " is not affine in the states: " << u.reason;
    }
    scan->setAttr("flexsn.affine_states", b.getDenseBoolArrayAttr(affine));
    scan->setAttr("flexsn.state_reads", b.getArrayAttr(reads));
  }
};
} // namespace
