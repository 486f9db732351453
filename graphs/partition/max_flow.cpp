// See Note [Partitioners] in docs/partitioners.md.
#include "graphs/partition/max_flow.h"

#include <algorithm>
#include <queue>

namespace tg::graphs {

FlowNetwork::FlowNetwork(int vertices) : adjacency_(static_cast<size_t>(vertices)) {}

void FlowNetwork::add_edge(int from, int to, int64_t capacity) {
  adjacency_[static_cast<size_t>(from)].push_back(static_cast<int>(edges_.size()));
  edges_.push_back({to, capacity});
  adjacency_[static_cast<size_t>(to)].push_back(static_cast<int>(edges_.size()));
  edges_.push_back({from, 0});
}

bool FlowNetwork::build_levels(int source, int sink) {
  level_.assign(adjacency_.size(), -1);
  std::queue<int> q;
  level_[static_cast<size_t>(source)] = 0;
  q.push(source);
  while (!q.empty()) {
    const int v = q.front();
    q.pop();
    for (int e : adjacency_[static_cast<size_t>(v)]) {
      const Edge& edge = edges_[static_cast<size_t>(e)];
      if (edge.capacity > 0 && level_[static_cast<size_t>(edge.to)] < 0) {
        level_[static_cast<size_t>(edge.to)] = level_[static_cast<size_t>(v)] + 1;
        q.push(edge.to);
      }
    }
  }
  return level_[static_cast<size_t>(sink)] >= 0;
}

int64_t FlowNetwork::push(int v, int sink, int64_t limit) {
  if (v == sink) return limit;
  auto& adj = adjacency_[static_cast<size_t>(v)];
  for (size_t& i = next_[static_cast<size_t>(v)]; i < adj.size(); ++i) {
    const int e = adj[i];
    Edge& edge = edges_[static_cast<size_t>(e)];
    if (edge.capacity <= 0 || level_[static_cast<size_t>(edge.to)] != level_[static_cast<size_t>(v)] + 1) continue;
    const int64_t pushed = push(edge.to, sink, std::min(limit, edge.capacity));
    if (pushed > 0) {
      edge.capacity -= pushed;
      edges_[static_cast<size_t>(e ^ 1)].capacity += pushed;
      return pushed;
    }
  }
  return 0;
}

int64_t FlowNetwork::max_flow(int source, int sink) {
  int64_t total = 0;
  while (build_levels(source, sink)) {
    next_.assign(adjacency_.size(), 0);
    while (int64_t f = push(source, sink, kInfinite)) total += f;
  }
  return total;
}

std::vector<bool> FlowNetwork::sink_side(int sink) const {
  std::vector<bool> seen(adjacency_.size(), false);
  std::queue<int> q;
  seen[static_cast<size_t>(sink)] = true;
  q.push(sink);
  while (!q.empty()) {
    const int w = q.front();
    q.pop();
    for (int e : adjacency_[static_cast<size_t>(w)]) {
      // Edge e runs w -> x; its pair e ^ 1 runs x -> w, and x reaches w while that one has room.
      const int x = edges_[static_cast<size_t>(e)].to;
      if (edges_[static_cast<size_t>(e ^ 1)].capacity > 0 && !seen[static_cast<size_t>(x)]) {
        seen[static_cast<size_t>(x)] = true;
        q.push(x);
      }
    }
  }
  return seen;
}

}  // namespace tg::graphs
