//===- flexsn-run.cpp - Run, check and time compiled flexsn kernels -------===//
//
//   flexsn-run FILE.mlir --backend=cpu --T=64 --ncl=4099
//              [--variant=inference|final_state|forward|backward]
//              [--dtype=f32|f16|bf16|f64] [--save-ops=OP,...]
//              [--check] [--bench] [--func=NAME] [--seed=N] [--threads=N]
//
// Fills the kernel's inputs, initial states and params with seeded random
// values, poisons the results with NaN, runs the kernel, and with --check
// compares every result with the reference interpreter (exit 1 above the
// tolerance). --bench prints the median time and the bandwidth.
//
// forward/backward run flexsn-differentiate first. The backward reads what
// the training forward kernel wrote (state sequences, saved values) and
// random output gradients; --check compares its gradients with the
// interpreter's independent adjoint and, for an f64 body without spikes,
// with central finite differences of the interpreter's forward.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Conversion/ScanKernel.h"
#include "flexsn/InitAllDialects.h"
#include "flexsn/Interpreter/Interpreter.h"
#include "flexsn/Pipelines/Pipelines.h"
#include "flexsn/Runtime/CPU/CPUBackend.h"
#include "flexsn/Runtime/CUDA/CUDARuntime.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include <unistd.h>

using namespace mlir;
using namespace mlir::flexsn;
namespace cl = llvm::cl;

static cl::opt<std::string> clInput(cl::Positional, cl::desc("<input .mlir>"),
                                    cl::Required);
static cl::opt<std::string> clBackend("backend",
                                      cl::desc("cpu or cuda"),
                                      cl::init("cpu"));
static cl::opt<int64_t> clT("T", cl::desc("time steps"), cl::init(8));
static cl::opt<int64_t> clNCL("ncl", cl::desc("neurons (N*C*L flattened)"),
                              cl::init(1024));
static cl::opt<std::string>
    clVariant("variant",
              cl::desc("inference | final_state | forward | backward"),
              cl::init("inference"));
static cl::opt<std::string>
    clDtype("dtype",
            cl::desc("storage type of every sequence and state: f32, f16, "
                     "bf16, f64 (default: as written)"),
            cl::init(""));
static cl::opt<bool> clCheck("check",
                             cl::desc("compare with the reference interpreter"));
static cl::opt<bool> clBench("bench", cl::desc("time the kernel"));
static cl::opt<std::string> clFunc("func",
                                   cl::desc("kernel function (default: the only one)"),
                                   cl::init(""));
static cl::opt<uint64_t> clSeed("seed", cl::desc("random seed"), cl::init(0));
static cl::opt<unsigned> clThreads("threads",
                                   cl::desc("CPU threads (0: all)"),
                                   cl::init(0));
static cl::opt<unsigned> clReps("reps", cl::desc("timed repetitions"),
                                cl::init(20));
static cl::list<std::string>
    clSaveOps("save-ops", cl::CommaSeparated,
              cl::desc("forward/backward: body ops whose results the "
                       "training forward saves"));
static cl::opt<bool> clFiniteDifferences(
    "finite-differences",
    cl::desc("backward --check: also compare with central finite "
             "differences when storage and compute are f64 and the body has "
             "no spike (default on; turn off for bodies with kinks or jumps, "
             "such as max, abs, floor, select)"),
    cl::init(true));
static cl::opt<double>
    clTolerance("tolerance",
                cl::desc("max relative error for --check (default: by the "
                         "coarser of storage and compute type: f64 1e-12, "
                         "f32 1e-5, f16/bf16 1e-2)"),
                cl::init(-1.0));

static int fail(const Twine &message) {
  llvm::errs() << "flexsn-run: error: " << message << "\n";
  return 2;
}

/// Rewrites the storage element type of every tensor of `func` (arguments,
/// the scan's results, the function's results) to `storage`.
static void setStorageType(func::FuncOp func, ScanOp scan, Type storage) {
  auto retype = [&](Type t) -> Type {
    if (auto tensor = dyn_cast<RankedTensorType>(t))
      return tensor.clone(storage);
    return t;
  };
  for (BlockArgument arg : func.getArguments())
    arg.setType(retype(arg.getType()));
  for (OpResult r : scan->getResults())
    r.setType(retype(r.getType()));
  SmallVector<Type> ins, outs;
  for (Type t : func.getArgumentTypes())
    ins.push_back(retype(t));
  for (Type t : func.getResultTypes())
    outs.push_back(retype(t));
  func.setFunctionType(FunctionType::get(func.getContext(), ins, outs));
}

static unsigned byteWidth(Type t) { return t.getIntOrFloatBitWidth() / 8; }

static void encode(double x, Type t, uint8_t *dst) {
  if (t.isF64()) {
    std::memcpy(dst, &x, 8);
  } else if (t.isF32()) {
    float f = static_cast<float>(x);
    std::memcpy(dst, &f, 4);
  } else {
    llvm::APFloat v(x);
    bool lost;
    v.convert(cast<FloatType>(t).getFloatSemantics(),
              llvm::APFloat::rmNearestTiesToEven, &lost);
    uint16_t bits = static_cast<uint16_t>(v.bitcastToAPInt().getZExtValue());
    std::memcpy(dst, &bits, 2);
  }
}

static double decode(const uint8_t *src, Type t) {
  if (t.isF64()) {
    double d;
    std::memcpy(&d, src, 8);
    return d;
  }
  if (t.isF32()) {
    float f;
    std::memcpy(&f, src, 4);
    return f;
  }
  uint16_t bits;
  std::memcpy(&bits, src, 2);
  llvm::APFloat v(cast<FloatType>(t).getFloatSemantics(),
                  llvm::APInt(16, bits));
  bool lost;
  v.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven,
            &lost);
  return v.convertToDouble();
}


namespace {
/// One kernel argument's host buffer.
struct Buffer {
  KernelArg arg;
  int64_t count = 0;
  std::vector<uint8_t> bytes;

  unsigned width() const { return byteWidth(arg.type); }
  double at(int64_t i) const { return decode(bytes.data() + i * width(), arg.type); }
  std::vector<double> decoded() const {
    std::vector<double> out(count);
    for (int64_t i = 0; i < count; ++i)
      out[i] = at(i);
    return out;
  }
  void fill(std::mt19937_64 &rng, double lo, double hi) {
    std::uniform_real_distribution<double> dist(lo, hi);
    for (int64_t i = 0; i < count; ++i)
      encode(dist(rng), arg.type, bytes.data() + i * width());
  }
};

bool isResultRole(KernelArgRole role) {
  return role == KernelArgRole::Output || role == KernelArgRole::StateSeq ||
         role == KernelArgRole::FinalState || role == KernelArgRole::SumState;
}

int64_t elementCount(KernelArgRole role, int64_t T, int64_t NCL) {
  switch (role) {
  case KernelArgRole::Input:
  case KernelArgRole::Lagged:
  case KernelArgRole::Output:
  case KernelArgRole::StateSeq:
    return T * NCL;
  case KernelArgRole::ParamScalar:
  case KernelArgRole::SumState:
    return 1;
  default:
    return NCL;
  }
}

/// Buffers for every pointer argument: results poisoned with NaN (sums
/// zeroed: the kernel adds to them), operands zero until filled.
std::vector<Buffer> makeBuffers(ArrayRef<KernelArg> abi, int64_t T,
                                int64_t NCL) {
  std::vector<Buffer> buffers;
  for (const KernelArg &arg : abi) {
    if (!arg.isPointer())
      continue;
    Buffer buf{arg, elementCount(arg.role, T, NCL), {}};
    buf.bytes.assign(std::max<int64_t>(buf.count * buf.width(), 1), 0);
    if (isResultRole(arg.role) && arg.role != KernelArgRole::SumState)
      std::memset(buf.bytes.data(), 0xFF, buf.bytes.size()); // NaN
    buffers.push_back(std::move(buf));
  }
  return buffers;
}

/// Random operands: inputs in [-1, 3), states in [-0.5, 0.5), params and
/// gradients in [-1, 1).
void fillOperand(Buffer &buf, StringRef meaning, std::mt19937_64 &rng) {
  if (meaning == "input")
    buf.fill(rng, -1.0, 3.0);
  else if (meaning == "init_state")
    buf.fill(rng, -0.5, 0.5);
  else
    buf.fill(rng, -1.0, 1.0);
}

void zeroSums(std::vector<Buffer> &buffers) {
  for (Buffer &b : buffers)
    if (b.arg.role == KernelArgRole::SumState)
      std::memset(b.bytes.data(), 0, b.bytes.size());
}

std::vector<void *> pointers(std::vector<Buffer> &buffers) {
  std::vector<void *> ptrs;
  for (Buffer &b : buffers)
    ptrs.push_back(b.bytes.data());
  return ptrs;
}

/// The scan operands in operand order (for the interpreter), from the
/// buffers and the constants of constant initial states.
std::vector<std::vector<double>> scanOperands(ScanOp scan,
                                              const std::vector<Buffer> &buffers,
                                              int64_t NCL) {
  std::vector<std::vector<double>> ops(scan->getNumOperands());
  for (const Buffer &b : buffers) {
    ArgSource source = getArgSource(scan, b.arg);
    if (!source.isResult)
      ops[source.number] = b.decoded();
  }
  unsigned firstState = scan.getNumInputs() + 2 * scan.getNumLagged();
  for (unsigned k = 0; k < scan.getNumStates(); ++k)
    if (std::optional<double> c = getConstantInitState(scan, k))
      ops[firstState + k].assign(NCL, *c);
  return ops;
}

double defaultTolerance(Type storage, Type compute) {
  auto tolOf = [](Type t) {
    return t.isF64() ? 1e-12 : t.isF32() ? 1e-5 : 1e-2;
  };
  return std::max(tolOf(storage), tolOf(compute));
}

/// Prints one comparison line; returns the relative error (max abs error
/// over max(max |ref|, 1); NaN if any value is NaN).
double compare(StringRef what, const Buffer &got,
               const std::vector<double> &ref, double tol) {
  double maxErr = 0.0, maxRef = 0.0;
  int64_t bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double err = std::fabs(got.at(i) - ref[i]);
    if (!(err <= maxErr)) // NaN-propagating max
      maxErr = err;
    maxRef = std::max(maxRef, std::fabs(ref[i]));
    if (!(err <= tol * std::max(1.0, std::fabs(ref[i]))))
      ++bad;
  }
  double rel = maxErr / std::max(maxRef, 1.0);
  llvm::outs() << "  " << what << " (" << got.arg.type << ", " << ref.size()
               << " values): max relative error " << rel
               << (rel <= tol ? " ok" : " FAIL") << " (tolerance " << tol;
  if (bad)
    llvm::outs() << ", " << bad << " value(s) off";
  llvm::outs() << ")\n";
  return rel;
}

struct CheckResult {
  bool ok = true;
  double worst = 0.0;
  void add(double rel, double tol) {
    ok &= rel <= tol;
    worst = std::isnan(rel) ? rel : std::max(worst, rel);
  }
  /// Prints the verdict; returns the exit status.
  int finish() const {
    llvm::outs() << (ok ? "check: ok" : "check: FAIL")
                 << " (max relative error " << worst << ")\n";
    return ok ? 0 : 1;
  }
};

/// Central finite differences of the primal's loss
///   L = sum(grad_out * out) + sum(grad_state * state)
/// computed with the interpreter in f64, compared with the backward
/// kernel's gradients (`got`, by meaning). Neurons are independent, so one
/// perturbation covers every neuron at once; the check uses the first
/// `sub` neurons (all of them for scalar params, whose gradient sums them).
LogicalResult finiteDifferenceCheck(
    ScanOp primal, int64_t T, int64_t NCL, const AdjointCase &c,
    const std::map<std::pair<std::string, unsigned>, const Buffer *> &got,
    CheckResult &result) {
  KernelVariant variant = primal.getFinalStates() ? KernelVariant::FinalState
                                                  : KernelVariant::Inference;
  unsigned numIn = primal.getNumInputs(), numSt = primal.getNumStates(),
           numPa = primal.getNumParams(), numOut = primal.getNumOutputs();
  int64_t sub = std::min<int64_t>(NCL, 32);
  // Per-neuron losses of a run on `m` neurons.
  auto losses = [&](int64_t m, const std::vector<std::vector<double>> &ops,
                    std::vector<double> &L) -> LogicalResult {
    std::vector<std::vector<double>> res;
    if (failed(interpretScan(primal, variant, T, m, ops, res)))
      return failure();
    L.assign(m, 0.0);
    auto dot = [&](const std::vector<double> &g, const std::vector<double> &v,
                   bool seq) {
      if (g.empty())
        return;
      for (int64_t n = 0; n < m; ++n)
        for (int64_t t = 0; t < (seq ? T : 1); ++t)
          L[n] += g[t * NCL + n] * v[t * m + n];
    };
    for (unsigned o = 0; o < numOut; ++o)
      dot(c.gradOutputs[o], res[o], true);
    for (unsigned s = 0; s < numSt; ++s)
      dot(c.gradStates[s], res[numOut + s], variant == KernelVariant::Inference);
    return success();
  };
  // Operands restricted to the first m neurons.
  auto slice = [&](int64_t m) {
    std::vector<std::vector<double>> ops;
    for (const auto &x : c.inputs) {
      ops.emplace_back(T * m);
      for (int64_t t = 0; t < T; ++t)
        std::copy_n(x.begin() + t * NCL, m, ops.back().begin() + t * m);
    }
    for (const auto &v : c.initStates)
      ops.emplace_back(v.begin(), v.begin() + m);
    for (unsigned k = 0; k < numPa; ++k)
      ops.push_back(primal.isPerNeuronParam(k)
                        ? std::vector<double>(c.params[k].begin(),
                                              c.params[k].begin() + m)
                        : c.params[k]);
    return ops;
  };
  const double h = 1e-5;
  // d(sum of losses of the neurons) / d(element) for one perturbed slot.
  auto central = [&](int64_t m, unsigned operand, int64_t offset,
                     int64_t stride, std::vector<double> &d) -> LogicalResult {
    std::vector<std::vector<double>> plus = slice(m), minus = slice(m);
    for (int64_t n = 0; n < (stride ? m : 1); ++n) {
      plus[operand][offset + n * stride] += h;
      minus[operand][offset + n * stride] -= h;
    }
    std::vector<double> lp, lm;
    if (failed(losses(m, plus, lp)) || failed(losses(m, minus, lm)))
      return failure();
    d.assign(m, 0.0);
    for (int64_t n = 0; n < m; ++n)
      d[n] = (lp[n] - lm[n]) / (2 * h);
    return success();
  };
  // Relative to the largest difference quotient, or for a sum over neurons
  // to `scale` (the sum of the terms' magnitudes).
  auto report = [&](StringRef what, const Buffer *buf,
                    const std::vector<std::pair<int64_t, double>> &pairs,
                    double scale = 0.0) {
    double maxErr = 0.0, maxRef = scale;
    for (auto [i, fd] : pairs) {
      double err = std::fabs(buf->at(i) - fd);
      if (!(err <= maxErr))
        maxErr = err;
      maxRef = std::max(maxRef, std::fabs(fd));
    }
    double rel = maxRef > 0 ? maxErr / maxRef : maxErr;
    const double tol = 1e-6;
    llvm::outs() << "  finite differences, " << what << " (" << pairs.size()
                 << " values): relative error " << rel
                 << (rel <= tol ? " ok" : " FAIL") << " (tolerance " << tol
                 << ")\n";
    result.add(rel, tol);
  };
  std::vector<double> d;
  for (unsigned k = 0; k < numIn; ++k) {
    auto it = got.find({"grad_input", k});
    if (it == got.end())
      continue;
    std::vector<std::pair<int64_t, double>> pairs;
    for (int64_t t = 0; t < T; ++t) {
      if (failed(central(sub, k, t * sub, 1, d)))
        return failure();
      for (int64_t n = 0; n < sub; ++n)
        pairs.push_back({t * NCL + n, d[n]});
    }
    report("grad_input #" + std::to_string(k), it->second, pairs);
  }
  for (unsigned s = 0; s < numSt; ++s) {
    auto it = got.find({"grad_init_state", s});
    if (it == got.end())
      continue;
    if (failed(central(sub, numIn + s, 0, 1, d)))
      return failure();
    std::vector<std::pair<int64_t, double>> pairs;
    for (int64_t n = 0; n < sub; ++n)
      pairs.push_back({n, d[n]});
    report("grad_init_state #" + std::to_string(s), it->second, pairs);
  }
  for (unsigned k = 0; k < numPa; ++k) {
    auto it = got.find({"grad_param", k});
    if (it == got.end())
      continue;
    std::vector<std::pair<int64_t, double>> pairs;
    if (primal.isPerNeuronParam(k)) {
      if (failed(central(sub, numIn + numSt + k, 0, 1, d)))
        return failure();
      for (int64_t n = 0; n < sub; ++n)
        pairs.push_back({n, d[n]});
    } else {
      if (failed(central(NCL, numIn + numSt + k, 0, 0, d)))
        return failure();
      double total = 0.0, magnitude = 0.0;
      for (double v : d) {
        total += v;
        magnitude += std::fabs(v);
      }
      pairs.push_back({0, total});
      report("grad_param #" + std::to_string(k) + " (sum over neurons)",
             it->second, pairs, magnitude);
      continue;
    }
    report("grad_param #" + std::to_string(k), it->second, pairs);
  }
  return success();
}

int64_t totalBytes(const std::vector<Buffer> &buffers) {
  int64_t bytes = 0;
  for (const Buffer &b : buffers)
    bytes += b.count * b.width();
  return bytes;
}

double median(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

/// Where kernels run: the CPU JIT or the GPU through the CUDA runtime.
class Runner {
public:
  virtual ~Runner() = default;
  /// Runs kernel `name` on `buffers` (results come back into them).
  virtual LogicalResult run(StringRef name, std::vector<Buffer> &buffers,
                            int64_t T, int64_t NCL) = 0;
  /// Prints the median time of `name` on `buffers` and its bandwidth.
  virtual LogicalResult bench(StringRef name, std::vector<Buffer> &buffers,
                              int64_t T, int64_t NCL) = 0;
};

class CPURunner : public Runner {
public:
  explicit CPURunner(std::unique_ptr<CPUKernels> kernels)
      : kernels(std::move(kernels)) {}

  LogicalResult run(StringRef name, std::vector<Buffer> &buffers, int64_t T,
                    int64_t NCL) override {
    auto fn = kernels->lookup(name);
    if (failed(fn))
      return failure();
    zeroSums(buffers);
    CPUKernels::run(*fn, pointers(buffers), T, NCL, clThreads);
    return success();
  }

  LogicalResult bench(StringRef name, std::vector<Buffer> &buffers, int64_t T,
                      int64_t NCL) override {
    auto fn = kernels->lookup(name);
    if (failed(fn))
      return failure();
    std::vector<void *> ptrs = pointers(buffers);
    for (int i = 0; i < 2; ++i)
      CPUKernels::run(*fn, ptrs, T, NCL, clThreads);
    std::vector<double> times;
    for (unsigned i = 0; i < std::max(1u, (unsigned)clReps); ++i) {
      auto start = std::chrono::steady_clock::now();
      CPUKernels::run(*fn, ptrs, T, NCL, clThreads);
      times.push_back(std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - start)
                          .count());
    }
    double ms = median(times);
    int64_t bytes = totalBytes(buffers);
    llvm::outs() << "bench: median " << ms << " ms over " << times.size()
                 << " runs, " << bytes << " bytes moved, "
                 << (ms > 0 ? bytes / (ms * 1e6) : 0.0) << " GB/s\n";
    return success();
  }

private:
  std::unique_ptr<CPUKernels> kernels;
};

int reportError(llvm::Error error) {
  llvm::errs() << "flexsn-run: error: " << llvm::toString(std::move(error))
               << "\n";
  return 2;
}

/// Device buffers mirror the host buffers; each run copies operands in and
/// results out. Launch: grid ceil(NCL / (block * neurons per thread)).
class CUDARunner : public Runner {
public:
  CUDARunner(std::unique_ptr<cuda::Device> device, cuda::Module module,
             const GPUOptions &options)
      : device(std::move(device)), module(module), options(options) {}
  ~CUDARunner() override {
    for (cuda::DevicePtr p : allocations)
      device->free(p);
  }

  LogicalResult run(StringRef name, std::vector<Buffer> &buffers, int64_t T,
                    int64_t NCL) override {
    std::vector<cuda::DevicePtr> ptrs;
    if (failed(upload(buffers, ptrs)) || failed(launch(name, ptrs, T, NCL)))
      return failure();
    if (llvm::Error e = device->synchronize())
      return fail(std::move(e));
    for (auto [b, p] : llvm::zip_equal(buffers, ptrs))
      if (isResultRole(b.arg.role))
        if (llvm::Error e = device->copyToHost(b.bytes.data(), p, b.bytes.size()))
          return fail(std::move(e));
    return success();
  }

  LogicalResult bench(StringRef name, std::vector<Buffer> &buffers, int64_t T,
                      int64_t NCL) override {
    std::vector<cuda::DevicePtr> ptrs;
    if (failed(upload(buffers, ptrs)))
      return failure();
    // Device-to-device copy of 2 x 1 GiB in the same run: the bandwidth
    // floor the kernel is compared with.
    const size_t copyBytes = size_t(1) << 30;
    auto src = device->alloc(copyBytes), dst = device->alloc(copyBytes);
    if (!src || !dst)
      return fail(src ? dst.takeError() : src.takeError());
    allocations.push_back(*src);
    allocations.push_back(*dst);
    auto copyTimes = time([&]() -> LogicalResult {
      if (llvm::Error e = device->copyOnDevice(*dst, *src, copyBytes))
        return fail(std::move(e));
      return success();
    });
    auto kernelTimes = time([&] { return launch(name, ptrs, T, NCL); });
    if (failed(copyTimes) || failed(kernelTimes))
      return failure();
    double copyMs = median(*copyTimes), ms = median(*kernelTimes);
    double copyGBs = 2.0 * copyBytes / (copyMs * 1e6);
    int64_t bytes = totalBytes(buffers);
    double gbs = ms > 0 ? bytes / (ms * 1e6) : 0.0;
    llvm::outs() << "bench: " << device->describe() << "\n"
                 << "bench: copy " << llvm::format("%.0f", copyGBs)
                 << " GB/s (device-to-device, 2 x 1 GiB, median of "
                 << copyTimes->size() << ")\n"
                 << "bench: kernel median " << llvm::format("%.4f", ms)
                 << " ms over " << kernelTimes->size() << " runs, " << bytes
                 << " bytes (floor " << llvm::format("%.4f", bytes / (copyGBs * 1e6))
                 << " ms), " << llvm::format("%.0f", gbs) << " GB/s, "
                 << llvm::format("%.0f", 100.0 * gbs / copyGBs)
                 << "% of copy\n";
    return success();
  }

private:
  LogicalResult fail(llvm::Error e) {
    reportError(std::move(e));
    return failure();
  }

  LogicalResult upload(std::vector<Buffer> &buffers,
                       std::vector<cuda::DevicePtr> &ptrs) {
    zeroSums(buffers);
    for (Buffer &b : buffers) {
      auto p = device->alloc(b.bytes.size());
      if (!p)
        return fail(p.takeError());
      allocations.push_back(*p);
      if (llvm::Error e =
              device->copyToDevice(*p, b.bytes.data(), b.bytes.size()))
        return fail(std::move(e));
      ptrs.push_back(*p);
    }
    return success();
  }

  LogicalResult launch(StringRef name, std::vector<cuda::DevicePtr> &ptrs,
                       int64_t T, int64_t NCL) {
    auto fn = device->getFunction(module, name);
    if (!fn)
      return fail(fn.takeError());
    uint64_t perBlock = options.blockSize * options.neuronsPerThread;
    uint64_t grid = (NCL + perBlock - 1) / perBlock;
    if (grid == 0)
      return success();
    if (grid > 0x7fffffffu)
      return fail(llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "NCL too large for one launch (grid over 2^31 - 1 blocks)"));
    std::vector<void *> args;
    for (cuda::DevicePtr &p : ptrs)
      args.push_back(&p);
    args.push_back(&T);
    args.push_back(&NCL);
    if (llvm::Error e = device->launch(*fn, grid, options.blockSize, args,
                                       nullptr, name))
      return fail(std::move(e));
    return success();
  }

  /// Times `fn` with CUDA events: 5 warm-up runs, then the median of at
  /// least 30.
  FailureOr<std::vector<double>> time(function_ref<LogicalResult()> fn) {
    for (int i = 0; i < 5; ++i)
      if (failed(fn()))
        return failure();
    unsigned reps = std::max(30u, (unsigned)clReps);
    std::vector<double> times;
    auto start = device->createEvent(), end = device->createEvent();
    if (!start || !end)
      return static_cast<void>(fail(start ? end.takeError() : start.takeError())), failure();
    for (unsigned i = 0; i < reps; ++i) {
      if (llvm::Error e = device->record(*start, nullptr))
        return static_cast<void>(fail(std::move(e))), failure();
      if (failed(fn()))
        return failure();
      if (llvm::Error e = device->record(*end, nullptr))
        return static_cast<void>(fail(std::move(e))), failure();
      auto ms = device->elapsedMs(*start, *end);
      if (!ms)
        return static_cast<void>(fail(ms.takeError())), failure();
      times.push_back(*ms);
    }
    device->destroyEvent(*start);
    device->destroyEvent(*end);
    if (llvm::Error e = device->synchronize())
      return static_cast<void>(fail(std::move(e))), failure();
    return times;
  }

  std::unique_ptr<cuda::Device> device;
  cuda::Module module;
  GPUOptions options;
  std::vector<cuda::DevicePtr> allocations;
};

ScanOp scanOf(ModuleOp module, StringRef funcName) {
  auto func = module.lookupSymbol<func::FuncOp>(funcName);
  ScanOp scan;
  if (func)
    func.walk([&](ScanOp s) { scan = s; });
  return scan;
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "flexsn kernel runner\n");

  if (clBackend != "cpu" && clBackend != "cuda")
    return fail("unknown backend '" + clBackend + "' (expected cpu or cuda)");
  std::string kind = clVariant;
  bool training = kind == "forward" || kind == "backward";
  if (!training && !symbolizeKernelVariant(kind))
    return fail("unknown variant '" + kind +
                "' (expected inference, final_state, forward or backward)");
  if (!training && !clSaveOps.empty())
    return fail("--save-ops applies to --variant=forward|backward");
  if (clT < 0 || clNCL < 0)
    return fail("--T and --ncl must be >= 0");
  // Every buffer is at most T * NCL elements of 8 bytes: its byte count
  // must fit in 64 bits (a wrapped size would pass the memory guard).
  int64_t elements, bytes;
  if (__builtin_mul_overflow(int64_t(clT), int64_t(clNCL), &elements) ||
      __builtin_mul_overflow(elements, int64_t(8), &bytes))
    return fail("--T=" + std::to_string(clT) + " times --ncl=" +
                std::to_string(clNCL) + " overflows 64-bit buffer sizes");
  if (clTolerance.getNumOccurrences() &&
      !(clTolerance >= 0 && std::isfinite(clTolerance)))
    return fail("--tolerance must be a finite number >= 0, not " +
                std::to_string(clTolerance));

  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  // Errors name their op by location; no dump of the (lowered) module.
  context.printOpOnDiagnostic(false);
  context.loadAllAvailableDialects();
  llvm::SourceMgr sourceMgr;
  std::string errorMessage;
  auto file = openInputFile(clInput, &errorMessage);
  if (!file)
    return fail(errorMessage);
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  SourceMgrDiagnosticHandler diagHandler(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;

  // Kernel ABIs are read after canonicalization, as every pipeline sees them.
  PassManager canon(&context);
  canon.addPass(createCanonicalizerPass());
  if (failed(canon.run(*module)))
    return 1;

  SmallVector<ScanOp> scans;
  if (failed(collectKernelScans(*module, "CPU", scans)))
    return 1;
  ScanOp scan;
  for (ScanOp s : scans) {
    auto f = cast<func::FuncOp>(s->getParentOp());
    if (clFunc.empty() || f.getSymName() == clFunc) {
      if (scan && clFunc.empty())
        return fail("the module has several kernel functions; pick one with "
                    "--func");
      scan = s;
    }
  }
  if (!scan)
    return fail(clFunc.empty() ? "the module has no flexsn.scan kernel"
                               : "no kernel function named '" + clFunc + "'");
  auto func = cast<func::FuncOp>(scan->getParentOp());
  std::string funcName = func.getSymName().str();
  // Keep only the chosen kernel function.
  for (auto other :
       llvm::make_early_inc_range(module->getOps<func::FuncOp>()))
    if (other != func)
      other.erase();

  if (!clDtype.empty()) {
    Type storage = llvm::StringSwitch<Type>(clDtype)
                       .Case("f32", Float32Type::get(&context))
                       .Case("f16", Float16Type::get(&context))
                       .Case("bf16", BFloat16Type::get(&context))
                       .Case("f64", Float64Type::get(&context))
                       .Default(Type());
    if (!storage)
      return fail("unknown --dtype '" + clDtype +
                  "' (expected f32, f16, bf16 or f64)");
    setStorageType(func, scan, storage);
    if (failed(verify(*module)))
      return 1;
  }
  if (training &&
      failed(differentiateModule(
          *module, std::vector<std::string>(clSaveOps.begin(), clSaveOps.end()))))
    return 1;
  // differentiateModule canonicalized: find the scans again.
  ScanOp primal = scanOf(*module, funcName);

  int64_t T = clT, NCL = clNCL;
  // Host buffers: refuse what this machine cannot hold (the allocation
  // would abort the process): the largest kernel's buffers, or the forward's
  // and the backward's together for a backward run.
  {
    double largest = 0, training = 0;
    for (func::FuncOp f : module->getOps<func::FuncOp>())
      f.walk([&](ScanOp s) {
        for (const KernelSpec &k : getKernelSpecs(s)) {
          double bytes = 0;
          for (const KernelArg &a : getKernelABI(s, k.variant, /*cpu=*/true))
            if (a.isPointer())
              bytes += double(elementCount(a.role, T, NCL)) *
                       (a.type.getIntOrFloatBitWidth() / 8);
          largest = std::max(largest, bytes);
          if (k.kind == "forward" || k.kind == "backward")
            training += bytes;
        }
      });
    double need = kind == "backward" ? training : largest;
    double have = double(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
    if (need > have)
      return fail(llvm::formatv("T={0} NCL={1} needs about {2:F1} GB of host "
                                "buffers; this machine has {3:F1} GB",
                                T, NCL, need / 1e9, have / 1e9)
                      .str());
  }
  std::unique_ptr<Runner> runner;
  if (clBackend == "cpu") {
    auto kernels = CPUKernels::compile(*module);
    if (failed(kernels))
      return 1;
    runner = std::make_unique<CPURunner>(std::move(*kernels));
  } else {
    auto device = cuda::Device::open();
    if (!device)
      return reportError(device.takeError());
    if (llvm::Error e = (*device)->makeCurrent())
      return reportError(std::move(e));
    GPUOptions options;
    options.chip = "sm_" + std::to_string((*device)->computeCapability());
    FailureOr<std::string> ptx = translateToPTX(*module, options);
    if (failed(ptx))
      return 1;
    auto loaded = (*device)->loadPTX(*ptx);
    if (!loaded)
      return reportError(loaded.takeError());
    runner = std::make_unique<CUDARunner>(std::move(*device), *loaded, options);
  }
  auto kernelOf = [&](ScanOp s, StringRef wanted, KernelSpec &spec) {
    for (const KernelSpec &k : getKernelSpecs(s))
      if (k.kind == wanted)
        spec = k;
    return success(!spec.name.empty());
  };
  std::mt19937_64 rng(clSeed);

  // The kernel that runs first: the primal's, or the training forward.
  ScanOp first = training ? scanOf(*module, funcName + "_forward") : primal;
  KernelSpec firstSpec;
  if (failed(kernelOf(first, training ? "forward" : kind, firstSpec)))
    return fail("no " + std::string(training ? "forward" : kind) + " kernel");
  SmallVector<KernelArg> firstAbi =
      getKernelABI(first, firstSpec.variant, /*cpu=*/true);
  std::vector<Buffer> fwd = makeBuffers(firstAbi, T, NCL);
  for (Buffer &b : fwd)
    if (!isResultRole(b.arg.role))
      fillOperand(b, describeKernelArg(first, b.arg).role, rng);
  if (failed(runner->run(firstSpec.name, fwd, T, NCL)))
    return 2;

  int status = 0;
  if (kind != "backward") {
    llvm::outs() << "kernel " << firstSpec.name << ": T=" << T
                 << " NCL=" << NCL << " backend=" << clBackend << "\n";
    if (clCheck) {
      std::vector<std::vector<double>> expected;
      if (failed(interpretScan(first, firstSpec.variant, T, NCL,
                               scanOperands(first, fwd, NCL), expected)))
        return 1;
      CheckResult check;
      for (const Buffer &b : fwd) {
        if (!isResultRole(b.arg.role))
          continue;
        unsigned idx = getArgSource(first, b.arg).number;
        double tol = clTolerance >= 0
                         ? clTolerance
                         : defaultTolerance(b.arg.type, first.getComputeType());
        ArgMeaning m = describeKernelArg(first, b.arg);
        check.add(compare(m.role + " #" + std::to_string(m.index), b,
                          expected[idx], tol),
                  tol);
      }
      status = check.finish();
    }
    if (clBench && failed(runner->bench(firstSpec.name, fwd, T, NCL)))
      return 2;
    return status;
  }

  // Backward: read what the forward wrote, plus random result gradients.
  ScanOp bscan = scanOf(*module, funcName + "_backward");
  KernelSpec bspec;
  if (failed(kernelOf(bscan, "backward", bspec)))
    return fail("no backward kernel");
  std::map<std::pair<std::string, unsigned>, const Buffer *> fromForward;
  for (const Buffer &b : fwd) {
    ArgMeaning m = describeKernelArg(first, b.arg);
    fromForward[{m.role, m.index}] = &b;
  }
  std::vector<Buffer> bwd =
      makeBuffers(getKernelABI(bscan, bspec.variant, /*cpu=*/true), T, NCL);
  std::map<std::pair<std::string, unsigned>, const Buffer *> byMeaning;
  for (Buffer &b : bwd) {
    ArgMeaning m = describeKernelArg(bscan, b.arg);
    byMeaning[{m.role, m.index}] = &b;
    if (isResultRole(b.arg.role))
      continue;
    auto it = fromForward.find({m.role, m.index});
    if (it != fromForward.end() && it->second->bytes.size() == b.bytes.size())
      b.bytes = it->second->bytes;
    else if (StringRef(m.role).starts_with("grad_"))
      fillOperand(b, m.role, rng);
    else
      return fail("the backward reads '" + m.role + "' #" +
                  std::to_string(m.index) +
                  ", which the training forward does not provide");
  }
  if (failed(runner->run(bspec.name, bwd, T, NCL)))
    return 2;
  llvm::outs() << "kernel " << bspec.name << ": T=" << T << " NCL=" << NCL
               << " backend=" << clBackend << "\n";

  if (clCheck) {
    // The reference reads the same stored forward values as the kernel.
    AdjointCase c;
    unsigned numIn = primal.getNumInputs(), numSt = primal.getNumStates(),
             numPa = primal.getNumParams(), numOut = primal.getNumOutputs();
    auto decodedOr = [&](StringRef role, unsigned i) -> std::vector<double> {
      auto it = byMeaning.find({role.str(), i});
      if (it != byMeaning.end())
        return it->second->decoded();
      auto f = fromForward.find({role.str(), i});
      return f != fromForward.end() ? f->second->decoded()
                                    : std::vector<double>();
    };
    for (unsigned k = 0; k < numIn; ++k)
      c.inputs.push_back(decodedOr("input", k));
    for (unsigned s = 0; s < numSt; ++s) {
      c.initStates.push_back(decodedOr("init_state", s));
      c.stateSeqs.push_back(decodedOr("state_seq", s));
      std::vector<double> g = decodedOr(
          primal.getFinalStates() ? "grad_final_state" : "grad_state_seq", s);
      c.gradStates.push_back(g);
    }
    for (unsigned k = 0; k < numPa; ++k)
      c.params.push_back(decodedOr("param", k));
    for (unsigned o = 0; o < numOut; ++o) {
      auto it = byMeaning.find({"grad_output", o});
      c.gradOutputs.push_back(it != byMeaning.end() ? it->second->decoded()
                                                    : std::vector<double>());
    }
    AdjointGrads ref;
    if (failed(interpretAdjoint(primal, T, NCL, c, ref)))
      return 1;
    CheckResult check;
    for (const Buffer &b : bwd) {
      if (!isResultRole(b.arg.role))
        continue;
      ArgMeaning m = describeKernelArg(bscan, b.arg);
      const std::vector<double> *expected =
          m.role == "grad_input"        ? &ref.inputs[m.index]
          : m.role == "grad_init_state" ? &ref.initStates[m.index]
          : m.role == "grad_param"      ? &ref.params[m.index]
                                        : nullptr;
      if (!expected)
        return fail("unexpected backward result '" + m.role + "'");
      double tol = clTolerance >= 0
                       ? clTolerance
                       : defaultTolerance(b.arg.type, bscan.getComputeType());
      check.add(compare(m.role + " #" + std::to_string(m.index) +
                            " vs reference adjoint",
                        b, *expected, tol),
                tol);
    }
    bool smooth = true;
    primal.walk([&](SpikeOp) { smooth = false; });
    bool f64 = primal.getComputeType().isF64() &&
               llvm::all_of(bwd, [](const Buffer &b) { return b.arg.type.isF64(); });
    if (smooth && f64 && T > 0 && NCL > 0 && clFiniteDifferences) {
      // byMeaning holds the results too (grad_input, grad_init_state,
      // grad_param); gradients the backward does not read are empty in `c`
      // and left out of the loss.
      if (failed(finiteDifferenceCheck(primal, T, NCL, c, byMeaning, check)))
        return 1;
    } else {
      llvm::outs() << "  finite differences: skipped ("
                   << (!smooth ? "the body spikes: its gradient is a surrogate"
                       : !clFiniteDifferences ? "--finite-differences=false"
                                              : "needs f64 storage and compute")
                   << ")\n";
    }
    status = check.finish();
  }
  if (clBench && failed(runner->bench(bspec.name, bwd, T, NCL)))
    return 2;
  return status;
}
