//===- min-cut-test.cpp - flexsn::MinCut on graphs given as text ----------===//
//
// Reads graphs from a file, separated by lines "---":
//   nodes N
//   edge FROM TO CAPACITY        (CAPACITY an integer, or "inf")
//   solve SOURCE SINK
//   capacity FROM TO             (after solve)
// and prints, per graph, the cut's cost (or "no finite cut") with the
// source side's nodes, and each capacity asked.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/Utils/MinCut.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <optional>

using mlir::flexsn::MinCut;

int main(int argc, char **argv) {
  if (argc != 2) {
    llvm::errs() << "usage: flexsn-mincut-test FILE\n";
    return 2;
  }
  auto file = llvm::MemoryBuffer::getFile(argv[1]);
  if (!file) {
    llvm::errs() << "cannot read " << argv[1] << "\n";
    return 2;
  }
  std::unique_ptr<MinCut> graph;
  llvm::SmallVector<llvm::StringRef> lines;
  (*file)->getBuffer().split(lines, '\n');
  unsigned lineNo = 0;
  auto fail = [&](llvm::StringRef what) {
    llvm::errs() << argv[1] << ":" << lineNo << ": " << what << "\n";
    return 1;
  };
  for (llvm::StringRef line : lines) {
    ++lineNo;
    line = line.trim();
    if (line.empty() || line.starts_with("#") || line.starts_with("//"))
      continue;
    llvm::SmallVector<llvm::StringRef> w;
    llvm::SplitString(line, w);
    auto num = [&](llvm::StringRef s) -> std::optional<int64_t> {
      if (s == "inf")
        return MinCut::kInfinite;
      int64_t v;
      if (s.getAsInteger(10, v))
        return std::nullopt;
      return v;
    };
    if (w[0] == "---") {
      graph.reset();
      llvm::outs() << "---\n";
    } else if (w[0] == "nodes" && w.size() == 2 && num(w[1])) {
      graph = std::make_unique<MinCut>(*num(w[1]));
    } else if (!graph) {
      return fail("a graph starts with 'nodes N'");
    } else if (w[0] == "edge" && w.size() == 4 && num(w[1]) && num(w[2]) &&
               num(w[3])) {
      graph->addEdge(*num(w[1]), *num(w[2]), *num(w[3]));
    } else if (w[0] == "solve" && w.size() == 3 && num(w[1]) && num(w[2])) {
      std::optional<int64_t> cost = graph->solve(*num(w[1]), *num(w[2]));
      if (!cost) {
        llvm::outs() << "no finite cut\n";
        continue;
      }
      llvm::outs() << "cost " << *cost << "\nsource side:";
      for (unsigned v = 0; v < graph->getNumNodes(); ++v)
        if (graph->onSourceSide(v))
          llvm::outs() << " " << v;
      llvm::outs() << "\n";
    } else if (w[0] == "capacity" && w.size() == 3 && num(w[1]) && num(w[2])) {
      llvm::outs() << "capacity " << w[1] << " " << w[2] << " = "
                   << graph->getCapacity(*num(w[1]), *num(w[2])) << "\n";
    } else {
      return fail("cannot read '" + line.str() + "'");
    }
  }
  return 0;
}
