//===- TimeLoops.h - Loop emission shared by both lowerings -----*- C++ -*-===//
//
// Private to lib/Conversion: what the CPU and GPU lowerings share to emit a
// kernel (the loop over time for a group of neurons, atomic sums). The
// kernel contract itself is a dialect utility (KernelABI.h).
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_LIB_CONVERSION_COMMON_TIMELOOPS_H
#define FLEXSN_LIB_CONVERSION_COMMON_TIMELOOPS_H

#include "flexsn/Dialect/FlexSN/Utils/KernelABI.h"
#include "mlir/IR/Builders.h"

namespace mlir {
namespace flexsn {

/// How the lanes of a neuron group touch memory.
enum class LaneAccess {
  /// The lanes are contiguous, inside the tensors and aligned to the group
  /// size: width-wide vector loads and stores.
  Vector,
  /// Each lane loads and stores on its own; the caller guarantees
  /// neuron + lane < NCL.
  Scalar,
};

/// How the pipelined time loop (prefetch > 1) steps its cursors: each
/// [T, NCL] pointer is a cursor (the group's element in the current row)
/// advanced by a stride a step. The loop of depth 1 addresses row t * NCL
/// instead (no cursors); `OpaqueGlobal` still puts its addresses in the
/// global address space.
enum class CursorStep {
  /// Address arithmetic LLVM sees (CPU kernels).
  Plain,
  /// NVPTX: cursors in the global address space, advanced by an inline
  /// `add.s64` that LLVM does not see through. Seen through, its loop
  /// strength reduction gives every unrolled copy of every cursor a
  /// precomputed base of its own: lif's bf16 backward entry went from 56 to
  /// 94 registers. The kernel's reads are also invariant loads
  /// (ld.global.nc), which ptxas may move across its stores.
  OpaqueGlobal,
};

/// Emits the time loop of `scan` for `width` neurons starting at `neuron`
/// (i64). `args` are the kernel's arguments in ABI order (pointers, then T
/// and NCL; trailing arguments are ignored). Returns, per `sum_states`
/// state, the sum of its final value over this group's lanes (compute
/// type); the caller reduces these across groups. `prefetch` is the number
/// of steps whose loads are in flight per thread (1: each step loads its
/// own; P > 1: P slots of reads in registers, the loop unrolled P times).
/// `l2Ahead` > 0 (GPU cursors, P > 1): each iteration also asks L2 for the
/// reads of the steps l2Ahead ahead of its refills (prefetch.global.L2),
/// when `l2Gate` (i1, loop-invariant; null: always) holds.
llvm::SmallVector<Value> emitNeuronScan(OpBuilder &b, Location loc,
                                        ScanOp scan, KernelVariant variant,
                                        ValueRange args, Value neuron,
                                        unsigned width, LaneAccess access,
                                        unsigned prefetch, CursorStep cursors,
                                        unsigned l2Ahead = 0,
                                        Value l2Gate = Value());

/// Chunk repair kernels (hasChunkRepair): the kernel's chunks ran side
/// by side, each from the state in its start pointer. For neuron `neuron`
/// (< the chunk width W), rounds find the first chunk whose start is not
/// bit for bit the end of the chunk before (comparing many chunks per round
/// trip to memory), store that end as its start and rerun it in place.
/// After them every chunk's results and start are the sequential scan's: a
/// chunk that started from the true state computed what the sequential
/// scan computes. A right guess of every start costs one search; a neuron
/// that never forgets its start reruns every chunk (the sequential scan).
void emitChunkRepair(OpBuilder &b, Location loc, ScanOp scan,
                     KernelVariant variant, ValueRange args, Value neuron);

/// CPU kernels: emits the scan of neurons [begin, end) in blocks of `block`
/// neurons, each block's time loop outside and its neuron loop inside, so
/// that a step reads and writes consecutive elements of every sequence
/// (vectorizable by LLVM) while the block's states stay in a stack buffer.
/// `args` as for emitNeuronScan. Returns, per `sum_states` state with a
/// pointer, this call's sum of its final values over the neurons, in f64.
llvm::SmallVector<Value> emitBlockScan(OpBuilder &b, Location loc,
                                       ScanOp scan, KernelVariant variant,
                                       ValueRange args, Value begin, Value end,
                                       unsigned block);

/// The prefetch depth of a GPU kernel entry: as many steps as fit about 32
/// registers of carried reads per thread (at most 8), and 1 when one step
/// reads 32 registers or more, so that kernels reading many sequences per
/// step keep their occupancy; and no more than keeps the unrolled loop body
/// (slots x lanes x body ops) within 1024 op copies, so that a large core's
/// compile time stays bounded.
unsigned choosePrefetchDepth(ScanOp scan, unsigned width);

/// Adds `value` to `*ptr` atomically (llvm.atomicrmw fadd, monotonic).
void emitAtomicAdd(OpBuilder &b, Location loc, Value ptr, Value value);

/// The kernel's sum_states pointers (sums over neurons, which both
/// lowerings accumulate and add atomically) and their element types, in
/// argument order; `args` are the kernel's arguments as `abi` lists them.
void collectSumStates(ArrayRef<KernelArg> abi, ValueRange args,
                      SmallVectorImpl<Value> &ptrs,
                      SmallVectorImpl<Type> &types);

} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_LIB_CONVERSION_COMMON_TIMELOOPS_H
