//===- runtime-test.cpp - Drives the PTX text edits for lit --------------===//
//
// flexsn-runtime-test extract FILE ENTRY  prints FILE's module for ENTRY
// flexsn-runtime-test merge FILE...       prints the FILEs merged into one
// Exits 1 with "none" on stderr where the edit gives no result.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Runtime/CUDA/CUDARuntime.h"
#include "flexsn/Runtime/CUDA/PTXText.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

using namespace mlir::flexsn::cuda;

static bool read(const char *path, std::string &text) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer) {
    llvm::errs() << "cannot read " << path << "\n";
    return false;
  }
  text = (*buffer)->getBuffer().str();
  return true;
}

int main(int argc, char **argv) {
  if (argc < 3)
    return 2;
  std::string mode = argv[1];
  std::optional<std::string> out;
  if (mode == "extract" && argc == 4) {
    std::string text;
    if (!read(argv[2], text))
      return 2;
    out = extractPTXEntry(text, argv[3]);
  } else if (mode == "block" && argc >= 5) {
    std::vector<unsigned> resident;
    for (int i = 5; i < argc; ++i)
      resident.push_back(unsigned(std::stoul(argv[i])));
    llvm::outs() << chooseScanBlockSize(std::stoull(argv[2]),
                                        unsigned(std::stoul(argv[3])),
                                        unsigned(std::stoul(argv[4])),
                                        resident)
                 << "\n";
    return 0;
  } else if (mode == "merge") {
    std::vector<std::string> modules(argc - 2);
    for (int i = 2; i < argc; ++i)
      if (!read(argv[i], modules[i - 2]))
        return 2;
    out = mergePTXModules(modules);
  } else {
    return 2;
  }
  if (!out) {
    llvm::errs() << "none\n";
    return 1;
  }
  llvm::outs() << *out;
  return 0;
}
