//===- flexsn-fuzz.cpp - Differential fuzzer of the flexsn compiler -------===//
//
//   flexsn-fuzz [--count=N] [--seed=S] [--jobs=J] [--cuda] [--out=DIR]
//
// Generates random valid neuron cores (1-3 inputs, 0-3 states, 1-3
// outputs, scalar and per-neuron params, every arith/math op the kernels
// lower, every surrogate family, detach, f32/f16/bf16 storage mixed per
// tensor or f64 throughout), compiles each for the CPU (and with --cuda for
// the GPU), and compares the inference, final-state, training-forward and
// backward kernels with the reference interpreter and the reference
// adjoint, leaving out neurons whose reference run passes a switch point
// (a threshold, max/min, a rounding jump) within rounding distance. It
// also checks flexsn-affine-states both ways: every backward scan is
// proven affine in its states (an adjoint is linear in the state
// gradients), and wherever a state is (in a backward scan above all), the
// reference interpreter finds its step affine (a mix of two states steps
// to the same mix of their steps) and blind to the states it does not
// read. Every scan proven affine then gets its flexsn-affine-transfer
// function: each of its Jacobian columns is checked against the
// interpreter's step at random points (the step from s + M e_j minus the
// step from s), and its kernel runs against the interpreter as the others.
//
// Deterministic by seed: core #i of seed S is the same on every run. Prints
// one summary line. On a mismatch, an error or a crash it writes the core,
// minimized while it still fails, as DIR/flexsn-fuzz-S-i.mlir with a RUN
// line for flexsn-run, and exits 1.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"
#include "flexsn/Dialect/FlexSN/Utils/AffineStates.h"
#include "flexsn/Pipelines/Pipelines.h"
#include "flexsn/Execution/Harness.h"
#include "flexsn/InitAllDialects.h"
#include "flexsn/Interpreter/Interpreter.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/CrashRecoveryContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <random>
#include <map>
#include <set>

#include <sys/wait.h>
#include <unistd.h>

using namespace mlir;
using namespace mlir::flexsn;
namespace cl = llvm::cl;

/// Only these options show in --help (not LLVM's own).
static cl::OptionCategory fuzzCategory("flexsn-fuzz options");

static cl::opt<unsigned> clCount(cl::cat(fuzzCategory), "count",
                                 cl::desc("cores to generate"), cl::init(100));
static cl::opt<uint64_t> clSeed(cl::cat(fuzzCategory), "seed",
                                cl::desc("seed of the whole run"), cl::init(1));
static cl::opt<unsigned> clFirst(cl::cat(fuzzCategory), "first",
                                 cl::desc("index of the first core (replay "
                                          "one core with --first=i --count=1)"),
                                 cl::init(0));
/// The compilation's flags (prefetch, l2-prefetch, neurons-per-thread,
/// block-size, save-ops), declared once, by PipelineOptions; main() adds
/// them to the command line.
static PipelineOptions pipeline;
static cl::opt<unsigned> clJobs(cl::cat(fuzzCategory), "jobs",
                                cl::desc("worker processes"), cl::init(1));
static cl::opt<bool> clCuda(cl::cat(fuzzCategory), "cuda",
                            cl::desc("also run every kernel on the GPU"));
static cl::opt<std::string> clOut(cl::cat(fuzzCategory), "out",
                                  cl::desc("where failing cores are written"),
                                  cl::init("."));
static cl::opt<bool> clVerbose(cl::cat(fuzzCategory), "v",
                               cl::desc("print every core and result"));
static cl::opt<double> clTolerance(
    cl::cat(fuzzCategory), "tolerance",
    cl::desc("max relative error of every comparison (default: by the "
             "core's precision, f64 1e-9, f32 1e-3, 5e-2 through f16/bf16)"),
    cl::init(-1.0));
static cl::opt<bool> clNoMinimize(cl::cat(fuzzCategory), "no-minimize",
                                  cl::desc("write failing cores as generated"));

//===----------------------------------------------------------------------===//
// Random cores
//===----------------------------------------------------------------------===//

namespace {
enum class Kind {
  Unary,   // `name` applied to a (possibly guarded) operand
  Binary,  // a `name` b
  Fma,     // a * b + c
  Select,  // cmpf(pred, a, b) ? c : d
  Spike,   // spike(a - threshold)
  Detach,  // detach(a)
  IntRound,// sitofp(fptosi(clamp(a)))
  Quantize,// extf(truncf(a)) through f16 or bf16 (f32 bodies)
  FPowI,   // fpowi(a, n)
};

struct GenOp {
  Kind kind;
  std::string name;         // op name, guard or predicate
  std::vector<unsigned> in; // value ids
  double constant = 0.0;    // threshold, or fpowi's exponent
  std::string surrogate;    // "<atan, alpha = ...>"
};

struct Core {
  unsigned numIn = 1, numSt = 0, numPa = 0;
  std::vector<std::string> inType, stType, outType, paType; // storage
  std::vector<bool> paPerNeuron;
  std::string compute = "f32";
  std::vector<GenOp> ops;        // op i defines value numArgs() + i
  std::vector<unsigned> outputs; // value ids
  std::vector<unsigned> next;    // new state value ids
  std::vector<std::string> squash; // per state: "tanh" or "clamp"

  unsigned numArgs() const { return numIn + numSt + numPa; }
};

/// The unary ops, with the guard that keeps their argument in the domain
/// where the op is finite and smooth enough to compare.
struct UnaryInfo {
  const char *op;
  const char *guard; // none, cap (min(a, 4)), pos (|a| + 0.5), unit
                     // (0.9 * tanh(a)), abs1 (|a| + 1.5), clamp6
};
const UnaryInfo kUnary[] = {
    {"arith.negf", "none"},  {"math.exp", "cap"},    {"math.exp2", "cap"},
    {"math.expm1", "cap"},   {"math.log", "pos"},    {"math.log2", "pos"},
    {"math.log10", "pos"},   {"math.log1p", "pos"},  {"math.sqrt", "pos"},
    {"math.rsqrt", "pos"},   {"math.cbrt", "pos"},   {"math.tanh", "none"},
    {"math.sinh", "clamp6"}, {"math.cosh", "clamp6"}, {"math.sin", "none"},
    {"math.cos", "none"},    {"math.tan", "unit"},   {"math.asin", "unit"},
    {"math.acos", "unit"},   {"math.atan", "none"},  {"math.asinh", "none"},
    {"math.acosh", "abs1"},  {"math.atanh", "unit"}, {"math.erf", "none"},
    {"math.erfc", "none"},   {"math.absf", "none"},  {"math.floor", "none"},
    {"math.ceil", "none"},   {"math.round", "none"}, {"math.roundeven", "none"},
    {"math.trunc", "none"},
};
/// Binary ops; guard "pos" puts b through |b| + 0.5, "base" puts a through
/// |a| + 0.5 and b through clamp(b, -2, 2).
struct BinaryInfo {
  const char *op;
  const char *guard;
};
const BinaryInfo kBinary[] = {
    {"arith.addf", "none"},     {"arith.subf", "none"},
    {"arith.mulf", "none"},     {"arith.divf", "pos"},
    {"arith.maximumf", "none"}, {"arith.minimumf", "none"},
    {"arith.maxnumf", "none"},  {"arith.minnumf", "none"},
    {"arith.remf", "pos"},      {"math.powf", "base"},
    {"math.atan2", "none"},     {"math.copysign", "none"},
};
const char *kPredicates[] = {"oeq", "ogt", "oge", "olt", "ole", "one",
                             "ord", "ueq", "ugt", "uge", "ult", "ule",
                             "une", "uno", "false", "true"};

class Generator {
public:
  explicit Generator(uint64_t seed) : rng(seed) {}

  Core generate() {
    Core c;
    c.numIn = pick(1, 3);
    c.numSt = pick(0, 3);
    c.numPa = pick(0, 2);
    unsigned numOut = pick(1, 3);
    bool f64 = chance(0.1);
    auto storage = [&] {
      if (f64)
        return std::string("f64");
      static const char *types[] = {"f32", "f32", "f16", "bf16"};
      return std::string(types[pick(0, 3)]);
    };
    c.compute = f64 ? "f64" : "f32";
    for (unsigned i = 0; i < c.numIn; ++i)
      c.inType.push_back(storage());
    for (unsigned i = 0; i < c.numSt; ++i)
      c.stType.push_back(storage());
    for (unsigned i = 0; i < c.numPa; ++i) {
      c.paPerNeuron.push_back(chance(0.5));
      c.paType.push_back(c.paPerNeuron.back() ? storage() : c.compute);
    }
    for (unsigned i = 0; i < numOut; ++i)
      c.outType.push_back(storage());
    unsigned numOps = pick(1, 14);
    for (unsigned i = 0; i < numOps; ++i)
      c.ops.push_back(randomOp(c, c.numArgs() + i));
    unsigned numValues = c.numArgs() + numOps;
    // Outputs and new states favour late values (long dependence chains).
    auto lateValue = [&] {
      unsigned lo = numValues > 4 ? numValues - 4 : 0;
      return chance(0.7) ? pick(lo, numValues - 1) : pick(0, numValues - 1);
    };
    for (unsigned i = 0; i < numOut; ++i)
      c.outputs.push_back(lateValue());
    for (unsigned i = 0; i < c.numSt; ++i) {
      c.next.push_back(lateValue());
      c.squash.push_back(chance(0.5) ? "tanh" : "clamp");
    }
    return c;
  }

private:
  unsigned pick(unsigned lo, unsigned hi) {
    return std::uniform_int_distribution<unsigned>(lo, hi)(rng);
  }
  bool chance(double p) {
    return std::uniform_real_distribution<double>(0, 1)(rng) < p;
  }
  double uniform(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  }

  GenOp randomOp(const Core &c, unsigned numValues) {
    auto value = [&] { return pick(0, numValues - 1); };
    GenOp op;
    unsigned which = pick(0, 99);
    if (which < 30) {
      const UnaryInfo &u = kUnary[pick(0, std::size(kUnary) - 1)];
      op = {Kind::Unary, std::string(u.op) + ":" + u.guard, {value()}};
    } else if (which < 62) {
      const BinaryInfo &b = kBinary[pick(0, std::size(kBinary) - 1)];
      op = {Kind::Binary, std::string(b.op) + ":" + b.guard,
            {value(), value()}};
    } else if (which < 67) {
      op = {Kind::Fma, "math.fma", {value(), value(), value()}};
    } else if (which < 75) {
      op = {Kind::Select, kPredicates[pick(0, std::size(kPredicates) - 1)],
            {value(), value(), value(), value()}};
    } else if (which < 88) {
      op = {Kind::Spike, "", {value()}};
      op.constant = uniform(-0.5, 1.5);
      auto kind = *symbolizeSurrogateKind(
          pick(0, getMaxEnumValForSurrogateKind()));
      const SurrogateInfo &info = getSurrogateInfo(kind);
      std::string text = "<" + stringifySurrogateKind(kind).str();
      for (const SurrogateParamInfo &p : info.params) {
        double v = p.defaultValue;
        if (p.range == ParamRange::Positive)
          v *= uniform(0.5, 2.0);
        text += llvm::formatv(", {0} = {1:e9}", p.name, v).str();
      }
      op.surrogate = text + ">";
    } else if (which < 92) {
      op = {Kind::Detach, "", {value()}};
    } else if (which < 95) {
      op = {Kind::IntRound, "", {value()}};
    } else if (which < 97 && c.compute == "f32") {
      op = {Kind::Quantize, chance(0.5) ? "bf16" : "f16", {value()}};
    } else {
      op = {Kind::FPowI, "", {value()}};
      op.constant = pick(0, 3);
    }
    return op;
  }

  std::mt19937_64 rng;
};

/// Renders a core as a module with one kernel function @core.
class Renderer {
public:
  explicit Renderer(const Core &c) : c(c) {}

  std::string render() {
    live = liveOps();
    std::string sig, scanIns, scanSt, scanPa, inTypes, stTypes, paTypes;
    std::vector<std::string> resTypes;
    auto seq = [](const std::string &t) { return "tensor<?x?x" + t + ">"; };
    auto vec = [](const std::string &t) { return "tensor<?x" + t + ">"; };
    auto join = [](std::string &acc, const std::string &s) {
      acc += (acc.empty() ? "" : ", ") + s;
    };
    for (unsigned i = 0; i < c.numIn; ++i) {
      join(sig, "%x" + std::to_string(i) + ": " + seq(c.inType[i]));
      join(scanIns, "%x" + std::to_string(i));
      join(inTypes, seq(c.inType[i]));
    }
    for (unsigned i = 0; i < c.numSt; ++i) {
      join(sig, "%s" + std::to_string(i) + ": " + vec(c.stType[i]));
      join(scanSt, "%s" + std::to_string(i));
      join(stTypes, vec(c.stType[i]));
    }
    for (unsigned i = 0; i < c.numPa; ++i) {
      std::string t = c.paPerNeuron[i] ? vec(c.paType[i]) : c.compute;
      join(sig, "%p" + std::to_string(i) + ": " + t);
      join(scanPa, "%p" + std::to_string(i));
      join(paTypes, t);
    }
    for (const std::string &t : c.outType)
      resTypes.push_back(seq(t));
    for (const std::string &t : c.stType)
      resTypes.push_back(seq(t));
    std::string results;
    for (const std::string &t : resTypes)
      join(results, t);

    std::string body;
    llvm::raw_string_ostream os(body);
    std::string blockArgs;
    for (unsigned v = 0; v < c.numArgs(); ++v)
      join(blockArgs, "%v" + std::to_string(v) + ": " + c.compute);
    os << "  ^bb0(" << blockArgs << "):\n";
    for (unsigned i = 0; i < c.ops.size(); ++i)
      if (live.count(i))
        emitOp(os, i);
    std::vector<std::string> yields;
    for (unsigned o : c.outputs)
      yields.push_back(val(o));
    for (unsigned k = 0; k < c.numSt; ++k)
      yields.push_back(emitSquash(os, k));
    std::string yieldVals, yieldTypes;
    for (const std::string &y : yields) {
      join(yieldVals, y);
      join(yieldTypes, c.compute);
    }
    os << "    flexsn.yield " << yieldVals << " : " << yieldTypes << "\n";

    std::string out;
    llvm::raw_string_ostream m(out);
    m << "func.func @core(" << sig << ") -> (" << results << ") {\n";
    std::string names;
    for (unsigned i = 0; i < resTypes.size(); ++i)
      join(names, "%r#" + std::to_string(i));
    m << "  %r:" << resTypes.size() << " = flexsn.scan";
    m << " ins(" << scanIns << " : " << inTypes << ")";
    if (c.numSt)
      m << " states(" << scanSt << " : " << stTypes << ")";
    if (c.numPa)
      m << " params(" << scanPa << " : " << paTypes << ")";
    m << " -> (" << results << ") {\n" << body << "  }\n";
    m << "  return " << names << " : " << results << "\n}\n";
    return out;
  }

private:
  /// Ops the outputs and new states depend on.
  std::set<unsigned> liveOps() {
    std::set<unsigned> ops;
    std::vector<unsigned> work(c.outputs.begin(), c.outputs.end());
    work.insert(work.end(), c.next.begin(), c.next.end());
    while (!work.empty()) {
      unsigned v = work.back();
      work.pop_back();
      if (v < c.numArgs() || !ops.insert(v - c.numArgs()).second)
        continue;
      for (unsigned in : c.ops[v - c.numArgs()].in)
        work.push_back(in);
    }
    return ops;
  }

  /// The SSA name of value `v`: %vN for block arguments, the name of the
  /// op that computes it otherwise.
  std::string val(unsigned v) {
    auto it = names.find(v);
    return it != names.end() ? it->second : "%v" + std::to_string(v);
  }
  std::string fresh() { return "%t" + std::to_string(temp++); }
  std::string constant(llvm::raw_ostream &os, double x) {
    std::string name = fresh();
    os << "    " << name << " = arith.constant "
       << llvm::formatv("{0:e9}", x).str() << " : " << c.compute << "\n";
    return name;
  }
  std::string un(llvm::raw_ostream &os, StringRef op, const std::string &a) {
    std::string name = fresh();
    os << "    " << name << " = " << op << " " << a << " : " << c.compute
       << "\n";
    return name;
  }
  std::string bin(llvm::raw_ostream &os, StringRef op, const std::string &a,
                  const std::string &b) {
    std::string name = fresh();
    os << "    " << name << " = " << op << " " << a << ", " << b << " : "
       << c.compute << "\n";
    return name;
  }
  std::string clamp(llvm::raw_ostream &os, const std::string &a, double lim) {
    return bin(os, "arith.maximumf",
               bin(os, "arith.minimumf", a, constant(os, lim)),
               constant(os, -lim));
  }
  std::string guard(llvm::raw_ostream &os, StringRef kind,
                    const std::string &a) {
    if (kind == "cap")
      return bin(os, "arith.minimumf", a, constant(os, 4.0));
    if (kind == "pos")
      return bin(os, "arith.addf", un(os, "math.absf", a), constant(os, 0.5));
    if (kind == "abs1")
      return bin(os, "arith.addf", un(os, "math.absf", a), constant(os, 1.5));
    if (kind == "unit")
      return bin(os, "arith.mulf", un(os, "math.tanh", a), constant(os, 0.9));
    if (kind == "clamp6")
      return clamp(os, a, 6.0);
    return a;
  }

  void emitOp(llvm::raw_ostream &os, unsigned i) {
    const GenOp &op = c.ops[i];
    auto in = [&](unsigned k) { return val(op.in[k]); };
    auto [name, guardKind] = StringRef(op.name).split(':');
    std::string r;
    switch (op.kind) {
    case Kind::Unary:
      r = un(os, name, guard(os, guardKind, in(0)));
      break;
    case Kind::Binary: {
      std::string a = in(0), b = in(1);
      if (guardKind == "pos")
        b = guard(os, "pos", b);
      if (guardKind == "base") {
        a = guard(os, "pos", a);
        b = clamp(os, b, 2.0);
      }
      r = bin(os, name, a, b);
      break;
    }
    case Kind::Fma:
      r = fresh();
      os << "    " << r << " = math.fma " << in(0) << ", " << in(1) << ", "
         << in(2) << " : " << c.compute << "\n";
      break;
    case Kind::Select: {
      std::string cond = fresh();
      os << "    " << cond << " = arith.cmpf " << op.name << ", " << in(0)
         << ", " << in(1) << " : " << c.compute << "\n";
      r = fresh();
      os << "    " << r << " = arith.select " << cond << ", " << in(2) << ", "
         << in(3) << " : " << c.compute << "\n";
      break;
    }
    case Kind::Spike: {
      std::string d = bin(os, "arith.subf", in(0), constant(os, op.constant));
      r = fresh();
      os << "    " << r << " = flexsn.spike " << d << " surrogate "
         << op.surrogate << " : " << c.compute << "\n";
      break;
    }
    case Kind::Detach:
      r = fresh();
      os << "    " << r << " = flexsn.detach " << in(0) << " : " << c.compute
         << "\n";
      break;
    case Kind::IntRound: {
      std::string a = clamp(os, in(0), 1e6), i32 = fresh();
      os << "    " << i32 << " = arith.fptosi " << a << " : " << c.compute
         << " to i32\n";
      r = fresh();
      os << "    " << r << " = arith.sitofp " << i32 << " : i32 to "
         << c.compute << "\n";
      break;
    }
    case Kind::Quantize: {
      std::string h = fresh();
      os << "    " << h << " = arith.truncf " << in(0) << " : " << c.compute
         << " to " << op.name << "\n";
      r = fresh();
      os << "    " << r << " = arith.extf " << h << " : " << op.name << " to "
         << c.compute << "\n";
      break;
    }
    case Kind::FPowI: {
      std::string n = fresh();
      os << "    " << n << " = arith.constant " << int(op.constant)
         << " : i32\n";
      std::string a = clamp(os, in(0), 8.0);
      r = fresh();
      os << "    " << r << " = math.fpowi " << a << ", " << n << " : "
         << c.compute << ", i32\n";
      break;
    }
    }
    names[c.numArgs() + i] = r;
  }

  /// A new state stays bounded: tanh(x) * 4 or clamp(x, -8, 8).
  std::string emitSquash(llvm::raw_ostream &os, unsigned k) {
    std::string x = val(c.next[k]);
    if (c.squash[k] == "tanh")
      return bin(os, "arith.mulf", un(os, "math.tanh", x), constant(os, 4.0));
    return clamp(os, x, 8.0);
  }

  const Core &c;
  std::set<unsigned> live;
  std::map<unsigned, std::string> names;
  unsigned temp = 0;
};

//===----------------------------------------------------------------------===//
// Running a core
//===----------------------------------------------------------------------===//

struct Shape {
  int64_t T, NCL;
  uint64_t seed;
};

struct Outcome {
  enum Status { Ok, Mismatch, Error, Crash } status = Ok;
  std::string what;     // the first failure, error message or crash
  std::string variant;  // where it failed
  std::string backend = "cpu";
  unsigned kernels = 0;
  int64_t masked = 0;
  unsigned skipped = 0;
};

double tieMargin(const Core &c) {
  auto coarse = [](const std::vector<std::string> &ts) {
    return llvm::any_of(ts, [](const std::string &t) {
      return t == "f16" || t == "bf16";
    });
  };
  bool quantized = llvm::any_of(c.ops, [](const GenOp &op) {
    return op.kind == Kind::Quantize;
  });
  if (quantized || coarse(c.inType) || coarse(c.stType) ||
      coarse(c.outType) || coarse(c.paType))
    return 2e-2;
  // f64: wide enough for the finite differences' step (1e-5).
  return c.compute == "f64" ? 1e-4 : 1e-3;
}

/// The fuzzer's tolerance: a kernel bug shows as an O(1) error (a lost
/// sign, a wrong branch, a NaN), while a random core may amplify the one-ulp
/// differences of libm and the kernels' math chaotically over T steps. So
/// the bound is looser than flexsn-run's defaults: f64 1e-9, f32 1e-3, and
/// 5e-2 once any value passes through f16/bf16 (a value next to a rounding
/// boundary of a 16-bit type may land one ulp, 0.8%, away, and move on).
double tolerance(const Core &c) {
  if (clTolerance >= 0)
    return clTolerance;
  double margin = tieMargin(c);
  return margin >= 2e-2 ? 5e-2 : c.compute == "f64" ? 1e-9 : 1e-3;
}

/// Whether every op of the core is smooth (no jump, no kink): the only
/// cores finite differences can check. Squashing a state with clamp is a
/// kink too.
bool isSmooth(const Core &c) {
  for (const std::string &s : c.squash)
    if (s == "clamp")
      return false;
  for (const GenOp &op : c.ops) {
    StringRef name = StringRef(op.name).split(':').first;
    if (op.kind == Kind::Select || op.kind == Kind::IntRound ||
        op.kind == Kind::Quantize || op.kind == Kind::FPowI)
      return false;
    if (op.kind == Kind::Fma || op.kind == Kind::Spike ||
        op.kind == Kind::Detach)
      continue;
    if (llvm::is_contained({"math.absf", "math.floor", "math.ceil",
                            "math.round", "math.roundeven", "math.trunc",
                            "arith.maximumf", "arith.minimumf",
                            "arith.maxnumf", "arith.minnumf", "arith.remf",
                            "math.atan2", "math.copysign"},
                           name))
      return false;
    // Guards with abs or min are kinks as well.
    StringRef guard = StringRef(op.name).split(':').second;
    if (guard == "pos" || guard == "abs1" || guard == "cap" ||
        guard == "clamp6" || guard == "base")
      return false;
  }
  return true;
}

/// Compiles `core` and runs every kernel variant on the CPU (and the GPU
/// with `cuda`), with the core's own margin, tolerance and smoothness.
/// What is wrong where the analysis does not prove a reverse scan of
/// `module` affine in its states; empty where it does.
std::string backwardNotAffine(ModuleOp module) {
  std::string what;
  module.walk([&](flexsn::ScanOp scan) {
    if (!scan.getReverse() || !what.empty())
      return;
    for (auto [i, u] : llvm::enumerate(flexsn::analyzeAffineStates(scan)))
      if (!u.affine && what.empty())
        what = llvm::formatv("backward state #{0} is not proven affine: {1}", i,
                             u.reason)
                   .str();
  });
  return what;
}

/// The tolerance of a check by the interpreter of `scan`'s step: its
/// compute type's, or a half type's where the body rounds to one.
double stepTolerance(flexsn::ScanOp scan) {
  double tol = scan.getComputeType().isF64() ? 1e-9 : 1e-4;
  scan.getBodyBlock().walk([&](arith::TruncFOp op) {
    if (op.getType().getIntOrFloatBitWidth() <= 16)
      tol = 3e-2;
  });
  return tol;
}

/// Where analyzeAffineStates calls a state of `scan` affine but the step,
/// evaluated by the reference interpreter at random points, is not: what
/// differs; empty otherwise. A mix a s1 + (1 - a) s2 of two states must
/// step to the same mix of their new values, and a state the update does
/// not read must not change it. Values round to the body's types, hence a
/// tolerance of the narrowest type it rounds to.
std::string affineButNotSo(flexsn::ScanOp scan, uint64_t seed) {
  auto updates = flexsn::analyzeAffineStates(scan);
  if (llvm::none_of(updates, [](const flexsn::StateUpdate &u) { return u.affine; }))
    return "";
  double tol = stepTolerance(scan);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> value(-2.0, 2.0), mix(0.1, 0.9);
  Block &body = scan.getBodyBlock();
  auto states = scan.getStateArgs();
  auto newStates = scan.getYield()->getOperands().drop_front(scan.getNumOutputs());
  auto step = [&](ArrayRef<double> args, ArrayRef<double> s) {
    llvm::DenseMap<Value, double> env;
    for (auto [arg, v] : llvm::zip(body.getArguments(), args))
      env[arg] = v;
    for (auto [arg, v] : llvm::zip(states, s))
      env[arg] = v;
    flexsn::evaluateBody(scan, env);
    SmallVector<double> out;
    for (Value v : newStates)
      out.push_back(env.lookup(v));
    return out;
  };
  for (int trial = 0; trial < 8; ++trial) {
    SmallVector<double> args, s1, s2, sm;
    // parameters shifted positive (decays, thresholds), the rest around 0
    unsigned firstParam = body.getNumArguments() - scan.getNumParams();
    for (BlockArgument arg : body.getArguments())
      args.push_back(value(rng) + 2.5 * (arg.getArgNumber() >= firstParam));
    double a = mix(rng);
    for (unsigned j = 0; j < states.size(); ++j) {
      s1.push_back(value(rng));
      s2.push_back(value(rng));
      sm.push_back(a * s1[j] + (1 - a) * s2[j]);
    }
    auto f1 = step(args, s1), f2 = step(args, s2), fm = step(args, sm);
    for (auto [i, u] : llvm::enumerate(updates)) {
      if (!u.affine)
        continue;
      double want = a * f1[i] + (1 - a) * f2[i];
      if (!std::isfinite(want) || !std::isfinite(fm[i]))
        continue;
      double scale = std::max({1.0, std::fabs(f1[i]), std::fabs(f2[i])});
      if (std::fabs(fm[i] - want) > tol * scale)
        return llvm::formatv("state #{0} proven affine, but a mix of two states steps "
                             "to {1}, not {2}",
                             i, fm[i], want)
            .str();
      for (unsigned j = 0; j < states.size(); ++j) {
        if (u.reads.test(j))
          continue;
        SmallVector<double> moved(s1);
        moved[j] = s2[j];
        double got = step(args, moved)[i];
        if (std::isfinite(got) && std::fabs(got - f1[i]) > tol * scale)
          return llvm::formatv("state #{0} reads state #{1}, which the analysis "
                               "says it does not",
                               i, j)
              .str();
      }
    }
  }
  return "";
}

/// Where the transfer scan `tr` of `scan` (flexsn-affine-transfer) is
/// wrong at random points of the interpreter: its new states must be the
/// step's, and column j of its new Jacobian the step from s + M e_j minus
/// the step from s (the step is affine). Empty where it is right.
std::string transferButNotSo(flexsn::ScanOp scan, flexsn::ScanOp tr,
                             uint64_t seed) {
  double tol = stepTolerance(scan);
  std::mt19937_64 rng(seed ^ 0x7472616e73666572ULL);
  std::uniform_real_distribution<double> value(-2.0, 2.0);
  unsigned k = scan.getNumStates(), front = scan.getNumInputs() + scan.getNumLagged();
  auto step = [&](flexsn::ScanOp sc, ArrayRef<double> args) {
    llvm::DenseMap<Value, double> env;
    for (auto [arg, v] : llvm::zip(sc.getBodyBlock().getArguments(), args))
      env[arg] = v;
    flexsn::evaluateBody(sc, env);
    SmallVector<double> out;
    for (Value v : sc.getYield()->getOperands().drop_front(sc.getNumOutputs()))
      out.push_back(env.lookup(v));
    return out;
  };
  for (int trial = 0; trial < 8; ++trial) {
    SmallVector<double> args, s, m;
    unsigned firstParam = scan.getBodyBlock().getNumArguments() - scan.getNumParams();
    for (BlockArgument arg : scan.getBodyBlock().getArguments())
      args.push_back(value(rng) + 2.5 * (arg.getArgNumber() >= firstParam));
    for (unsigned e = 0; e < k * k; ++e)
      m.push_back(value(rng));
    // the transfer body: inputs, lagged, states, the Jacobian, params
    SmallVector<double> trArgs(ArrayRef<double>(args).take_front(front + k));
    llvm::append_range(trArgs, m);
    llvm::append_range(trArgs, ArrayRef<double>(args).drop_front(front + k));
    auto got = step(tr, trArgs), base = step(scan, args);
    auto bad = [&](double g, double w, double scale) {
      return std::isfinite(g) && std::isfinite(w) && std::fabs(g - w) > tol * scale;
    };
    for (unsigned i = 0; i < k; ++i)
      if (bad(got[i], base[i], std::max(1.0, std::fabs(base[i]))))
        return llvm::formatv("transfer state #{0} steps to {1}, the core's to {2}", i,
                             got[i], base[i])
            .str();
    for (unsigned j = 0; j < k; ++j) {
      SmallVector<double> moved(args);
      for (unsigned i = 0; i < k; ++i)
        moved[front + i] += m[i * k + j];
      auto shifted = step(scan, moved);
      for (unsigned i = 0; i < k; ++i) {
        double want = shifted[i] - base[i];
        double scale = std::max({1.0, std::fabs(shifted[i]), std::fabs(base[i])});
        if (bad(got[k + i * k + j], want, scale))
          return llvm::formatv("transfer Jacobian entry ({0}, {1}) steps to {2}; the "
                               "core's step moves by {3}",
                               i, j, got[k + i * k + j], want)
              .str();
      }
    }
  }
  return "";
}

/// Adds the transfer function of every scan of `module` proven affine and
/// checks each against the interpreter: their names, or what is wrong.
FailureOr<SmallVector<std::string>> addTransfers(ModuleOp module, uint64_t seed,
                                                 std::string &wrong) {
  PassManager pm(module.getContext());
  pm.addPass(flexsn::createFlexSNAffineTransfer());
  if (failed(pm.run(module)))
    return failure();
  SmallVector<std::string> names;
  module.walk([&](func::FuncOp fn) {
    StringRef name = fn.getSymName();
    if (!name.consume_back("_transfer") || !wrong.empty())
      return;
    auto original = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
        module, StringAttr::get(module.getContext(), name));
    flexsn::ScanOp scan, tr;
    original.walk([&](flexsn::ScanOp op) { scan = op; });
    fn.walk([&](flexsn::ScanOp op) { tr = op; });
    wrong = transferButNotSo(scan, tr, seed);
    names.push_back(fn.getSymName().str());
  });
  return names;
}

/// The NCL at which the chunked run reads kChunkWidth-wide chunks: the
/// shape's, rounded up to a multiple of the width, two chunks or more.
constexpr int64_t kChunkWidth = 8;
int64_t chunkedNCL(const Shape &shape) {
  return kChunkWidth * std::max<int64_t>(2, (shape.NCL + kChunkWidth - 1) / kChunkWidth);
}

/// Sets `out` to an error at `where`: the error's message, or for a
/// diagnosed one the first error diagnostic.
void recordError(Outcome &out, std::string where, llvm::Error e,
                 const std::string &diagnostics) {
  out.status = Outcome::Error;
  out.variant = std::move(where);
  llvm::handleAllErrors(
      std::move(e), [&](const DiagnosedError &) { out.what = diagnostics; },
      [&](const llvm::ErrorInfoBase &info) { out.what = info.message(); });
}

/// A kernel function of a prepared module and the variant of it to run.
using KernelCase = std::pair<std::string, std::string>;

/// Runs `cases` on every backend against the references at T steps of NCL
/// neurons, counting kernels into `out`. At an error or a mismatch it
/// stops with `out` saying what, the variant named `prefix`, the function
/// where it is not `primal`, and the variant; returns whether all ran ok.
bool runCases(ModuleOp module, StringRef primal, ArrayRef<KernelCase> cases,
              int64_t T, int64_t NCL, uint64_t seed,
              ArrayRef<std::string> backends, const HarnessOptions &options,
              StringRef prefix, const std::string &diagnostics, Outcome &out,
              llvm::raw_ostream &os) {
  for (const std::string &backend : backends) {
    out.backend = backend;
    auto runner = backend == "cpu" ? createCPURunner(module, options, pipeline)
                                   : createCUDARunner(module, options, pipeline);
    if (!runner) {
      recordError(out, (prefix + "compile").str(), runner.takeError(), diagnostics);
      return false;
    }
    for (const auto &[name, variant] : cases) {
      std::string label = (prefix + (name == primal ? "" : name + " ") + variant).str();
      auto result = runKernelCase(module, name, variant, T, NCL, seed, **runner,
                                  options, /*check=*/true, /*bench=*/false, os);
      if (!result) {
        recordError(out, label, result.takeError(), diagnostics);
        return false;
      }
      out.kernels += StringRef(variant).starts_with("backward") || options.repair ? 2 : 1;
      out.masked = std::max(out.masked, result->masked);
      out.skipped += result->skipped;
      if (!result->ok) {
        out.status = Outcome::Mismatch;
        out.variant = label;
        out.what = result->firstFailure;
        return false;
      }
    }
  }
  return true;
}

/// The core again with its sequences holding chunks side by side
/// (flexsn.chunk_width): its inference and final-state kernels against the
/// interpreter, which the harness gives the chunks in rows, and their
/// chunk repair kernels; its training kernels against the reference
/// adjoint.
void runChunked(MLIRContext &context, const std::string &text, const Shape &shape,
                ArrayRef<std::string> backends, const HarnessOptions &options,
                const std::string &diagnostics, Outcome &out,
                llvm::raw_ostream &os) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
  module->walk([&](flexsn::ScanOp scan) {
    scan->setAttr(kChunkWidthAttr,
                  IntegerAttr::get(IntegerType::get(&context, 64), kChunkWidth));
  });
  std::vector<std::string> saveOps(pipeline.saveOps.begin(), pipeline.saveOps.end());
  auto func = prepareKernelModule(*module, "core", Type(), /*training=*/true, saveOps);
  if (!func)
    return recordError(out, "chunked prepare", func.takeError(), diagnostics);
  // Each chunk from a random start, then the chunk repair kernel: the
  // chunks as one sequential scan of each neuron.
  HarnessOptions repaired = options;
  repaired.repair = false;
  module->walk([&](flexsn::ScanOp scan) {
    if (cast<func::FuncOp>(scan->getParentOp()).getSymName() == *func)
      repaired.repair = scan.getNumStates() > 0;
  });
  SmallVector<KernelCase> forward = {{*func, "inference"}, {*func, "final_state"},
                                     {*func, "forward"}};
  SmallVector<KernelCase> training = {{*func, "backward"}};
  if (SymbolTable::lookupSymbolIn(*module, (*func + "_forward_final"))) {
    forward.push_back({*func, "forward_final"});
    training.push_back({*func, "backward_final"});
  }
  if (runCases(*module, *func, forward, shape.T, chunkedNCL(shape), shape.seed, backends,
               repaired, "chunked ", diagnostics, out, os))
    runCases(*module, *func, training, shape.T, chunkedNCL(shape), shape.seed, backends,
             options, "chunked ", diagnostics, out, os);
}

Outcome runCore(const Core &core, const Shape &shape, bool cuda) {
  std::string text = Renderer(core).render();
  Outcome out;
  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  context.printOpOnDiagnostic(false);
  context.loadAllAvailableDialects();
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    if (d.getSeverity() == DiagnosticSeverity::Error && diagnostics.empty())
      diagnostics = d.str();
    return success();
  });
  auto errorOut = [&](const std::string &where, llvm::Error e) {
    recordError(out, where, std::move(e), diagnostics);
    return out;
  };
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
  if (!module) {
    out.status = Outcome::Error;
    out.variant = "parse";
    out.what = diagnostics;
    return out;
  }
  std::vector<std::string> saveOps(pipeline.saveOps.begin(),
                                   pipeline.saveOps.end());
  auto func = prepareKernelModule(*module, "core", Type(), /*training=*/true,
                                  saveOps);
  if (!func)
    return errorOut("differentiate", func.takeError());
  std::string notAffine = backwardNotAffine(*module);
  // every scan now: the primal, the training forwards and the backwards,
  // whose states (gradient carries) are all proven affine
  module->walk([&](flexsn::ScanOp scan) {
    if (notAffine.empty())
      notAffine = affineButNotSo(scan, shape.seed);
  });
  if (!notAffine.empty()) {
    out.status = Outcome::Error;
    out.variant = "affine-states";
    out.what = notAffine;
    return out;
  }
  std::string wrongTransfer;
  auto transfers = addTransfers(*module, shape.seed, wrongTransfer);
  if (failed(transfers) || !wrongTransfer.empty()) {
    out.status = Outcome::Error;
    out.variant = "affine-transfer";
    out.what = failed(transfers) ? diagnostics : wrongTransfer;
    return out;
  }
  HarnessOptions options;
  options.threads = 1;
  options.tieMargin = tieMargin(core);
  // Finite differences only where the body is smooth: a jump (remf,
  // floor, a comparison) or kink (max, abs) that a perturbation crosses
  // after a few chaotic steps is not a near tie of the unperturbed run.
  options.finiteDifferences = isSmooth(core);
  options.tolerance = tolerance(core);
  options.verbose = clVerbose;
  std::string log;
  llvm::raw_string_ostream os(log);
  std::vector<std::string> backends = {"cpu"};
  if (cuda)
    backends.push_back("cuda");
  SmallVector<KernelCase> cases;
  for (StringRef variant : {"inference", "final_state", "backward"})
    cases.push_back({*func, variant.str()});
  // The automatic saving policy's final-state pair, where it built one.
  if (SymbolTable::lookupSymbolIn(*module, (*func + "_forward_final")))
    cases.push_back({*func, "backward_final"});
  for (const std::string &name : *transfers)
    cases.push_back({name, "final_state"});
  if (runCases(*module, *func, cases, shape.T, shape.NCL, shape.seed, backends,
               options, "", diagnostics, out, os))
    runChunked(context, text, shape, backends, options, diagnostics, out, os);
  if (clVerbose)
    llvm::errs() << log;
  return out;
}

/// runCore, with crashes caught.
Outcome runCoreSafely(const Core &core, const Shape &shape, bool cuda) {
  Outcome out;
  llvm::CrashRecoveryContext crc;
  if (!crc.RunSafely([&] { out = runCore(core, shape, cuda); })) {
    out = Outcome();
    out.status = Outcome::Crash;
    out.what = "the process crashed (signal or abort)";
  }
  return out;
}

/// Drops outputs, states, params, inputs and ops while the core keeps
/// failing the same way.
Core minimize(Core core, const Shape &shape, Outcome::Status status,
              bool cuda) {
  auto fails = [&](const Core &c) {
    return runCoreSafely(c, shape, cuda).status == status;
  };
  // Replaces every use of value `from` by `to`, then renumbers values above
  // `from` (an argument or op result being removed).
  auto removeValue = [](Core &c, unsigned from, unsigned to) {
    auto fix = [&](unsigned &v) {
      if (v == from)
        v = to;
      if (v > from)
        --v;
    };
    for (GenOp &op : c.ops)
      for (unsigned &v : op.in)
        fix(v);
    for (unsigned &v : c.outputs)
      fix(v);
    for (unsigned &v : c.next)
      fix(v);
  };
  bool progress = true;
  while (progress) {
    progress = false;
    auto attempt = [&](Core candidate) {
      if (!fails(candidate))
        return false;
      core = std::move(candidate);
      progress = true;
      return true;
    };
    // Ops, last first: replace op i by its first operand.
    for (int i = int(core.ops.size()) - 1; i >= 0; --i) {
      if (i >= int(core.ops.size()))
        continue;
      Core c = core;
      unsigned v = c.numArgs() + i;
      unsigned to = c.ops[i].in[0];
      c.ops.erase(c.ops.begin() + i);
      removeValue(c, v, to);
      attempt(std::move(c));
    }
    for (int o = int(core.outputs.size()) - 1; o >= 0 && core.outputs.size() > 1;
         --o) {
      Core c = core;
      c.outputs.erase(c.outputs.begin() + o);
      c.outType.erase(c.outType.begin() + o);
      attempt(std::move(c));
    }
    // Params, states and inputs (values: inputs, states, params).
    for (int p = int(core.numPa) - 1; p >= 0; --p) {
      Core c = core;
      removeValue(c, c.numIn + c.numSt + p, 0);
      c.paType.erase(c.paType.begin() + p);
      c.paPerNeuron.erase(c.paPerNeuron.begin() + p);
      --c.numPa;
      attempt(std::move(c));
    }
    for (int s = int(core.numSt) - 1; s >= 0; --s) {
      Core c = core;
      removeValue(c, c.numIn + s, 0);
      c.stType.erase(c.stType.begin() + s);
      c.next.erase(c.next.begin() + s);
      c.squash.erase(c.squash.begin() + s);
      --c.numSt;
      attempt(std::move(c));
    }
    for (int k = int(core.numIn) - 1; k >= 0 && core.numIn > 1; --k) {
      Core c = core;
      removeValue(c, k, k == 0 ? 1 : 0);
      c.inType.erase(c.inType.begin() + k);
      --c.numIn;
      attempt(std::move(c));
    }
  }
  return core;
}

Shape shapeOf(std::mt19937_64 &rng) {
  // Small shapes: T = 0 and NCL = 1 included; NCL past a vector width and
  // a thread's neuron group so that tails are covered, and past one and
  // two of the CPU kernels' blocks of 256 neurons (kCPUBlockNeurons).
  static const int64_t kT[] = {0, 1, 2, 3, 5, 8};
  static const int64_t kNCL[] = {1, 3, 7, 16, 33, 67, 259, 600};
  std::uniform_int_distribution<int> t(0, 5), n(0, 7);
  return {kT[t(rng)], kNCL[n(rng)], rng()};
}

struct Totals {
  unsigned cores = 0, kernels = 0, mismatches = 0, errors = 0, crashes = 0,
           skipped = 0;
  int64_t maskedCores = 0;
};

/// Runs cores [first, last) and returns the totals; writes failing cores.
/// The pipeline flags a reproducer of `variant` on `backend` repeats: the
/// ones given to the fuzzer that apply there.
std::string pipelineFlags(StringRef backend, StringRef variant) {
  std::string flags;
  if (pipeline.prefetch)
    flags += " --prefetch=" + std::to_string(pipeline.prefetch);
  LaunchGeometry defaults;
  if (backend == "cuda") {
    if (pipeline.l2Prefetch != kDefaultL2Prefetch)
      flags += " --l2-prefetch=" + std::to_string(pipeline.l2Prefetch);
    if (pipeline.neuronsPerThread != defaults.neuronsPerThread)
      flags += " --neurons-per-thread=" +
               std::to_string(pipeline.neuronsPerThread);
    if (pipeline.blockSize != defaults.blockSize)
      flags += " --block-size=" + std::to_string(pipeline.blockSize);
  }
  if (!pipeline.saveOps.empty() &&
      (variant.starts_with("backward") || variant.starts_with("forward")))
    flags += " --save-ops=" + llvm::join(pipeline.saveOps, ",");
  return flags;
}

Totals runRange(unsigned first, unsigned last) {
  Totals totals;
  for (unsigned i = first; i < last; ++i) {
    // Core #i depends only on (seed, i).
    std::seed_seq seq{uint64_t(clSeed) & 0xffffffffu, uint64_t(clSeed) >> 32,
                      uint64_t(i)};
    std::mt19937_64 rng(seq);
    Core core = Generator(rng()).generate();
    Shape shape = shapeOf(rng);
    if (clVerbose)
      llvm::errs() << "core #" << i << " T=" << shape.T << " NCL=" << shape.NCL
                   << "\n" << Renderer(core).render();
    Outcome o = runCoreSafely(core, shape, clCuda);
    ++totals.cores;
    totals.kernels += o.kernels;
    totals.skipped += o.skipped;
    totals.maskedCores += o.masked > 0;
    if (o.status == Outcome::Ok)
      continue;
    (o.status == Outcome::Mismatch ? totals.mismatches
     : o.status == Outcome::Error  ? totals.errors
                                   : totals.crashes)++;
    if (!clNoMinimize)
      core = minimize(core, shape, o.status, clCuda);
    std::string small = Renderer(core).render();
    llvm::SmallString<128> path(clOut);
    llvm::sys::path::append(path, llvm::formatv("flexsn-fuzz-{0}-{1}.mlir",
                                                uint64_t(clSeed), i)
                                      .str());
    std::error_code ec;
    llvm::raw_fd_ostream file(path, ec);
    const char *kinds[] = {"ok", "mismatch", "error", "crash"};
    std::string variant = o.variant == "backward" || o.variant == "inference" ||
                                  o.variant == "final_state" ||
                                  o.variant == "backward_final"
                              ? o.variant
                              : "backward";
    // A transfer kernel's mismatch ("core_backward_transfer final_state")
    // reruns as flexsn-run --transfer=backward --variant=final_state.
    std::string transfer, flagsFor = variant;
    int64_t ncl = shape.NCL;
    // A chunked run's ("chunked inference"): flexsn-run --chunk-width, and
    // --repair where its core has states.
    std::string chunked;
    if (StringRef(o.variant).starts_with("chunked ")) {
      variant = StringRef(o.variant).drop_front(strlen("chunked ")).str();
      if (variant != "inference" && variant != "final_state" && variant != "forward" &&
          variant != "forward_final" && variant != "backward_final")
        variant = "backward";
      bool repair = core.numSt && !StringRef(variant).starts_with("backward");
      chunked = " --chunk-width=" + std::to_string(kChunkWidth) +
                (repair ? " --repair" : "");
      ncl = chunkedNCL(shape);
      flagsFor = variant;
    }
    auto [kernel, kernelVariant] = StringRef(o.variant).split(' ');
    if (chunked.empty() && !kernelVariant.empty() && kernel.consume_front("core") &&
        kernel.consume_back("_transfer")) {
      transfer = kernel.empty() ? "primal" : kernel.drop_front().str();
      variant = kernelVariant.str();
      flagsFor = transfer == "primal" ? "inference" : "backward";
    }
    if (!ec) {
      file << "// flexsn-fuzz --seed=" << uint64_t(clSeed) << " --first=" << i
           << " --count=1: " << kinds[o.status] << " in " << o.variant
           << " on " << o.backend << "\n// "
           << llvm::join(llvm::split(StringRef(o.what).rtrim(), '\n'), "\n// ")
           << "\n"
           << "// RUN: flexsn-run %s --backend=" << o.backend
           << (transfer.empty() ? "" : " --transfer=" + transfer)
           << " --variant=" << variant << chunked << " --T=" << shape.T
           << " --ncl=" << ncl << " --seed=" << shape.seed
           << " --tie-margin=" << tieMargin(core)
           << " --tolerance=" << tolerance(core)
           << (isSmooth(core) ? "" : " --finite-differences=false")
           << pipelineFlags(o.backend, flagsFor)
           << " --check\n"
           << small;
    }
    llvm::errs() << "flexsn-fuzz: core #" << i << ": " << kinds[o.status]
                 << " in " << o.variant << " on " << o.backend << ": "
                 << o.what << "\n  written to " << path
                 << (ec ? " (FAILED: " + ec.message() + ")" : "") << "\n";
  }
  return totals;
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  pipeline.addToCommandLine(fuzzCategory,
                            {"prefetch", "l2-prefetch", "neurons-per-thread",
                             "block-size", "save-ops"});
  cl::HideUnrelatedOptions(fuzzCategory);
  cl::ParseCommandLineOptions(argc, argv, "flexsn differential fuzzer\n");
  llvm::CrashRecoveryContext::Enable();
  if (std::error_code ec = llvm::sys::fs::create_directories(clOut)) {
    llvm::errs() << "flexsn-fuzz: error: cannot create '" << clOut
                 << "': " << ec.message() << "\n";
    return 2;
  }
  // The options of every core's compilation, checked once.
  pipeline.differentiate = true;
  if (std::string error = pipeline.validate(); !error.empty()) {
    llvm::errs() << "flexsn-fuzz: --" << error << "\n";
    return 2;
  }
  if (clJobs == 0)
    clJobs = 1;
  auto start = std::chrono::steady_clock::now();
  unsigned first = clFirst, last = clFirst + clCount;
  Totals totals;
  if (clJobs == 1) {
    totals = runRange(first, last);
  } else {
    // Worker processes over interleaved blocks of the range; each sends its
    // totals back through a pipe.
    std::vector<std::pair<pid_t, int>> workers;
    unsigned per = (clCount + clJobs - 1) / clJobs;
    for (unsigned j = 0; j < clJobs; ++j) {
      unsigned lo = first + j * per, hi = std::min(last, lo + per);
      if (lo >= hi)
        break;
      int fds[2];
      if (pipe(fds) != 0) {
        llvm::errs() << "flexsn-fuzz: error: pipe failed\n";
        return 2;
      }
      pid_t pid = fork();
      if (pid == 0) {
        close(fds[0]);
        Totals t = runRange(lo, hi);
        (void)!write(fds[1], &t, sizeof(t));
        _exit(0);
      }
      close(fds[1]);
      workers.push_back({pid, fds[0]});
    }
    for (auto [pid, fd] : workers) {
      Totals t;
      ssize_t n = read(fd, &t, sizeof(t));
      close(fd);
      int status = 0;
      waitpid(pid, &status, 0);
      if (n != ssize_t(sizeof(t))) {
        llvm::errs() << "flexsn-fuzz: a worker died without reporting\n";
        ++totals.crashes;
        continue;
      }
      totals.cores += t.cores;
      totals.kernels += t.kernels;
      totals.mismatches += t.mismatches;
      totals.errors += t.errors;
      totals.crashes += t.crashes;
      totals.skipped += t.skipped;
      totals.maskedCores += t.maskedCores;
    }
  }
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  bool ok = !totals.mismatches && !totals.errors && !totals.crashes;
  llvm::outs() << llvm::formatv(
      "flexsn-fuzz: {0} cores (seed {1}, #{2}-#{3}{4}), {5} kernels run, "
      "{6} mismatches, {7} errors, {8} crashes; {9} cores with near-tie "
      "neurons left out, {10} scalar sums skipped; {11:F1} s: {12}\n",
      totals.cores, uint64_t(clSeed), first, last - 1,
      clCuda ? ", cpu+cuda" : ", cpu", totals.kernels, totals.mismatches,
      totals.errors, totals.crashes, totals.maskedCores, totals.skipped,
      seconds, ok ? "ok" : "FAIL");
  return ok ? 0 : 1;
}
