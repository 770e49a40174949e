//===- Preparation.cpp - A kernel module as the harness runs it -------------===//

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

//===----------------------------------------------------------------------===//
// Preparation
//===----------------------------------------------------------------------===//

/// Rewrites the storage element type of every tensor of `func` (arguments,
/// the scan's results, the function's results) to `storage`.
void harness::setStorageType(func::FuncOp func, ScanOp scan, Type storage) {
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

ScanOp harness::scanOf(ModuleOp module, StringRef funcName) {
  auto func = module.lookupSymbol<func::FuncOp>(funcName);
  ScanOp scan;
  if (func)
    func.walk([&](ScanOp s) { scan = s; });
  return scan;
}

Expected<std::string>
mlir::flexsn::prepareKernelModule(ModuleOp module, StringRef funcName,
                                  Type storage, bool training,
                                  ArrayRef<std::string> saveOps) {
  // Kernel ABIs are read after canonicalization, as every pipeline sees them.
  PassManager canon(module.getContext());
  canon.addPass(createCanonicalizerPass());
  if (failed(canon.run(module)))
    return makeDiagnosedError();
  SmallVector<ScanOp> scans;
  if (failed(collectKernelScans(module, "CPU", scans)))
    return makeDiagnosedError();
  ScanOp scan;
  for (ScanOp s : scans) {
    auto f = cast<func::FuncOp>(s->getParentOp());
    if (funcName.empty() || f.getSymName() == funcName) {
      if (scan && funcName.empty())
        return makeError("the module has several kernel functions; pick one "
                         "with --func");
      scan = s;
    }
  }
  if (!scan)
    return makeError(funcName.empty()
                         ? Twine("the module has no flexsn.scan kernel")
                         : "no kernel function named '" + funcName + "'");
  auto func = cast<func::FuncOp>(scan->getParentOp());
  std::string name = func.getSymName().str();
  for (auto other : llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
    if (other != func)
      other.erase();
  if (storage) {
    setStorageType(func, scan, storage);
    if (failed(verify(module)))
      return makeDiagnosedError();
  }
  if (training && failed(differentiateModule(module, saveOps)))
    return makeDiagnosedError();
  return name;
}

Error mlir::flexsn::checkHostMemory(ModuleOp module, StringRef kind, int64_t T,
                                    int64_t NCL) {
  // The largest kernel's buffers, or the forward's and the backward's
  // together for a backward run.
  double largest = 0, training = 0;
  for (func::FuncOp f : module.getOps<func::FuncOp>())
    f.walk([&](ScanOp s) {
      for (const KernelSpec &k : getKernelSpecs(s)) {
        double bytes = 0;
        for (const KernelArg &a : getKernelABI(s, k.variant, /*cpu=*/true))
          if (a.isPointer())
            bytes += double(getElementCount(a.role, T, NCL)) *
                     storageBytes(a.type);
        largest = std::max(largest, bytes);
        if (k.kind == "forward" || k.kind == "backward")
          training += bytes;
      }
    });
  double need = kind.starts_with("backward") ? training : largest;
  double have = double(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  if (need > have)
    return makeError(llvm::formatv("T={0} NCL={1} needs about {2:F1} GB of "
                                   "host buffers; this machine has {3:F1} GB",
                                   T, NCL, need / 1e9, have / 1e9)
                         .str());
  return Error::success();
}
