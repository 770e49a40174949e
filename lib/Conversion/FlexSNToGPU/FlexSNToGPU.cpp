//===- FlexSNToGPU.cpp - flexsn.scan to GPU kernels -----------------------===//

#include "flexsn/Conversion/Passes.h"
#include "../Common/TimeLoops.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/StringSet.h"

namespace mlir {
namespace flexsn {
#define GEN_PASS_DEF_CONVERTFLEXSNTOGPU
#include "flexsn/Conversion/Passes.h.inc"
} // namespace flexsn
} // namespace mlir

using namespace mlir;
using namespace mlir::flexsn;

namespace {
struct ConvertFlexSNToGPUPass
    : public mlir::flexsn::impl::ConvertFlexSNToGPUBase<ConvertFlexSNToGPUPass> {
  using Base::Base;

  /// The pass's options in their ranges, else an error naming the option.
  LogicalResult checkOptions(ModuleOp module) {
    unsigned width = neuronsPerThread;
    if (width != 1 && width != 2 && width != 4 && width != 8)
      return module.emitError()
             << "neurons-per-thread must be 1, 2, 4 or 8, got " << width;
    if (l2Prefetch > kMaxL2Prefetch)
      return module.emitError()
             << "l2-prefetch must be 0 (none) to " << kMaxL2Prefetch
             << " steps, got " << static_cast<unsigned>(l2Prefetch);
    if (prefetch > kMaxPrefetchDepth)
      return module.emitError()
             << "prefetch must be 0 (automatic) to " << kMaxPrefetchDepth
             << ", got " << static_cast<unsigned>(prefetch);
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(checkOptions(module)))
      return signalPassFailure();
    unsigned width = neuronsPerThread;
    SmallVector<ScanOp> scans;
    if (failed(collectKernelScans(module, "GPU", scans)))
      return signalPassFailure();
    if (scans.empty())
      return;
    // A vector entry's lanes are contiguous and aligned in every row only
    // where the chunk width is a multiple of them.
    for (ScanOp scan : scans)
      if (int64_t chunk = scan.getChunkWidth(); chunk % width) {
        scan.emitOpError() << "'" << kChunkWidthAttr << "' = " << chunk
                           << " is not a multiple of neurons-per-thread ("
                           << width << ")";
        return signalPassFailure();
      }

    MLIRContext *ctx = &getContext();
    OpBuilder b(ctx);
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    b.getUnitAttr());
    Type ptrType = LLVM::LLVMPointerType::get(ctx);

    // Each kernel is one entry at `width` neurons per thread (vector
    // accesses); when width > 1, a second entry at one neuron per thread
    // (getScalarEntryName); and, for the kernels that read few bytes a step
    // (getDeepEntryPrefetch), a third at one neuron per thread with more
    // steps of reads in flight (getDeepEntryName), for launches with few
    // threads per SM. The runtime picks the entry of each launch, and
    // the driver compiles an entry only when a launch first takes it. Each
    // entry is in a gpu.module of its own name, so that the lowering to
    // NVVM and PTX handles the entries in parallel.
    SmallVector<gpu::GPUModuleOp> gpuModules;
    llvm::StringSet<> names;
    for (ScanOp scan : scans)
      for (const KernelSpec &spec : getKernelSpecs(scan))
        names.insert(spec.name);
    for (ScanOp scan : scans) {
      auto func = cast<func::FuncOp>(scan->getParentOp());
      Location loc = scan.getLoc();
      for (const KernelSpec &spec : getKernelSpecs(scan)) {
        KernelVariant variant = spec.variant;
        SmallVector<KernelArg> abi =
            getKernelABI(scan, variant, /*cpu=*/false);
        SmallVector<Type> types;
        for (const KernelArg &arg : abi)
          types.push_back(arg.isPointer() ? ptrType : arg.type);
        // A kernel function of the ABI's types in a gpu.module of its own.
        // The block size is chosen at launch (cuda::chooseScanBlockSize):
        // `block-size` is its maximum.
        auto newKernel = [&](StringRef name) {
          b.setInsertionPointToEnd(module.getBody());
          auto gpuModule = gpu::GPUModuleOp::create(b, loc, name);
          gpuModules.push_back(gpuModule);
          b.setInsertionPointToEnd(gpuModule.getBody());
          auto kernel = gpu::GPUFuncOp::create(
              b, loc, name, FunctionType::get(ctx, types, {}));
          kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                          b.getUnitAttr());
          kernel->setAttr(kVariantAttr, b.getStringAttr(spec.kind));
          return kernel;
        };
        auto addEntry = [&](StringRef name, unsigned lanes, unsigned depth) {
          buildKernelBody(b, loc, scan, variant, abi, newKernel(name), lanes,
                          depth);
        };
        auto depthAt = [&](unsigned lanes) {
          return prefetch ? unsigned(prefetch)
                          : choosePrefetchDepth(scan, lanes);
        };
        auto nameFree = [&](StringRef entry) {
          if (!names.contains(entry))
            return true;
          func.emitError() << "kernel '" << spec.name
                           << "' needs a GPU entry named '" << entry
                           << "', which is the name of another kernel; "
                              "rename one of the functions";
          return false;
        };
        addEntry(spec.name, width, depthAt(width));
        if (width > 1) {
          std::string scalar = getScalarEntryName(spec.name);
          if (!nameFree(scalar))
            return signalPassFailure();
          addEntry(scalar, 1, depthAt(1));
        }
        if (unsigned deep = getDeepEntryPrefetch(scan, variant, prefetch)) {
          std::string deepName = getDeepEntryName(spec.name);
          if (!nameFree(deepName))
            return signalPassFailure();
          addEntry(deepName, 1, deep);
        }
        if (hasChunkRepair(scan, variant)) {
          std::string repair = getRepairKernelName(spec.name);
          if (!nameFree(repair))
            return signalPassFailure();
          buildRepairBody(b, loc, scan, variant, newKernel(repair));
        }
      }
      func.erase();
    }
    for (gpu::GPUModuleOp gpuModule : gpuModules)
      if (failed(finishModule(gpuModule)))
        return signalPassFailure();
  }

  LogicalResult finishModule(gpu::GPUModuleOp gpuModule) {
    // Block-wide sums become shuffles and workgroup memory here, while
    // the kernels are still in the gpu dialect.
    RewritePatternSet patterns(&getContext());
    populateGpuAllReducePatterns(patterns);
    if (failed(applyPatternsGreedily(gpuModule, std::move(patterns))))
      return failure();
    // convert-gpu-to-nvvm (MLIR 22) has no lowering for math.trunc (the
    // round-toward-zero of torch.trunc/frac and of fmod's adjoint): write
    // it as x < 0 ? ceil(x) : floor(x) (NaN takes floor: NaN).
    gpuModule.walk([](math::TruncOp op) {
      OpBuilder b(op);
      Location loc = op.getLoc();
      Value x = op.getOperand();
      Value zero = arith::ConstantOp::create(
          b, loc, b.getFloatAttr(x.getType(), 0.0));
      Value negative =
          arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x, zero);
      Value up = math::CeilOp::create(b, loc, x);
      Value down = math::FloorOp::create(b, loc, x);
      op.replaceAllUsesWith(
          arith::SelectOp::create(b, loc, negative, up, down).getResult());
      op.erase();
    });
    return success();
  }

  /// The body of a chunk repair kernel (emitChunkRepair): thread g walks
  /// the chunks of neuron g < W, the chunk width; the others return.
  void buildRepairBody(OpBuilder &b, Location loc, ScanOp scan,
                       KernelVariant variant, gpu::GPUFuncOp kernel) {
    Block &entry = kernel.getBody().front();
    b.setInsertionPointToStart(&entry);
    auto toI64 = [&](Value index) -> Value {
      return arith::IndexCastUIOp::create(b, loc, b.getI64Type(), index);
    };
    Value g = arith::AddIOp::create(
        b, loc,
        arith::MulIOp::create(
            b, loc, toI64(gpu::BlockIdOp::create(b, loc, gpu::Dimension::x)),
            toI64(gpu::BlockDimOp::create(b, loc, gpu::Dimension::x))),
        toI64(gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x)));
    Value inRange = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::slt, g,
        arith::ConstantOp::create(b, loc,
                                  b.getI64IntegerAttr(scan.getChunkWidth())));
    scf::IfOp::create(b, loc, inRange, [&](OpBuilder &nb, Location) {
      emitChunkRepair(nb, loc, scan, variant, entry.getArguments(), g);
      scf::YieldOp::create(nb, loc);
    });
    gpu::ReturnOp::create(b, loc);
  }

  /// The body of a kernel entry scanning `lanes` neurons per thread: vector
  /// accesses when lanes > 1, which the launch allows only when NCL is a
  /// multiple of `lanes` and every [T, NCL] or [NCL] pointer is aligned to
  /// `lanes` elements (cuda::ScanKernel::launch).
  void buildKernelBody(OpBuilder &b, Location loc, ScanOp scan,
                       KernelVariant variant, ArrayRef<KernelArg> abi,
                       gpu::GPUFuncOp kernel, unsigned lanes, unsigned depth) {
    Block &entry = kernel.getBody().front();
    b.setInsertionPointToStart(&entry);
    ValueRange args = entry.getArguments();
    auto cst = [&](int64_t v) -> Value {
      return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
    };
    auto toI64 = [&](Value index) -> Value {
      return arith::IndexCastUIOp::create(b, loc, b.getI64Type(), index);
    };
    Value bid = toI64(gpu::BlockIdOp::create(b, loc, gpu::Dimension::x));
    Value tid = toI64(gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x));
    Value bdim = toI64(gpu::BlockDimOp::create(b, loc, gpu::Dimension::x));
    Value g = arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, bid, bdim), tid);
    Value base = lanes == 1 ? g : arith::MulIOp::create(b, loc, g, cst(lanes));
    Value ncl;
    for (auto [arg, value] : llvm::zip(abi, args))
      if (arg.role == KernelArgRole::NCL)
        ncl = value;
    // Sums over neurons (sum_states): per thread, then per block, then one
    // atomic add per block.
    SmallVector<Value> sumPtrs;
    SmallVector<Type> sumTypes;
    collectSumStates(abi, args, sumPtrs, sumTypes);
    // Each thread's share is in the compute type; the block's sum and the
    // atomic add across blocks are in f64 (the buffer's type).
    Type computeType = scan.getComputeType();
    // One neuron per thread at few threads per SM: L2 prefetch ahead of
    // the slots (emitNeuronScan), when NCL <= kL2PrefetchMaxThreadsPerSM x
    // %nsmid: there it hides latency the few warps cannot (lif at T=1024
    // NCL=16K, 124 threads per SM: bf16 inference 54 -> 67% of copy), while
    // at more threads per SM it costs bandwidth (up to 28 points of f32
    // backward at 496).
    unsigned l2Ahead = lanes == 1 && depth > 1 ? unsigned(l2Prefetch) : 0;
    Value l2Gate;
    if (l2Ahead) {
      Value sms = arith::ExtUIOp::create(
          b, loc, b.getI64Type(), NVVM::SmDimOp::create(b, loc, b.getI32Type()));
      l2Gate = arith::CmpIOp::create(
          b, loc, arith::CmpIPredicate::ule, ncl,
          arith::MulIOp::create(b, loc, sms, cst(kL2PrefetchMaxThreadsPerSM)));
    }
    Value inRange =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, base, ncl);
    auto guard = scf::IfOp::create(
        b, loc, inRange,
        [&](OpBuilder &nb, Location) {
          scf::YieldOp::create(
              nb, loc,
              emitNeuronScan(nb, loc, scan, variant, args, base, lanes,
                             lanes == 1 ? LaneAccess::Scalar
                                        : LaneAccess::Vector,
                             depth, CursorStep::OpaqueGlobal, l2Ahead,
                             l2Gate));
        },
        [&](OpBuilder &eb, Location) {
          scf::YieldOp::create(
              eb, loc, llvm::map_to_vector(sumTypes, [&](Type) -> Value {
                return arith::ConstantOp::create(
                    eb, loc, eb.getFloatAttr(computeType, 0.0));
              }));
        });
    if (!sumPtrs.empty()) {
      Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                          tid, cst(0));
      SmallVector<Value> blockSums;
      for (auto [partial, type] : llvm::zip_equal(guard.getResults(), sumTypes))
        blockSums.push_back(gpu::AllReduceOp::create(
            b, loc,
            partial.getType() == type
                ? partial
                : arith::ExtFOp::create(b, loc, type, partial).getResult(),
            gpu::AllReduceOperationAttr::get(b.getContext(),
                                             gpu::AllReduceOperation::ADD),
            /*uniform=*/true));
      scf::IfOp::create(b, loc, first, [&](OpBuilder &nb, Location) {
        for (auto [ptr, sum] : llvm::zip_equal(sumPtrs, blockSums))
          emitAtomicAdd(nb, loc, ptr, sum);
        scf::YieldOp::create(nb, loc);
      });
    }
    gpu::ReturnOp::create(b, loc);
  }
};
} // namespace
