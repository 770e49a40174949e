//===- MinCut.cpp - Minimum s-t cut of a small directed graph -------------===//

#include "flexsn/Dialect/FlexSN/Utils/MinCut.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cassert>

using namespace mlir::flexsn;

void MinCut::addEdge(unsigned from, unsigned to, int64_t capacity) {
  assert(from < graph.size() && to < graph.size() && capacity >= 0 &&
         "edge out of range");
  unsigned forward = graph[from].size();
  unsigned backward = graph[to].size() + (from == to ? 1 : 0);
  graph[from].push_back({to, capacity, backward, true});
  graph[to].push_back({from, 0, forward, false});
}

bool MinCut::search(unsigned source, unsigned sink) {
  reached.assign(graph.size(), false);
  parent.resize(graph.size());
  llvm::SmallVector<unsigned> queue{source};
  reached[source] = true;
  for (unsigned head = 0; head < queue.size(); ++head) {
    unsigned node = queue[head];
    for (auto [k, e] : llvm::enumerate(graph[node]))
      if (e.residual > 0 && !reached[e.to]) {
        reached[e.to] = true;
        parent[e.to] = {node, static_cast<unsigned>(k)};
        queue.push_back(e.to);
      }
  }
  return reached[sink];
}

std::optional<int64_t> MinCut::solve(unsigned source, unsigned sink) {
  assert(source < graph.size() && sink < graph.size() && source != sink &&
         "bad source or sink");
  int64_t flow = 0;
  while (search(source, sink)) {
    int64_t push = kInfinite;
    for (unsigned v = sink; v != source; v = parent[v].first)
      push = std::min(push, graph[parent[v].first][parent[v].second].residual);
    if (push >= kInfinite)
      return std::nullopt;
    for (unsigned v = sink; v != source; v = parent[v].first) {
      Edge &e = graph[parent[v].first][parent[v].second];
      e.residual -= push;
      graph[e.to][e.reverse].residual += push;
    }
    flow += push;
  }
  return flow;
}

int64_t MinCut::getCapacity(unsigned from, unsigned to) const {
  int64_t sum = 0;
  for (const Edge &e : graph[from])
    if (e.added && e.to == to)
      sum += e.residual + graph[e.to][e.reverse].residual;
  return sum;
}
