//===- Passes.h - flexsn conversion passes ----------------------*- C++ -*-===//

#ifndef FLEXSN_CONVERSION_PASSES_H
#define FLEXSN_CONVERSION_PASSES_H

#include "mlir/Pass/Pass.h"

// The dialects the passes create ops of: declared here, included where the
// passes are defined (as upstream's Passes.h do).
namespace mlir {
namespace arith {
class ArithDialect;
} // namespace arith
namespace cf {
class ControlFlowDialect;
} // namespace cf
namespace func {
class FuncDialect;
} // namespace func
namespace gpu {
class GPUDialect;
} // namespace gpu
namespace LLVM {
class LLVMDialect;
} // namespace LLVM
namespace memref {
class MemRefDialect;
} // namespace memref
namespace NVVM {
class NVVMDialect;
} // namespace NVVM
namespace scf {
class SCFDialect;
} // namespace scf
} // namespace mlir

namespace mlir {
namespace flexsn {

/// The most time steps of loads a scan kernel may keep in flight per
/// thread (the passes' and pipelines' `prefetch` option, the tools'
/// --prefetch).
constexpr unsigned kMaxPrefetchDepth = 32;

class ScanOp;
enum class KernelVariant : uint32_t; // KernelABIEnums.td

/// Steps of reads in flight in the deep entry of `scan`'s GPU kernels
/// (getDeepEntryName), or 0 when they have none. The deep entry is the
/// scalar entry (one neuron per thread) with about kDeepReadBytes of reads
/// (and at least kDeepMinSteps steps within kDeepMaxReadBytes) in flight
/// per thread, for launches with so few threads per SM that the scalar
/// entry's depth leaves DRAM latency uncovered (small NCL, long T:
/// cuda::ScanKernel takes it). A kernel has one when that depth exceeds
/// the scalar entry's automatic depth, within kMaxPrefetchDepth and an
/// unrolled body of at most 512 op copies; with an explicit `prefetch`
/// (`prefetchOption` > 0) no kernel has one. A `variant` kernel that
/// writes no sequence (final states of a scan without outputs) keeps
/// twice kDeepReadBytes in flight.
unsigned getDeepEntryPrefetch(ScanOp scan, KernelVariant variant,
                              unsigned prefetchOption);

/// Neurons a CPU kernel scans together, time outside and neurons inside
/// (emitBlockScan): a step of a block reads and writes runs of this many
/// consecutive elements, and the block's states stay in a stack buffer.
constexpr unsigned kCPUBlockNeurons = 256;

/// The bytes of reads per thread the deep entry keeps in flight.
constexpr unsigned kDeepReadBytes = 64;

/// The fewest steps of reads the deep entry keeps in flight, as long as
/// they are at most kDeepMaxReadBytes: a kernel reading few bytes a step
/// needs more steps in flight (H200, two_in_two_state's bf16 backward, 16
/// bytes a step, at 8 steps instead of 5: 65 -> 69% of copy at T=256
/// NCL=64K), while one that already reads at DRAM's pace loses a little
/// (the same kernel in f32: 95 -> 93%).
constexpr unsigned kDeepMinSteps = 8;
/// The most bytes of reads per thread that kDeepMinSteps may ask for.
constexpr unsigned kDeepMaxReadBytes = 128;

/// The one-neuron-per-thread GPU entries (scalar and deep) ask L2 for the
/// reads of steps `l2-prefetch` ahead of their slots (prefetch.global.L2)
/// at launches of at most this many threads per SM, counted against the
/// PTX register %nsmid (the SM identifiers: the SMs or a few more).
constexpr unsigned kL2PrefetchMaxThreadsPerSM = 128;

/// The default of the `l2-prefetch` option (steps ahead of the slots) and
/// its largest value: on an H100 at T=1024 NCL=16K (124 threads per SM)
/// 32 steps took lif f32 final_state from 54 to 76% of copy and no case
/// lost; without the threads-per-SM gate, at 248 threads per SM, lif f32
/// backward fell from 86 to 69%.
constexpr unsigned kDefaultL2Prefetch = 32;
constexpr unsigned kMaxL2Prefetch = 256;

#define GEN_PASS_DECL
#include "flexsn/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "flexsn/Conversion/Passes.h.inc"

} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_CONVERSION_PASSES_H
