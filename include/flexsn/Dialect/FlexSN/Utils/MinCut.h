//===- MinCut.h - Minimum s-t cut of a small directed graph -----*- C++ -*-===//
//
// The graph algorithm behind flexsn-differentiate's automatic saving policy
// (what a backward reads is the cheapest cut of the step's dataflow), kept
// apart from the IR so that it is tested on graphs of its own
// (test/Dialect/FlexSN/Utils).
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_DIALECT_FLEXSN_UTILS_MINCUT_H
#define FLEXSN_DIALECT_FLEXSN_UTILS_MINCUT_H

#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <optional>

namespace mlir {
namespace flexsn {

/// A directed graph with integer edge capacities, and its minimum s-t cut
/// by shortest augmenting paths (Edmonds-Karp, O(V E^2): a step's dataflow
/// has a few hundred nodes). After `solve`, a node is on the source side
/// when the residual graph reaches it from the source: of the minimum cuts,
/// the one nearest the source, whichever maximum flow was found.
class MinCut {
public:
  /// A capacity no cut pays: an edge that must not be cut.
  static constexpr int64_t kInfinite = int64_t(1) << 40;

  explicit MinCut(unsigned numNodes) : graph(numNodes) {}

  unsigned getNumNodes() const { return graph.size(); }

  /// An edge `from` -> `to` of `capacity` (>= 0; kInfinite: uncuttable).
  void addEdge(unsigned from, unsigned to, int64_t capacity);

  /// Pushes a maximum flow from `source` to `sink`; returns its value, the
  /// minimum cut's cost, or nothing when a path of uncuttable edges joins
  /// them (no finite cut).
  std::optional<int64_t> solve(unsigned source, unsigned sink);

  /// After solve: whether `node` is on the source side of the cut.
  bool onSourceSide(unsigned node) const { return reached[node]; }

  /// The summed capacity, as added, of the edges `from` -> `to`.
  int64_t getCapacity(unsigned from, unsigned to) const;

private:
  struct Edge {
    unsigned to;
    int64_t residual;
    unsigned reverse; // the index of the reverse edge in graph[to]
    bool added;       // added by addEdge (not a reverse edge)
  };
  /// Breadth-first search of the residual graph from `source`, recording
  /// in `parent` how each node was reached; whether it reached `sink`.
  bool search(unsigned source, unsigned sink);

  llvm::SmallVector<llvm::SmallVector<Edge>> graph;
  llvm::SmallVector<std::pair<unsigned, unsigned>> parent;
  llvm::SmallVector<bool> reached;
};

} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_DIALECT_FLEXSN_UTILS_MINCUT_H
