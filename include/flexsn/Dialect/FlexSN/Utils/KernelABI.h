//===- KernelABI.h - The kernel contract of a flexsn.scan -------*- C++ -*-===//
//
// What every layer speaks about a scan's kernels: the variants, the flat
// argument list (one pointer per tensor, then T and NCL as i64), what each
// argument holds in the user's terms, its shape rule and element count, and
// which functions are kernels. Used by the lowerings, flexsn-differentiate,
// the interpreter, the harness, the manifest and the C API; it depends on
// the dialect only.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_DIALECT_FLEXSN_UTILS_KERNELABI_H
#define FLEXSN_DIALECT_FLEXSN_UTILS_KERNELABI_H

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

// KernelVariant, KernelArgRole (KernelABIEnums.td): enums with generated
// stringify/symbolize.
#include "flexsn/Dialect/FlexSN/Utils/KernelABIEnums.h.inc"

namespace mlir {
namespace func {
class FuncOp;
} // namespace func
namespace flexsn {

/// Every variant, in manifest order.
llvm::ArrayRef<KernelVariant> getAllKernelVariants();

struct KernelArg {
  KernelArgRole role;
  /// Index among the arguments of the same role group (input #i, ...).
  unsigned index;
  /// Storage element type for pointers, i64 for sizes.
  Type type;
  bool isPointer() const;
};

/// The flat argument list of a scan's kernel: inputs, lagged sequences,
/// lagged inits, initial states, params, outputs, state results, T, NCL
/// (+ begin, end on the CPU). Initial states that are splats of a constant
/// (see getConstantInitState) and results nobody uses get no argument.
llvm::SmallVector<KernelArg> getKernelABI(ScanOp scan, KernelVariant variant,
                                          bool cpu);

/// The constant of initial state `i` when it is a `tensor.splat` of an
/// `arith.constant` (the zero gradients and accumulators of a backward
/// scan): kernels then start from the constant and read no memory.
std::optional<double> getConstantInitState(ScanOp scan, unsigned i);

/// One kernel a kernel function becomes.
struct KernelSpec {
  std::string name;
  /// How states are written: sequences (Inference) or final values.
  KernelVariant variant;
  /// "inference", "final_state", "forward" or "backward".
  std::string kind;
};

/// The kernels of the function holding `scan`: `<f>_inference` and
/// `<f>_final_state` for a user function, or the one kernel (named after
/// the function) of a function made by flexsn-differentiate.
llvm::SmallVector<KernelSpec> getKernelSpecs(ScanOp scan);

/// The second entry point of GPU kernel `kernel` when it scans several
/// neurons per thread: `<kernel>_scalar`, one neuron per thread with scalar
/// accesses, for the launches the vector entry cannot take (a small NCL, NCL
/// not a multiple of the group, a pointer not aligned to the group).
std::string getScalarEntryName(llvm::StringRef kernel);

/// The third entry point of GPU kernel `kernel`, when it has one
/// (getDeepEntryPrefetch): `<kernel>_deep`, one neuron per thread as the
/// scalar entry, with more steps of reads in flight, for launches with few
/// threads per SM and a long T.
std::string getDeepEntryName(llvm::StringRef kernel);

/// Whether kernel `variant` of `scan` has a chunk repair kernel
/// (getRepairKernelName): a forward scan with `flexsn.chunk_width`, each of
/// whose states it reads initial values of and writes (as a sequence or a
/// final value), and no sums over neurons.
bool hasChunkRepair(ScanOp scan, KernelVariant variant);

/// The chunk repair kernel of kernel `kernel` (emitChunkRepair):
/// `<kernel>_repair`, a kernel of its own in the manifest.
std::string getRepairKernelName(llvm::StringRef kernel);

/// The scan operand (or result) number a pointer argument carries.
struct ArgSource {
  bool isResult;
  unsigned number;
};
ArgSource getArgSource(ScanOp scan, const KernelArg &arg);

/// What a kernel pointer holds in the terms of the function it was made
/// from: for functions made by flexsn-differentiate, the `flexsn.role` and
/// `flexsn.index` of the matching function argument or result
/// (grad_output #0, state_seq #1, ...); otherwise the meaning of its ABI
/// role (a scalar or per-neuron param is a param) and its index.
struct ArgDescription {
  ArgMeaning meaning;
  unsigned index;
  /// "grad_output #0".
  std::string str() const;
};
ArgDescription describeKernelArg(ScanOp scan, const KernelArg &arg);

/// Whether the kernel reads pointer `arg` as zeros when it is null: the
/// gradients a backward reads (grad_output, grad_state_seq,
/// grad_final_state), so that a caller with no gradient for a result passes
/// no buffer instead of a buffer of zeros.
bool isOptionalKernelArg(ScanOp scan, const KernelArg &arg);

/// A scan can become a kernel when it is the only scan of a func.func whose
/// arguments are the scan's tensor operands (scalar params may also be
/// constants, which canonicalization folds away). Emits an error naming the
/// problem otherwise.
LogicalResult verifyKernelForm(ScanOp scan);

/// Checks every body op has a lowering (arith, math, flexsn.spike,
/// flexsn.detach); emits an error naming the first that does not.
LogicalResult verifyBodyIsLowerable(ScanOp scan, llvm::StringRef backend);

/// Collects the scans of `module` and checks each is in kernel form with a
/// lowerable body (`backend` names the target in messages).
LogicalResult collectKernelScans(ModuleOp module, llvm::StringRef backend,
                                 llvm::SmallVectorImpl<ScanOp> &scans);

/// The name of the kernel of `variant` made from the function `funcName`.
std::string getKernelName(llvm::StringRef funcName, KernelVariant variant);

/// How many elements a pointer argument of `role` holds: [T, NCL]
/// (T * NCL), [NCL], or one element (scalar params and sums).
enum class ArgShape {
  Sequence,  // [T, NCL]
  PerNeuron, // [NCL]
  Scalar,    // one element
};
ArgShape getArgShape(KernelArgRole role);
/// Whether the kernel writes a pointer argument of `role` (outputs, state
/// sequences, final states, sums); the others it only reads.
bool isResultRole(KernelArgRole role);
/// "[T, NCL]", "[NCL]" or "[]".
llvm::StringRef stringifyArgShape(ArgShape shape);
/// Elements of a pointer argument of `shape` at T x NCL; nullopt when
/// T * NCL overflows 64 bits.
std::optional<int64_t> getElementCount(ArgShape shape, int64_t T, int64_t NCL);
/// Elements of a pointer argument of `role` at T x NCL (callers bound
/// T * NCL first).
int64_t getElementCount(KernelArgRole role, int64_t T, int64_t NCL);

} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_DIALECT_FLEXSN_UTILS_KERNELABI_H
