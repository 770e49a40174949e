//===- Harness.cpp - One kernel case: run, check, time ----------------------===//

#include "HarnessDetail.h"

#include "flexsn/Execution/Harness.h"

#include "flexsn/Storage/Storage.h"
#include "flexsn/Interpreter/Interpreter.h"
#include "flexsn/Pipelines/Pipelines.h"
#include "flexsn/Runtime/CPU/CPUBackend.h"
#include "flexsn/Runtime/CUDA/CUDARuntime.h"
#include "flexsn/Target/Manifest.h"
#include "flexsn/Target/PTX.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>

#include <unistd.h>

using namespace mlir;
using namespace mlir::flexsn;
using llvm::Error;
using llvm::Expected;
using namespace mlir::flexsn::harness;

/// The kernel spec of `wanted` kind among `scan`'s kernels.
static Expected<KernelSpec> kernelOf(ScanOp scan, StringRef wanted) {
  if (scan)
    for (const KernelSpec &k : getKernelSpecs(scan))
      if (k.kind == wanted)
        return k;
  return makeError("no " + wanted + " kernel");
}

/// The primal's operands (for the near-tie mask) from the buffers of the
/// kernel that ran first: the primal's own, or a training forward, a
/// function of its own whose arguments say by meaning what they hold.
static std::vector<std::vector<double>>
primalOperands(ScanOp primal, ScanOp first,
               const std::vector<HostBuffer> &fwd, int64_t NCL) {
  std::vector<std::vector<double>> ops = scanOperands(
      primal, first == primal ? fwd : std::vector<HostBuffer>(), NCL);
  if (first == primal)
    return ops;
  unsigned firstState = primal.getNumInputs() + 2 * primal.getNumLagged();
  unsigned firstParam = firstState + primal.getNumStates();
  int64_t W = chunkWidth(primal, NCL);
  for (const HostBuffer &b : fwd) {
    ArgDescription m = describeKernelArg(first, b.arg);
    if (m.meaning == ArgMeaning::Input) {
      ops[m.index] = b.decoded();
      if (W)
        reorderChunks(ops[m.index], b.count / NCL, NCL, W, /*toRows=*/true);
    } else if (m.meaning == ArgMeaning::InitState)
      ops[firstState + m.index] = b.decoded();
    else if (m.meaning == ArgMeaning::Param)
      ops[firstParam + m.index] = b.decoded();
  }
  return ops;
}

/// The final pair's forward writes no state sequence; the reference adjoint
/// reads one. Runs the sequence forward on the final forward's operands
/// (`fromForward`) into `seqFwd` and adds its state sequences there.
static Error runSequenceForward(ModuleOp module, StringRef funcName, int64_t T,
                                int64_t NCL, KernelRunner &runner,
                                MeaningMap &fromForward,
                                std::vector<HostBuffer> &seqFwd) {
  ScanOp sscan = scanOf(module, (funcName + "_forward").str());
  auto sspec = kernelOf(sscan, "forward");
  if (!sspec)
    return sspec.takeError();
  seqFwd =
      makeBuffers(getKernelABI(sscan, sspec->variant, /*cpu=*/true), T, NCL);
  for (HostBuffer &b : seqFwd) {
    if (isResultRole(b.arg.role))
      continue;
    ArgDescription m = describeKernelArg(sscan, b.arg);
    auto it = fromForward.find({m.meaning, m.index});
    if (it == fromForward.end())
      return makeError("the sequence forward reads " + m.str() +
                       ", which the final forward does not");
    b.bytes = it->second->bytes;
  }
  if (Error e = runner.run(sspec->name, seqFwd, T, NCL))
    return e;
  for (const HostBuffer &b : seqFwd) {
    ArgDescription m = describeKernelArg(sscan, b.arg);
    if (m.meaning == ArgMeaning::StateSeq)
      fromForward[{m.meaning, m.index}] = &b;
  }
  return Error::success();
}

/// The backward's buffers, by meaning in `byMeaning`: what the forward wrote
/// (`fromForward`), random result gradients, fresh results.
static Expected<std::vector<HostBuffer>>
backwardBuffers(ScanOp bscan, const KernelSpec &bspec, int64_t T, int64_t NCL,
                const MeaningMap &fromForward, std::mt19937_64 &rng) {
  std::vector<HostBuffer> bwd =
      makeBuffers(getKernelABI(bscan, bspec.variant, /*cpu=*/true), T, NCL);
  for (HostBuffer &b : bwd) {
    if (isResultRole(b.arg.role))
      continue;
    ArgDescription m = describeKernelArg(bscan, b.arg);
    auto it = fromForward.find({m.meaning, m.index});
    if (it != fromForward.end() && it->second->bytes.size() == b.bytes.size())
      b.bytes = it->second->bytes;
    else if (stringifyArgMeaning(m.meaning).starts_with("grad_"))
      fillOperand(b, m.meaning, rng);
    else
      return makeError("the backward reads " + m.str() +
                       ", which the training forward does not provide");
  }
  return bwd;
}

/// The reference adjoint's case: the same stored forward values and
/// gradients the backward kernel read.
static AdjointCase adjointCase(ScanOp primal, bool finalPair, int64_t T,
                               int64_t NCL, const MeaningMap &byMeaning,
                               const MeaningMap &fromForward) {
  AdjointCase c;
  auto decodedOr = [&](ArgMeaning meaning, unsigned i) -> std::vector<double> {
    auto it = byMeaning.find({meaning, i});
    if (it != byMeaning.end())
      return it->second->decoded();
    auto f = fromForward.find({meaning, i});
    return f != fromForward.end() ? f->second->decoded()
                                  : std::vector<double>();
  };
  for (unsigned k = 0; k < primal.getNumInputs(); ++k)
    c.inputs.push_back(decodedOr(ArgMeaning::Input, k));
  for (unsigned s = 0; s < primal.getNumStates(); ++s) {
    c.initStates.push_back(decodedOr(ArgMeaning::InitState, s));
    c.stateSeqs.push_back(decodedOr(ArgMeaning::StateSeq, s));
    c.gradStates.push_back(decodedOr(primal.getFinalStates() || finalPair
                                         ? ArgMeaning::GradFinalState
                                         : ArgMeaning::GradStateSeq,
                                     s));
  }
  for (unsigned k = 0; k < primal.getNumParams(); ++k)
    c.params.push_back(decodedOr(ArgMeaning::Param, k));
  for (unsigned o = 0; o < primal.getNumOutputs(); ++o) {
    auto it = byMeaning.find({ArgMeaning::GradOutput, o});
    c.gradOutputs.push_back(it != byMeaning.end() ? it->second->decoded()
                                                  : std::vector<double>());
  }
  c.finalStates = finalPair;
  // The reference adjoint reads sequences in rows of NCL.
  if (int64_t W = chunkWidth(primal, NCL)) {
    auto toRows = [&](std::vector<std::vector<double>> &seqs) {
      for (std::vector<double> &v : seqs)
        if (NCL > 0 && (int64_t)v.size() == T * NCL)
          reorderChunks(v, T, NCL, W, /*toRows=*/true);
    };
    for (auto *seqs : {&c.inputs, &c.stateSeqs, &c.gradOutputs, &c.gradStates})
      toRows(*seqs);
  }
  return c;
}

/// The backward's results against the reference adjoint and, for a smooth
/// f64 body, finite differences of the interpreter's forward.
static Error checkBackward(ScanOp primal, ScanOp bscan, int64_t T, int64_t NCL,
                           const AdjointCase &c,
                           const std::vector<HostBuffer> &bwd,
                           const MeaningMap &byMeaning,
                           const HarnessOptions &options, Comparer &cmp,
                           llvm::raw_ostream &os) {
  AdjointGrads ref;
  if (failed(interpretAdjoint(primal, T, NCL, c, ref)))
    return makeDiagnosedError();
  for (const HostBuffer &b : bwd) {
    if (!isResultRole(b.arg.role))
      continue;
    ArgDescription m = describeKernelArg(bscan, b.arg);
    const std::vector<double> *expected =
        m.meaning == ArgMeaning::GradInput       ? &ref.inputs[m.index]
        : m.meaning == ArgMeaning::GradInitState ? &ref.initStates[m.index]
        : m.meaning == ArgMeaning::GradParam     ? &ref.params[m.index]
                                                 : nullptr;
    if (!expected)
      return makeError("unexpected backward result " + m.str());
    std::vector<double> inLayout;
    if (int64_t W = chunkWidth(primal, NCL);
        W && (int64_t)expected->size() == T * NCL) {
      inLayout = *expected;
      reorderChunks(inLayout, T, NCL, W, /*toRows=*/false);
      expected = &inLayout;
    }
    cmp.compare(m.str() + " vs reference adjoint", b, *expected,
                bscan.getComputeType());
  }
  // Finite differences see the true derivative: a spike's (zero) or
  // through a detach, not the surrogate or the blocked gradient.
  bool smooth = true;
  primal.walk([&](Operation *op) {
    if (isa<SpikeOp, DetachOp>(op))
      smooth = false;
  });
  bool f64 = primal.getComputeType().isF64() &&
             llvm::all_of(bwd, [](const HostBuffer &b) {
               return b.arg.type.isF64();
             });
  // (Finite differences read the kernels' buffers in rows of NCL.)
  bool rows = !chunkWidth(primal, NCL);
  if (smooth && f64 && rows && T > 0 && NCL > 0 && options.finiteDifferences)
    // byMeaning holds the results too (grad_input, grad_init_state,
    // grad_param); gradients the backward does not read are empty in `c`
    // and left out of the loss.
    return finiteDifferenceCheck(primal, T, NCL, c, byMeaning, cmp);
  if (options.verbose)
    os << "  finite differences: skipped ("
       << (!smooth ? "the body spikes or detaches: its gradient is not "
                     "the derivative"
           : !options.finiteDifferences ? "--finite-differences=false"
                                        : !rows ? "chunks side by side"
                                                : "needs f64 storage and compute")
       << ")\n";
  return Error::success();
}

/// "kernel NAME: T=.. NCL=.. backend=.. [entry=..]", after its run.
static void printKernelRun(llvm::raw_ostream &os, KernelRunner &runner,
                           StringRef name, int64_t T, int64_t NCL) {
  os << "kernel " << name << ": T=" << T << " NCL=" << NCL
     << " backend=" << runner.backend();
  if (std::string entry = runner.lastEntry(); !entry.empty())
    os << " entry=" << entry;
  os << "\n";
}

/// `scan`'s kernel buffers by what they mean.
static MeaningMap meaningsOf(ScanOp scan,
                             const std::vector<HostBuffer> &buffers) {
  MeaningMap byMeaning;
  for (const HostBuffer &b : buffers) {
    ArgDescription m = describeKernelArg(scan, b.arg);
    byMeaning[{m.meaning, m.index}] = &b;
  }
  return byMeaning;
}

/// As chunked_time settles on the device: the run of `kernel` from random
/// starts (already in `fwd`) was the guess; the kernel again from the ends
/// it gave (right where a neuron forgot its start within a chunk: the
/// repair's search passes those), then the repair, which reruns the
/// others; with `check`, the chunks against one sequential scan.
static Error runRepaired(ScanOp first, StringRef kernel, int64_t T,
                         int64_t NCL, int64_t W, std::vector<HostBuffer> &fwd,
                         KernelRunner &runner, const HarnessOptions &options,
                         bool check, CheckResult &result,
                         llvm::raw_ostream &os) {
  startChunksFromEnds(fwd, T, NCL, W);
  if (Error e = runner.run(kernel, fwd, T, NCL))
    return e;
  std::string repair = getRepairKernelName(kernel);
  if (Error e = runner.run(repair, fwd, T, NCL))
    return e;
  printKernelRun(os, runner, repair, T, NCL);
  if (check)
    return checkRepaired(first, T, NCL, W, fwd, options, os, result);
  return Error::success();
}

Expected<CheckResult> mlir::flexsn::runKernelCase(
    ModuleOp module, StringRef funcName, StringRef kind, int64_t T,
    int64_t NCL, uint64_t seed, KernelRunner &runner,
    const HarnessOptions &options, bool check, bool bench,
    llvm::raw_ostream &os) {
  // forward_final / backward_final: the final-state pair of the automatic
  // saving policy (final states out of the forward, their gradients into
  // the backward).
  bool finalPair = kind == "forward_final" || kind == "backward_final";
  StringRef suffix = finalPair ? "_final" : "";
  if (finalPair)
    kind = kind.drop_back(suffix.size());
  bool training = kind == "forward" || kind == "backward";
  std::mt19937_64 rng(seed);
  ScanOp primal = scanOf(module, funcName);
  if (!primal)
    return makeError("no kernel function named '" + funcName + "'");

  // The kernel that runs first: the primal's, or the training forward.
  ScanOp first =
      training ? scanOf(module, (funcName + "_forward" + suffix).str())
               : primal;
  if (finalPair && !first)
    return makeError("no " + funcName + "_forward_final: the saving policy "
                     "built no final-state pair (the core has no state, "
                     "its scan gives final states already, or nothing "
                     "takes a gradient)");
  auto firstSpec = kernelOf(first, training ? StringRef("forward") : kind);
  if (!firstSpec)
    return firstSpec.takeError();
  int64_t W = chunkWidth(primal, NCL);
  if (options.repair &&
      (kind == "backward" || !W || !hasChunkRepair(first, firstSpec->variant)))
    return makeError("'" + funcName + "' has no chunk repair kernel for a " + kind +
                     " run at NCL=" + Twine(NCL) + ": it needs flexsn.chunk_width "
                     "dividing NCL, states, and a forward scan");
  if (options.repair && bench)
    return makeError("a chunk repair kernel is checked, not timed: its work "
                     "depends on how many chunks were wrong");
  std::vector<HostBuffer> fwd =
      makeBuffers(getKernelABI(first, firstSpec->variant, /*cpu=*/true), T,
                  NCL);
  for (HostBuffer &b : fwd)
    if (!isResultRole(b.arg.role))
      fillOperand(b, describeKernelArg(first, b.arg).meaning, rng);
  if (options.repair)
    uniformChunkParams(fwd, W);
  if (Error e = runner.run(firstSpec->name, fwd, T, NCL))
    return std::move(e);

  Comparer cmp{options, os, NCL, {}, {}};
  cmp.chunkWidth = W;
  cmp.steps = T;
  if (check && options.tieMargin > 0) {
    if (Error e = nearTieMask(primal, T, NCL,
                              primalOperands(primal, first, fwd, NCL),
                              options.tieMargin, cmp.mask))
      return std::move(e);
    cmp.result.masked = llvm::count(cmp.mask, 1);
  }

  auto printRun = [&](StringRef name) { printKernelRun(os, runner, name, T, NCL); };
  if (kind != "backward") {
    printRun(firstSpec->name);
    if (check)
      if (Error e = checkWithInterpreter(first, firstSpec->variant, T, NCL,
                                         fwd, cmp))
        return std::move(e);
    if (bench)
      if (Error e = runner.bench(firstSpec->name, fwd, T, NCL, os))
        return std::move(e);
    if (options.repair)
      if (Error e = runRepaired(first, firstSpec->name, T, NCL, W, fwd, runner,
                                options, check, cmp.result, os))
        return std::move(e);
    return cmp.result;
  }

  // Backward: read what the forward wrote, plus random result gradients.
  ScanOp bscan = scanOf(module, (funcName + "_backward" + suffix).str());
  auto bspec = kernelOf(bscan, "backward");
  if (!bspec)
    return bspec.takeError();
  MeaningMap fromForward = meaningsOf(first, fwd);
  std::vector<HostBuffer> seqFwd;
  if (finalPair && check)
    if (Error e = runSequenceForward(module, funcName, T, NCL, runner,
                                     fromForward, seqFwd))
      return std::move(e);
  Expected<std::vector<HostBuffer>> bwd =
      backwardBuffers(bscan, *bspec, T, NCL, fromForward, rng);
  if (!bwd)
    return bwd.takeError();
  MeaningMap byMeaning = meaningsOf(bscan, *bwd);
  if (Error e = runner.run(bspec->name, *bwd, T, NCL))
    return std::move(e);
  printRun(bspec->name);

  if (check) {
    // The training forward's results against the interpreter.
    if (Error e = checkWithInterpreter(first, firstSpec->variant, T, NCL, fwd,
                                       cmp, " (training forward)"))
      return std::move(e);
    AdjointCase c = adjointCase(primal, finalPair, T, NCL, byMeaning, fromForward);
    if (Error e = checkBackward(primal, bscan, T, NCL, c, *bwd, byMeaning,
                                options, cmp, os))
      return std::move(e);
  }
  if (bench)
    if (Error e = runner.bench(bspec->name, *bwd, T, NCL, os))
      return std::move(e);
  return cmp.result;
}
