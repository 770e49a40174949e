//===- Manifest.cpp - The kernel manifest ---------------------------------===//

#include "flexsn/Target/Manifest.h"

#include "flexsn/Conversion/Passes.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace mlir::flexsn;

static std::string typeName(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  type.print(os);
  return s;
}

unsigned ManifestKernel::getNumPointers() const {
  return llvm::count_if(args, [](const ManifestArg &a) { return a.isPointer; });
}

const ManifestKernel *Manifest::lookup(StringRef name) const {
  for (const ManifestKernel &k : kernels)
    if (k.name == name)
      return &k;
  return nullptr;
}

/// Whether each operand of `scan` (inputs, initial states, params) wants a
/// gradient: a function argument without flexsn.no_grad.
static SmallVector<bool> requiresGradOf(ScanOp scan) {
  auto func = cast<func::FuncOp>(scan->getParentOp());
  SmallVector<bool> mask;
  auto wants = [&](Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg && arg.getOwner()->getParentOp() == func.getOperation() &&
           !func.getArgAttr(arg.getArgNumber(), kNoGradAttr);
  };
  for (Value v : scan.getInputs())
    mask.push_back(wants(v));
  for (Value v : scan.getInitStates())
    mask.push_back(wants(v));
  for (Value v : scan.getParams())
    mask.push_back(wants(v));
  return mask;
}

FailureOr<Manifest> mlir::flexsn::buildManifest(ModuleOp module,
                                                ManifestTarget target,
                                                const PipelineOptions &options) {
  if (target == ManifestTarget::CUDA)
    if (std::string error = options.validate(); !error.empty())
      return module.emitError(error);
  // The kernels are built after canonicalization: describe them from the
  // same canonical form.
  OwningOpRef<ModuleOp> canonical = module.clone();
  PassManager pm(module.getContext());
  pm.addPass(createCanonicalizerPass());
  if (failed(pm.run(*canonical)))
    return failure();
  SmallVector<ScanOp> scans;
  if (failed(collectKernelScans(
          *canonical, target == ManifestTarget::CUDA ? "GPU" : "CPU", scans)))
    return failure();
  Manifest manifest;
  manifest.target = target;
  if (target == ManifestTarget::CUDA)
    manifest.chip = options.chip;
  SymbolTable symbols(*canonical);
  for (ScanOp scan : scans) {
    auto func = cast<func::FuncOp>(scan->getParentOp());
    auto primal = func->getAttrOfType<FlatSymbolRefAttr>(kPrimalAttr);
    // The gradients wanted are the primal's: its arguments carry no_grad.
    ScanOp primalScan = scan;
    if (primal)
      if (auto f = symbols.lookup<func::FuncOp>(primal.getValue()))
        f.walk([&](ScanOp s) { primalScan = s; });
    for (const KernelSpec &spec : getKernelSpecs(scan)) {
      ManifestKernel &k = manifest.kernels.emplace_back();
      k.name = spec.name;
      k.source = func.getSymName().str();
      if (primal)
        k.primal = primal.getValue().str();
      k.variant = spec.kind;
      k.reverse = scan.getReverse();
      k.computeType = typeName(scan.getComputeType());
      k.numInputs = scan.getNumInputs();
      k.numStates = scan.getNumStates();
      k.numOutputs = scan.getNumOutputs();
      k.numParams = scan.getNumParams();
      k.requiresGrad = requiresGradOf(primalScan);
      if (target == ManifestTarget::CUDA) {
        k.geometry = options.getLaunchGeometry();
        if (k.geometry->neuronsPerThread > 1)
          k.scalarEntry = getScalarEntryName(k.name);
        k.deepPrefetch = getDeepEntryPrefetch(scan, spec.variant, options.prefetch);
        if (k.deepPrefetch)
          k.deepEntry = getDeepEntryName(k.name);
      }
      for (const KernelArg &arg :
           getKernelABI(scan, spec.variant, /*cpu=*/false)) {
        ManifestArg &a = k.args.emplace_back();
        a.role = arg.role;
        a.index = arg.index;
        a.isPointer = arg.isPointer();
        a.dtype = typeName(arg.type);
        a.elementBytes = arg.type.getIntOrFloatBitWidth() / 8;
        if (!a.isPointer)
          continue;
        a.shape = getArgShape(arg.role);
        ArgDescription m = describeKernelArg(scan, arg);
        a.meaning = m.meaning;
        a.meaningIndex = m.index;
        a.accumulate = arg.role == KernelArgRole::SumState;
        a.optional = isOptionalKernelArg(scan, arg);
      }
      if (hasChunkRepair(scan, spec.variant)) {
        // Its chunk repair kernel: the same arguments (on a GPU, one
        // neuron a thread).
        ManifestKernel repair = k;
        repair.name = getRepairKernelName(k.name);
        repair.repairs = k.name;
        if (repair.geometry)
          repair.geometry->neuronsPerThread = 1;
        repair.scalarEntry.clear();
        repair.deepEntry.clear();
        repair.deepPrefetch = 0;
        manifest.kernels.push_back(std::move(repair));
      }
    }
  }
  return manifest;
}

void mlir::flexsn::printManifest(const Manifest &manifest,
                                 llvm::raw_ostream &os) {
  bool cuda = manifest.target == ManifestTarget::CUDA;
  llvm::json::OStream j(os, 2);
  j.object([&] {
    j.attribute("format", "flexsn-manifest");
    j.attribute("version", 4);
    j.attribute("target", cuda ? "cuda" : "cpu");
    if (cuda)
      j.attribute("chip", manifest.chip);
    j.attributeArray("kernels", [&] {
      for (const ManifestKernel &k : manifest.kernels) {
        j.object([&] {
          j.attribute("name", k.name);
          j.attribute("source", k.source);
          if (!k.primal.empty())
            j.attribute("primal", k.primal);
          j.attribute("variant", k.variant);
          if (!k.repairs.empty())
            j.attribute("repairs", k.repairs);
          j.attribute("reverse", k.reverse);
          j.attribute("compute_type", k.computeType);
          j.attribute("num_inputs", k.numInputs);
          j.attribute("num_states", k.numStates);
          j.attribute("num_outputs", k.numOutputs);
          j.attribute("num_params", k.numParams);
          j.attribute("num_pointers", k.getNumPointers());
          // Over the primal's inputs, initial states and params.
          j.attributeArray("requires_grad", [&] {
            for (bool r : k.requiresGrad)
              j.value(r);
          });
          if (k.geometry) {
            // block_size is the largest block; the launch (libFlexSN's
            // cuda::chooseScanBlockSize) may take a smaller one.
            j.attribute("block_size", k.geometry->blockSize);
            j.attribute("neurons_per_thread", k.geometry->neuronsPerThread);
            if (!k.scalarEntry.empty()) {
              j.attribute("scalar_entry", k.scalarEntry);
              j.attribute("entry",
                          "`name` (neurons_per_thread per thread) when NCL "
                          "is a multiple of neurons_per_thread, every [T, "
                          "NCL] or [NCL] pointer is aligned to "
                          "neurons_per_thread elements and ceil(NCL / "
                          "neurons_per_thread) is at least 256 per SM; else "
                          "`scalar_entry` (one neuron per thread)");
            }
            if (!k.deepEntry.empty()) {
              j.attribute("deep_entry", k.deepEntry);
              j.attribute("deep_prefetch", k.deepPrefetch);
              j.attribute("deep",
                          "`deep_entry` (one neuron per thread, "
                          "deep_prefetch steps of reads in flight) before "
                          "the others when NCL is at most 512 per SM and T "
                          "is at least 4 x deep_prefetch");
            }
            j.attribute("threads",
                        "ceil(NCL / neurons per thread of the entry)");
            j.attribute("block",
                        "one of block_size halved down to 32: of those whose "
                        "grid runs in the fewest waves (the entry's blocks "
                        "per SM, from the driver's occupancy), the largest "
                        "giving 2 blocks per SM, else the smallest");
            j.attribute("grid", "ceil(threads / block)");
          }
          // In launch order; `meaning` says what each pointer holds (for a
          // backward: which forward tensor or gradient it reads); `shape`
          // and `bytes` how large its buffer is.
          j.attributeArray("args", [&] {
            for (const ManifestArg &a : k.args) {
              j.object([&] {
                j.attribute("role", stringifyKernelArgRole(a.role));
                j.attribute("index", a.index);
                j.attribute("kind", a.isPointer ? "ptr" : "i64");
                j.attribute("dtype", a.dtype);
                if (!a.isPointer)
                  return;
                j.attribute("meaning", stringifyArgMeaning(a.meaning));
                j.attribute("meaning_index", a.meaningIndex);
                j.attribute("shape", stringifyArgShape(a.shape));
                std::string elems = a.shape == ArgShape::Sequence ? "T * NCL * "
                                    : a.shape == ArgShape::PerNeuron ? "NCL * "
                                                                     : "";
                j.attribute("bytes", elems + std::to_string(a.elementBytes));
                if (a.accumulate)
                  j.attribute("accumulate", true);
                if (a.optional)
                  j.attribute("optional", true);
              });
            }
          });
        });
      }
    });
  });
  os << "\n";
}

llvm::Expected<Manifest> mlir::flexsn::parseManifest(StringRef json) {
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(json);
  if (!value)
    return llvm::createStringError("the manifest is not JSON: " +
                                   llvm::toString(value.takeError()));
  auto fail = [](const Twine &what) {
    return llvm::createStringError("malformed manifest: " + what);
  };
  const llvm::json::Object *root = value->getAsObject();
  if (!root || root->getString("format") != "flexsn-manifest")
    return fail("no \"format\": \"flexsn-manifest\"");
  if (root->getInteger("version") != 4)
    return fail("version is not 4");
  std::optional<StringRef> target = root->getString("target");
  if (!target || (*target != "cpu" && *target != "cuda"))
    return fail("target is neither cpu nor cuda");
  Manifest manifest;
  manifest.target =
      *target == "cuda" ? ManifestTarget::CUDA : ManifestTarget::CPU;
  if (manifest.target == ManifestTarget::CUDA) {
    std::optional<StringRef> chip = root->getString("chip");
    if (!chip)
      return fail("a cuda manifest without chip");
    manifest.chip = chip->str();
  }
  const llvm::json::Array *list = root->getArray("kernels");
  if (!list)
    return fail("no kernels");
  for (const llvm::json::Value &kv : *list) {
    const llvm::json::Object *ko = kv.getAsObject();
    std::optional<StringRef> name = ko ? ko->getString("name") : std::nullopt;
    const llvm::json::Array *args = ko ? ko->getArray("args") : nullptr;
    if (!name || !args)
      return fail("a kernel without name or args");
    ManifestKernel &k = manifest.kernels.emplace_back();
    k.name = name->str();
    k.source = ko->getString("source").value_or("").str();
    k.primal = ko->getString("primal").value_or("").str();
    k.variant = ko->getString("variant").value_or("").str();
    k.repairs = ko->getString("repairs").value_or("").str();
    k.computeType = ko->getString("compute_type").value_or("").str();
    k.reverse = ko->getBoolean("reverse").value_or(false);
    k.numInputs = ko->getInteger("num_inputs").value_or(0);
    k.numStates = ko->getInteger("num_states").value_or(0);
    k.numOutputs = ko->getInteger("num_outputs").value_or(0);
    k.numParams = ko->getInteger("num_params").value_or(0);
    if (const llvm::json::Array *mask = ko->getArray("requires_grad"))
      for (const llvm::json::Value &r : *mask)
        k.requiresGrad.push_back(r.getAsBoolean().value_or(false));
    if (manifest.target == ManifestTarget::CUDA) {
      std::optional<int64_t> block = ko->getInteger("block_size");
      std::optional<int64_t> npt = ko->getInteger("neurons_per_thread");
      if (!block || !npt || *block <= 0 || *block > 1024 || *npt <= 0 ||
          *npt > 8)
        return fail("kernel '" + k.name + "' without its launch geometry");
      k.geometry = LaunchGeometry{static_cast<unsigned>(*block),
                                  static_cast<unsigned>(*npt)};
      k.scalarEntry = ko->getString("scalar_entry").value_or("").str();
      if ((*npt > 1) == k.scalarEntry.empty())
        return fail("kernel '" + k.name + "' at " + llvm::Twine(*npt) +
                    " neurons per thread " +
                    (*npt > 1 ? "without" : "with") + " a scalar_entry");
      k.deepEntry = ko->getString("deep_entry").value_or("").str();
      std::optional<int64_t> deep = ko->getInteger("deep_prefetch");
      if (k.deepEntry.empty() != !deep)
        return fail("kernel '" + k.name +
                    "': deep_entry and deep_prefetch "
                    "come together");
      if (deep && (*deep < 1 || *deep > kMaxPrefetchDepth))
        return fail("kernel '" + k.name + "': deep_prefetch " +
                    llvm::Twine(*deep) + " is not 1 to " +
                    llvm::Twine(kMaxPrefetchDepth));
      k.deepPrefetch = deep ? unsigned(*deep) : 0;
    }
    for (const llvm::json::Value &av : *args) {
      const llvm::json::Object *ao = av.getAsObject();
      if (!ao)
        return fail("an argument of '" + k.name + "' is not an object");
      ManifestArg &a = k.args.emplace_back();
      std::optional<KernelArgRole> role =
          symbolizeKernelArgRole(ao->getString("role").value_or(""));
      if (!role)
        return fail("an argument of '" + k.name + "' without a known role");
      a.role = *role;
      a.index = ao->getInteger("index").value_or(0);
      a.isPointer = ao->getString("kind") == "ptr";
      a.dtype = ao->getString("dtype").value_or("").str();
      if (!a.isPointer)
        continue;
      a.elementBytes = a.dtype == "f64" ? 8 : a.dtype == "f32" ? 4
                       : (a.dtype == "f16" || a.dtype == "bf16") ? 2 : 0;
      if (!a.elementBytes)
        return fail("pointer of '" + k.name + "' with dtype '" + a.dtype + "'");
      std::optional<StringRef> shape = ao->getString("shape");
      if (shape == stringifyArgShape(ArgShape::Sequence))
        a.shape = ArgShape::Sequence;
      else if (shape == stringifyArgShape(ArgShape::PerNeuron))
        a.shape = ArgShape::PerNeuron;
      else if (shape == stringifyArgShape(ArgShape::Scalar))
        a.shape = ArgShape::Scalar;
      else
        return fail("pointer of '" + k.name + "' without a known shape");
      std::optional<ArgMeaning> meaning =
          symbolizeArgMeaning(ao->getString("meaning").value_or(""));
      if (!meaning)
        return fail("pointer of '" + k.name + "' without a known meaning");
      a.meaning = *meaning;
      a.meaningIndex = ao->getInteger("meaning_index").value_or(0);
      a.accumulate = ao->getBoolean("accumulate").value_or(false);
      a.optional = ao->getBoolean("optional").value_or(false);
    }
  }
  return manifest;
}
