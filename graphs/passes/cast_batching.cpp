// See graphs/passes/cast_batching.h.
#include "graphs/passes/cast_batching.h"

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "graphs/ir/graph_edit.h"
#include "graphs/logs.h"
#include "graphs/passes/node_patterns.h"
#include "ops/elementwise/copy.h"

namespace tg::graphs {

int batch_parameter_casts(Graph& graph, bool forward) {
  const std::vector<bool> is_output = graph_outputs(graph);
  const std::vector<std::vector<int32_t>> readers = readers_of(graph);
  std::vector<bool> is_input(graph.values.size(), false);
  for (const GraphInput& in : graph.inputs) is_input[static_cast<size_t>(in.value)] = true;
  // (source dtype, target dtype, device) -> the cast nodes, in graph order.
  std::map<std::tuple<int, int, std::string>, std::vector<int32_t>> groups;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const GraphNode& n = graph.nodes[i];
    if (!is_dtype_cast(graph, n)) continue;
    // Backward casts move to the last one's place: only those no node reads.
    const auto result = static_cast<size_t>(n.outputs[0]);
    const bool wanted =
        forward ? is_input[static_cast<size_t>(n.inputs[0])] : is_output[result] && readers[result].empty();
    if (!wanted) continue;
    const TensorMeta& in = meta_of_value(graph, n.inputs[0]);
    const TensorMeta& out = meta_of_value(graph, n.outputs[0]);
    groups[{static_cast<int>(in.dtype), static_cast<int>(out.dtype), in.device.str()}].push_back(
        static_cast<int32_t>(i));
  }
  std::vector<bool> removed(graph.nodes.size(), false);
  int batched = 0;
  for (auto& [key, nodes] : groups) {
    if (nodes.size() < 2) continue;
    const int32_t keep = forward ? nodes.front() : nodes.back();
    std::vector<ValueId> inputs, outputs;
    for (int32_t i : nodes) {
      const GraphNode& n = graph.nodes[static_cast<size_t>(i)];
      inputs.push_back(n.inputs[0]);
      outputs.push_back(n.outputs[0]);
      if (i != keep) removed[static_cast<size_t>(i)] = true;
    }
    GraphNode& node = graph.nodes[static_cast<size_t>(keep)];
    node.op = multi_tensor_cast_op(static_cast<DType>(std::get<1>(key)), inputs.size());
    node.inputs = std::move(inputs);
    node.outputs = outputs;
    for (size_t k = 0; k < outputs.size(); ++k)
      graph.values[static_cast<size_t>(outputs[k])].output_index = static_cast<int32_t>(k);
    batched += static_cast<int>(nodes.size());
  }
  if (batched > 0) {
    drop_nodes(graph, removed);
    log_line("fusion", std::to_string(batched) + (forward ? " forward" : " backward") +
                           " parameter cast(s) batched into multi_tensor_cast");
  }
  return batched;
}

}  // namespace tg::graphs
