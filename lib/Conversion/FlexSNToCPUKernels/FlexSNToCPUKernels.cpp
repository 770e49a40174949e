//===- FlexSNToCPUKernels.cpp - flexsn.scan to CPU loops -------------------------===//

#include "flexsn/Conversion/Passes.h"
#include "../Common/TimeLoops.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mlir {
namespace flexsn {
#define GEN_PASS_DEF_CONVERTFLEXSNTOCPUKERNELS
#include "flexsn/Conversion/Passes.h.inc"
} // namespace flexsn
} // namespace mlir

using namespace mlir;
using namespace mlir::flexsn;

namespace {

/// Emits the body of one CPU kernel function (its entry block's builder
/// `b`, its arguments `args` as `abi` lists them) and returns after the
/// scan: blocks of neurons, or at `prefetch` > 1 the GPU's pipelined loop
/// one neuron at a time.
void emitKernelBody(OpBuilder &b, Location loc, ScanOp scan,
                    KernelVariant variant, ArrayRef<KernelArg> abi,
                    ValueRange args, unsigned prefetch) {
  Value begin = args[args.size() - 2], end = args.back();
  // Sums over neurons (sum_states): this call's share, accumulated in
  // f64 (an f32 running sum over a million neurons loses 1e-5), then
  // rounded once and added atomically at the end (callers run chunks
  // of NCL in parallel).
  Type f64 = b.getF64Type();
  SmallVector<Value> sumPtrs;
  SmallVector<Type> sumTypes;
  collectSumStates(abi, args, sumPtrs, sumTypes);
  SmallVector<Value> sums;
  // Chunks side by side (flexsn.chunk_width) are not runs of consecutive
  // elements a block could vectorize: one neuron at a time.
  if (prefetch == 1 && !scan.getChunkWidth()) {
    // Blocks of neurons, time outside, neurons inside: consecutive
    // accesses that LLVM vectorizes (emitBlockScan).
    sums = emitBlockScan(b, loc, scan, variant, args, begin, end,
                         kCPUBlockNeurons);
  } else {
    // The GPU's time loop (pipelined at prefetch > 1, to test that
    // transformation against the interpreter), one neuron at a time.
    Value one = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(1));
    auto widen = [&](OpBuilder &nb, Value v) -> Value {
      return v.getType() == f64
                 ? v
                 : arith::ExtFOp::create(nb, loc, f64, v).getResult();
    };
    SmallVector<Value> zeros;
    if (!sumPtrs.empty())
      zeros.assign(sumPtrs.size(),
                   arith::ConstantOp::create(b, loc, b.getFloatAttr(f64, 0.0)));
    auto loop = scf::ForOp::create(
        b, loc, begin, end, one, zeros,
        [&](OpBuilder &nb, Location, Value n, ValueRange acc) {
          SmallVector<Value> partials =
              emitNeuronScan(nb, loc, scan, variant, args, n, /*width=*/1,
                             LaneAccess::Scalar, prefetch, CursorStep::Plain);
          SmallVector<Value> next;
          for (auto [a, p] : llvm::zip_equal(acc, partials))
            next.push_back(arith::AddFOp::create(nb, loc, a, widen(nb, p)));
          scf::YieldOp::create(nb, loc, next);
        });
    sums.assign(loop.getResults().begin(), loop.getResults().end());
  }
  for (auto [ptr, sum, type] : llvm::zip_equal(sumPtrs, sums, sumTypes)) {
    Value rounded = type == f64
                        ? sum
                        : arith::TruncFOp::create(b, loc, type, sum).getResult();
    emitAtomicAdd(b, loc, ptr, rounded);
  }
  func::ReturnOp::create(b, loc);
}

/// Replaces the function holding `scan` by one kernel function per kernel
/// spec: pointers as `!llvm.ptr`, the neuron range [begin, end) last.
void lowerScan(ScanOp scan, unsigned prefetch) {
  auto func = cast<func::FuncOp>(scan->getParentOp());
  MLIRContext *ctx = scan.getContext();
  Type ptrType = LLVM::LLVMPointerType::get(ctx);
  Location loc = scan.getLoc();
  OpBuilder b(func);
  for (const KernelSpec &spec : getKernelSpecs(scan)) {
    SmallVector<KernelArg> abi = getKernelABI(scan, spec.variant, /*cpu=*/true);
    SmallVector<Type> types;
    for (const KernelArg &arg : abi)
      types.push_back(arg.isPointer() ? ptrType : arg.type);
    b.setInsertionPoint(func);
    auto kernel = func::FuncOp::create(b, loc, spec.name,
                                       FunctionType::get(ctx, types, {}));
    kernel->setAttr(kVariantAttr, b.getStringAttr(spec.kind));
    Block *entry = kernel.addEntryBlock();
    b.setInsertionPointToStart(entry);
    emitKernelBody(b, loc, scan, spec.variant, abi, entry->getArguments(),
                   prefetch);
    if (!hasChunkRepair(scan, spec.variant))
      continue;
    // Its chunk repair kernel (emitChunkRepair): the neurons of the range
    // below the chunk width walk their chunks.
    b.setInsertionPoint(func);
    auto repair =
        func::FuncOp::create(b, loc, getRepairKernelName(spec.name),
                             FunctionType::get(ctx, types, {}));
    repair->setAttr(kVariantAttr, b.getStringAttr(spec.kind));
    Block *body = repair.addEntryBlock();
    b.setInsertionPointToStart(body);
    ValueRange args = body->getArguments();
    Value width = arith::ConstantOp::create(
        b, loc, b.getI64IntegerAttr(scan.getChunkWidth()));
    Value end = arith::MinSIOp::create(b, loc, args.back(), width);
    scf::ForOp::create(
        b, loc, args[args.size() - 2], end,
        arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(1)), ValueRange{},
        [&](OpBuilder &nb, Location, Value n, ValueRange) {
          emitChunkRepair(nb, loc, scan, spec.variant, args, n);
          scf::YieldOp::create(nb, loc);
        });
    func::ReturnOp::create(b, loc);
  }
  func.erase();
}

/// expm1 and log1p exist for small arguments: MLIR 22's math-to-llvm
/// writes them as exp(x) - 1 and log(1 + x), which lose every digit at
/// |x| ~ 1e-7 in f32 (2% error at 1e-6; found by flexsn-fuzz through a
/// -0.0 that exp(x) - 1 turns into +0.0). Call libm's expm1/log1p, as
/// the GPU calls libdevice's.
void callLibmForExpm1AndLog1p(ModuleOp module) {
  auto libmCall = [&](Operation *op, StringRef f32Name, StringRef f64Name) {
    Type type = op->getResult(0).getType();
    if (!type.isF32() && !type.isF64())
      return;
    StringRef name = type.isF32() ? f32Name : f64Name;
    auto callee = module.lookupSymbol<func::FuncOp>(name);
    if (!callee) {
      OpBuilder mb = OpBuilder::atBlockBegin(module.getBody());
      callee = func::FuncOp::create(
          mb, op->getLoc(), name,
          FunctionType::get(op->getContext(), {type}, {type}));
      callee.setPrivate();
    }
    OpBuilder b(op);
    auto call =
        func::CallOp::create(b, op->getLoc(), callee, op->getOperand(0));
    op->replaceAllUsesWith(call.getResults());
    op->erase();
  };
  SmallVector<Operation *> libmOps;
  module.walk([&](Operation *op) {
    if (isa<math::ExpM1Op, math::Log1pOp>(op))
      libmOps.push_back(op);
  });
  for (Operation *op : libmOps) {
    if (isa<math::ExpM1Op>(op))
      libmCall(op, "expm1f", "expm1");
    else
      libmCall(op, "log1pf", "log1p");
  }
}

/// bf16 storage is read and written as i16 bits, widened and narrowed
/// with integer ops: no bf16 value reaches the x86 back end, whose
/// lowering of a bf16 load bitcast to i16 loses the sign bit in LLVM 22
/// (copysign of two widened bf16 inputs came out positive; found by
/// flexsn-fuzz, test/Integration/CPU/bf16-sign.mlir).
void accessBF16AsBits(ModuleOp module) {
  MLIRContext *ctx = module.getContext();
  Type bf16 = BFloat16Type::get(ctx);
  Type i16 = IntegerType::get(ctx, 16);
  Type i32 = IntegerType::get(ctx, 32);
  Type f32 = Float32Type::get(ctx);
  SmallVector<LLVM::LoadOp> loads;
  module.walk([&](LLVM::LoadOp load) {
    if (load.getType() == bf16)
      loads.push_back(load);
  });
  for (LLVM::LoadOp load : loads) {
    OpBuilder b(load);
    Location loc = load.getLoc();
    Value bits = LLVM::LoadOp::create(b, loc, i16, load.getAddr(),
                                      load.getAlignment().value_or(2));
    Value wide = arith::ExtUIOp::create(b, loc, i32, bits);
    Value shifted = arith::ShLIOp::create(
        b, loc, wide,
        arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(16)));
    Value asF32 = arith::BitcastOp::create(b, loc, f32, shifted);
    for (Operation *user : llvm::make_early_inc_range(load->getUsers())) {
      auto ext = dyn_cast<arith::ExtFOp>(user);
      if (!ext)
        continue;
      OpBuilder ub(ext);
      Value to = ext.getType() == f32
                     ? asF32
                     : arith::ExtFOp::create(ub, loc, ext.getType(), asF32)
                           .getResult();
      ext.replaceAllUsesWith(to);
      ext.erase();
    }
    if (!load->use_empty())
      load.replaceAllUsesWith(
          arith::BitcastOp::create(b, loc, bf16, bits).getResult());
    load.erase();
  }
  module.walk([&](LLVM::StoreOp store) {
    if (store.getValue().getType() != bf16)
      return;
    OpBuilder b(store);
    Value bits =
        arith::BitcastOp::create(b, store.getLoc(), i16, store.getValue());
    store.getValueMutable().assign(bits);
  });
}

struct ConvertFlexSNToCPUKernelsPass
    : public mlir::flexsn::impl::ConvertFlexSNToCPUKernelsBase<
          ConvertFlexSNToCPUKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (prefetch < 1 || prefetch > kMaxPrefetchDepth) {
      module.emitError() << "prefetch must be 1 to " << kMaxPrefetchDepth
                         << ", got " << static_cast<unsigned>(prefetch);
      return signalPassFailure();
    }
    SmallVector<ScanOp> scans;
    if (failed(collectKernelScans(module, "CPU", scans)))
      return signalPassFailure();
    for (ScanOp scan : scans)
      lowerScan(scan, prefetch);
    callLibmForExpm1AndLog1p(module);
    accessBF16AsBits(module);
  }
};
} // namespace
