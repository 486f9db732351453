// Small queries and edits that graph rewrites (fusions) share.
#pragma once

#include <cstdint>
#include <vector>

#include "graphs/ir/graph.h"

namespace tg::graphs {

// Who reads each value: node indices, in order (graph outputs are not counted).
std::vector<std::vector<int32_t>> readers_of(const Graph& graph);
// Per value: true when it is a graph output.
std::vector<bool> graph_outputs(const Graph& graph);
// The node that alone reads value v, when v is no graph output; -1 otherwise.
int32_t sole_reader(const std::vector<std::vector<int32_t>>& readers, const std::vector<bool>& is_output, ValueId v);
// Drops the removed nodes and renumbers the producers of the values the others compute; values
// only a dropped node computed get no producer.
void drop_nodes(Graph& graph, const std::vector<bool>& removed);

}  // namespace tg::graphs
