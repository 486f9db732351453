// See Note [Epilogue fusion] in docs/epilogue_fusion.md.
#include "graphs/ir/graph_edit.h"

namespace tg::graphs {

std::vector<std::vector<int32_t>> readers_of(const Graph& graph) {
  std::vector<std::vector<int32_t>> readers(graph.values.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    for (ValueId v : graph.nodes[i].inputs)
      if (v >= 0) readers[static_cast<size_t>(v)].push_back(static_cast<int32_t>(i));
  return readers;
}

std::vector<bool> graph_outputs(const Graph& graph) {
  std::vector<bool> out(graph.values.size(), false);
  for (ValueId v : graph.outputs)
    if (v >= 0) out[static_cast<size_t>(v)] = true;
  return out;
}

int32_t sole_reader(const std::vector<std::vector<int32_t>>& readers, const std::vector<bool>& is_output, ValueId v) {
  const auto& r = readers[static_cast<size_t>(v)];
  return r.size() == 1 && !is_output[static_cast<size_t>(v)] ? r[0] : -1;
}

void drop_nodes(Graph& graph, const std::vector<bool>& removed) {
  std::vector<GraphNode> kept;
  kept.reserve(graph.nodes.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (!removed[i]) {
      kept.push_back(std::move(graph.nodes[i]));
      continue;
    }
    // What a dropped node computed is computed by nothing now (unless a kept node took it over).
    for (ValueId o : graph.nodes[i].outputs)
      if (o >= 0) graph.values[static_cast<size_t>(o)].producer = -1;
  }
  graph.nodes = std::move(kept);
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    for (ValueId o : graph.nodes[i].outputs)
      if (o >= 0) graph.values[static_cast<size_t>(o)].producer = static_cast<int32_t>(i);
}

}  // namespace tg::graphs
