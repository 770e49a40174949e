//===- Pipelines.h - Named lowering pipelines and their options -*- C++ -*-===//
//
// The pass pipelines from a flexsn kernel module to CPU-ready LLVM dialect
// and to a gpu.binary holding PTX, and the one options type every entry
// point parses: the registered pipelines (`flexsn-gpu-pipeline{...}`),
// flexsn-translate (`--options=...`) and the C API (its option string).
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_PIPELINES_PIPELINES_H
#define FLEXSN_PIPELINES_PIPELINES_H

#include "flexsn/Conversion/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Support/LLVM.h"

#include <string>

namespace mlir {
namespace flexsn {

/// How a CUDA kernel is launched: each thread of its vector entry scans
/// `neuronsPerThread` neurons (its scalar entry one), blocks have at most
/// `blockSize` threads (the runtime may take a smaller power of two:
/// cuda::chooseScanBlockSize); the grid covers NCL.
struct LaunchGeometry {
  unsigned blockSize = 256;
  unsigned neuronsPerThread = 4;
};

/// Every option of the compilation: written as `key=value` words
/// ("chip=sm_80 neurons-per-thread=2 differentiate save-ops=flexsn.spike").
struct PipelineOptions : public PassPipelineOptions<PipelineOptions> {
  Option<std::string> chip{
      *this, "chip",
      llvm::cl::desc("NVIDIA GPU architecture: sm_<digits>[a|f]"),
      llvm::cl::init("sm_90")};
  Option<unsigned> optLevel{*this, "O",
                            llvm::cl::desc("PTX optimization level, 0-3"),
                            llvm::cl::init(2)};
  Option<unsigned> neuronsPerThread{
      *this, "neurons-per-thread",
      llvm::cl::desc("neurons each GPU thread scans: 1, 2, 4 or 8"),
      llvm::cl::init(4)};
  Option<unsigned> blockSize{
      *this, "block-size",
      llvm::cl::desc("largest GPU block (threads; the launch may use fewer "
                     "for a small NCL): a multiple of 32, 32-1024"),
      llvm::cl::init(256)};
  Option<unsigned> prefetch{
      *this, "prefetch",
      llvm::cl::desc("steps of loads in flight per GPU thread, 1-32 (0: "
                     "chosen per kernel from the sequences it reads); the "
                     "CPU pipeline's loop likewise (0: 1)"),
      llvm::cl::init(0)};
  Option<unsigned> l2Prefetch{
      *this, "l2-prefetch",
      llvm::cl::desc("GPU entries of one neuron per thread: steps ahead of "
                     "their loads whose reads they ask L2 for, at launches "
                     "of at most 128 threads per SM (default 32; 0: none; "
                     "at most 256)"),
      llvm::cl::init(kDefaultL2Prefetch)};
  Option<std::string> cudaHome{
      *this, "cuda-home",
      llvm::cl::desc("CUDA toolkit root, for libdevice (default: "
                     "$CUDA_HOME, else /usr/local/cuda)"),
      llvm::cl::init("")};
  Option<bool> differentiate{
      *this, "differentiate",
      llvm::cl::desc("run flexsn-differentiate first: also build the "
                     "training forward and backward kernels"),
      llvm::cl::init(false)};
  Option<bool> transfer{
      *this, "transfer",
      llvm::cl::desc("then keep only the transfer functions of the scans "
                     "whose states update affinely (flexsn-affine-transfer "
                     "with replace): the first pass of a chunked parallel "
                     "scan; an error where no scan is affine"),
      llvm::cl::init(false)};
  ListOption<std::string> saveOps{
      *this, "save-ops",
      llvm::cl::desc("with differentiate (the training kernels): body ops "
                     "whose results the training forward saves "
                     "(comma-separated op names; auto: chosen by a minimum "
                     "cut)")};

  /// Parses `text` into a new options object. On failure returns null and
  /// sets `error` to a message naming the bad word and listing the keys.
  static std::unique_ptr<PipelineOptions> parse(llvm::StringRef text,
                                                std::string &error);

  /// Checks the values' ranges and combinations; returns a message naming
  /// the first bad option, or an empty string.
  std::string validate() const;

  /// The toolkit root: `cuda-home`, else $CUDA_HOME, else /usr/local/cuda.
  std::string getCUDAHome() const;

  LaunchGeometry getLaunchGeometry() const {
    return {blockSize, neuronsPerThread};
  }

  /// Makes the options named in `names` flags of a tool's own command line
  /// (`--prefetch=4`, `--save-ops=auto`), listed under `category`, whose
  /// values land in this object: a tool and the pipelines share one
  /// declaration, help text included. Call before
  /// llvm::cl::ParseCommandLineOptions; this object must outlive the parse.
  void addToCommandLine(llvm::cl::OptionCategory &category,
                        llvm::ArrayRef<llvm::StringRef> names);
};

/// flexsn kernel module -> LLVM dialect for the CPU (ExecutionEngine).
/// `prefetch` > 1 pipelines the time loop as on the GPU (for testing).
void buildCPUPipeline(OpPassManager &pm, unsigned prefetch = 1);

/// flexsn kernel module -> one gpu.binary holding PTX per kernel entry, for
/// `options`' chip, optimization level and launch geometry. Without
/// `serialize`, it stops at the gpu.modules in the NVVM dialect
/// (translateToPTX serializes them in parallel).
void buildGPUPipeline(OpPassManager &pm, const PipelineOptions &options,
                      bool serialize = true);

/// Adds canonicalization and flexsn-differentiate (with `saveOps`).
void buildDifferentiatePipeline(OpPassManager &pm,
                                llvm::ArrayRef<std::string> saveOps = {});

/// Canonicalizes `module` and runs flexsn-differentiate on it (adds the
/// `_forward` and `_backward` kernel functions of every kernel function).
LogicalResult differentiateModule(ModuleOp module,
                                  llvm::ArrayRef<std::string> saveOps = {});

/// What every target does first: differentiate `module` in place when
/// `options.differentiate` is set, then, with `options.transfer`, replace
/// its kernel functions by their transfer functions.
LogicalResult prepareModule(ModuleOp module, const PipelineOptions &options);

/// Registers `flexsn-cpu-pipeline` and `flexsn-gpu-pipeline` (both taking
/// PipelineOptions; `differentiate` runs flexsn-differentiate first).
void registerPipelines();

} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_PIPELINES_PIPELINES_H
