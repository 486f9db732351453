// Max-flow / min-cut (Dinic's algorithm) over a small directed graph with int64 capacities.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace tg::graphs {

// A flow network; after max_flow(), sink_side() tells the minimum cut nearest the sink.
class FlowNetwork {
 public:
  static constexpr int64_t kInfinite = std::numeric_limits<int64_t>::max() / 4;

  explicit FlowNetwork(int vertices);
  void add_edge(int from, int to, int64_t capacity);
  // Pushes the maximum flow from source to sink and returns its value.
  int64_t max_flow(int source, int sink);
  // Vertices that reach the sink in the residual network (valid after max_flow): the sink side of
  // the minimum cut nearest the sink.
  std::vector<bool> sink_side(int sink) const;

 private:
  struct Edge {
    int to;
    int64_t capacity;
  };
  bool build_levels(int source, int sink);
  int64_t push(int v, int sink, int64_t limit);

  std::vector<Edge> edges_;
  std::vector<std::vector<int>> adjacency_;
  std::vector<int> level_;
  std::vector<size_t> next_;
};

}  // namespace tg::graphs
