//===- Buffers.cpp - The harness's host buffers and errors ------------------===//

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

char DiagnosedError::ID = 0;
void DiagnosedError::log(llvm::raw_ostream &os) const {
  os << "(reported as a diagnostic)";
}
std::error_code DiagnosedError::convertToErrorCode() const {
  return llvm::inconvertibleErrorCode();
}
Error mlir::flexsn::makeDiagnosedError() {
  return llvm::make_error<DiagnosedError>();
}

Error harness::makeError(const Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

unsigned HostBuffer::width() const { return storageBytes(arg.type); }
double HostBuffer::at(int64_t i) const {
  return decodeStorage(bytes.data() + i * width(), arg.type);
}
std::vector<double> HostBuffer::decoded() const {
  std::vector<double> out(count);
  for (int64_t i = 0; i < count; ++i)
    out[i] = at(i);
  return out;
}
void HostBuffer::fill(std::mt19937_64 &rng, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < count; ++i)
    encodeStorage(dist(rng), arg.type, bytes.data() + i * width());
}

/// Buffers for every pointer argument: results poisoned with NaN (sums are
/// zeroed before each run: the kernel adds to them), operands zero.
std::vector<HostBuffer> harness::makeBuffers(ArrayRef<KernelArg> abi, int64_t T,
                                           int64_t NCL) {
  std::vector<HostBuffer> buffers;
  for (const KernelArg &arg : abi) {
    if (!arg.isPointer())
      continue;
    HostBuffer buf{arg, getElementCount(arg.role, T, NCL), {}};
    buf.bytes.assign(std::max<int64_t>(buf.count * buf.width(), 1), 0);
    if (isResultRole(arg.role) && arg.role != KernelArgRole::SumState)
      std::memset(buf.bytes.data(), 0xFF, buf.bytes.size()); // NaN
    buffers.push_back(std::move(buf));
  }
  return buffers;
}

/// Random operands: inputs in [-1, 3), states in [-0.5, 0.5), params and
/// gradients in [-1, 1).
void harness::fillOperand(HostBuffer &buf, ArgMeaning meaning,
                        std::mt19937_64 &rng) {
  if (meaning == ArgMeaning::Input)
    buf.fill(rng, -1.0, 3.0);
  else if (meaning == ArgMeaning::InitState)
    buf.fill(rng, -0.5, 0.5);
  else
    buf.fill(rng, -1.0, 1.0);
}

void harness::zeroSums(std::vector<HostBuffer> &buffers) {
  for (HostBuffer &b : buffers)
    if (b.arg.role == KernelArgRole::SumState)
      std::memset(b.bytes.data(), 0, b.bytes.size());
}

int64_t harness::totalBytes(const std::vector<HostBuffer> &buffers) {
  int64_t bytes = 0;
  for (const HostBuffer &b : buffers)
    bytes += b.count * b.width();
  return bytes;
}

double harness::median(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}
