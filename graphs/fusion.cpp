#include "graphs/fusion.h"

#include "graphs/graph_edit.h"
#include "ops/bias_grad.h"
#include "ops/matmul.h"

namespace tg::graphs {

int fuse_linear_relu(Graph& graph) {
  const std::vector<std::vector<int32_t>> readers = readers_of(graph);
  const std::vector<bool> is_output = graph_outputs(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  int fused = 0;
  for (GraphNode& n : graph.nodes) {
    if (n.op->name() != "linear" || n.outputs.size() != 1) continue;
    const auto v = static_cast<size_t>(n.outputs[0]);
    if (readers[v].size() != 1 || is_output[v]) continue;
    const int32_t relu_node = readers[v][0];
    GraphNode& next = graph.nodes[static_cast<size_t>(relu_node)];
    if (next.op->name() != "relu" || next.inputs.size() != 1) continue;
    OpPtr fused_op = fused_linear_relu_op(*n.op);
    if (!fused_op) continue;
    n.op = std::move(fused_op);
    n.outputs = next.outputs;
    graph.values[v].producer = -1;  // no longer computed: nothing reads it
    removed[static_cast<size_t>(relu_node)] = true;
    ++fused;
  }
  if (fused > 0) drop_nodes(graph, removed);
  return fused;
}

int fuse_relu_backward_bias_grad(Graph& graph) {
  const std::vector<std::vector<int32_t>> readers = readers_of(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  int fused = 0;
  for (GraphNode& n : graph.nodes) {
    if (n.op->name() != "threshold_backward" || n.outputs.size() != 1 || n.inputs.size() != 2) continue;
    const auto h = static_cast<size_t>(n.outputs[0]);
    const TensorMeta& hm = graph.values[h].meta;
    if (hm.sizes.empty()) continue;
    for (int32_t r : readers[h]) {
      GraphNode& sum = graph.nodes[static_cast<size_t>(r)];
      if (removed[static_cast<size_t>(r)] || sum.op->name() != "sum_to_size" || sum.outputs.size() != 1) continue;
      const TensorMeta& dm = graph.values[static_cast<size_t>(sum.outputs[0])].meta;
      if (dm.sizes != Shape{hm.sizes.back()} || dm.dtype != hm.dtype) continue;
      n.op = relu_backward_bias_grad_op();
      n.outputs = {n.outputs[0], sum.outputs[0]};
      graph.values[static_cast<size_t>(sum.outputs[0])].output_index = 1;
      removed[static_cast<size_t>(r)] = true;
      ++fused;
      break;
    }
  }
  if (fused > 0) drop_nodes(graph, removed);
  return fused;
}

}  // namespace tg::graphs
