// See graphs/passes/norm_fusion.h.
#include "graphs/passes/norm_fusion.h"

#include <optional>
#include <string>
#include <vector>

#include "graphs/ir/graph_edit.h"
#include "graphs/logs.h"
#include "graphs/passes/node_patterns.h"
#include "ops/norm/add_layer_norm.h"

namespace tg::graphs {
namespace {

// True when value v exists before node `at` runs: a graph input or constant, or an earlier output.
bool exists_before(const Graph& graph, ValueId v, int32_t at) {
  if (v < 0) return true;
  const int32_t producer = graph.values[static_cast<size_t>(v)].producer;
  return producer < at;
}

// The cast node that is the only reader of value v (no graph output), or -1.
int32_t only_cast_reader(const Graph& graph, const std::vector<std::vector<int32_t>>& readers,
                         const std::vector<bool>& is_output, ValueId v) {
  const auto& r = readers[static_cast<size_t>(v)];
  if (is_output[static_cast<size_t>(v)] || r.size() != 1) return -1;
  return is_dtype_cast(graph, graph.nodes[static_cast<size_t>(r[0])]) ? r[0] : -1;
}

}  // namespace

int fuse_add_layer_norm(Graph& graph) {
  const std::vector<std::vector<int32_t>> readers = readers_of(graph);
  const std::vector<bool> is_output = graph_outputs(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  int fused = 0;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const GraphNode& norm = graph.nodes[i];
    if (removed[i]) continue;
    const std::optional<RowNormInfo> info = row_norm_info(*norm.op);
    if (!info || info->name != "layer_norm" || norm.inputs.empty() || norm.inputs[0] < 0) continue;
    const ValueId sum = norm.inputs[0];
    const int32_t add_at = graph.values[static_cast<size_t>(sum)].producer;
    if (add_at < 0 || removed[static_cast<size_t>(add_at)]) continue;
    const GraphNode& add = graph.nodes[static_cast<size_t>(add_at)];
    if (!is_plain_add(graph, add)) continue;
    const TensorMeta& sm = meta_of_value(graph, sum);
    bool fits = sm.device.is_cuda() && is_contiguous_value(graph, sum);
    for (ValueId v : add.inputs)
      fits = fits && meta_of_value(graph, v).sizes == sm.sizes && is_contiguous_value(graph, v);
    if (!fits) continue;
    // Where the fused node can run: the add's place when the parameters exist there, else the
    // norm's when nothing reads the sum in between.
    bool params_ready = true;
    for (size_t k = 1; k < norm.inputs.size(); ++k)
      params_ready = params_ready && exists_before(graph, norm.inputs[k], add_at);
    bool sum_unread_between = true;
    for (int32_t r : readers[static_cast<size_t>(sum)])
      sum_unread_between = sum_unread_between && (r < add_at || r >= static_cast<int32_t>(i));
    if (!params_ready && !sum_unread_between) continue;
    const auto place = static_cast<size_t>(params_ready ? add_at : static_cast<int32_t>(i));
    // The normalized rows, or their cast when that is all that reads them.
    ValueId normed = norm.outputs[0];
    const int32_t cast_at = only_cast_reader(graph, readers, is_output, normed);
    if (cast_at >= 0) {
      normed = graph.nodes[static_cast<size_t>(cast_at)].outputs[0];
      removed[static_cast<size_t>(cast_at)] = true;
    }
    std::vector<ValueId> inputs{add.inputs[0], add.inputs[1]};
    for (size_t k = 1; k < norm.inputs.size(); ++k) inputs.push_back(norm.inputs[k]);
    const std::vector<ValueId> outputs{sum, normed, norm.outputs[1], norm.outputs[2]};
    GraphNode node{.op = add_layer_norm_op(info->geometry, info->has_weight, info->has_bias,
                                           meta_of_value(graph, normed).dtype),
                   .inputs = std::move(inputs),
                   .outputs = outputs,
                   .phase = norm.phase,
                   .sequence_nr = norm.sequence_nr,
                   .checkpoint_region = norm.checkpoint_region};
    removed[place == i ? static_cast<size_t>(add_at) : i] = true;
    graph.nodes[place] = std::move(node);
    for (size_t k = 0; k < outputs.size(); ++k)
      graph.values[static_cast<size_t>(outputs[k])].output_index = static_cast<int32_t>(k);
    ++fused;
  }
  if (fused > 0) {
    drop_nodes(graph, removed);
    log_line("fusion", std::to_string(fused) + " residual add(s) folded into layer_norm (add_layer_norm)");
  }
  return fused;
}

int fuse_add_layer_norm_backward(Graph& graph) {
  const std::vector<std::vector<int32_t>> readers = readers_of(graph);
  const std::vector<bool> is_output = graph_outputs(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  int fused = 0;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const GraphNode& norm = graph.nodes[i];
    if (removed[i]) continue;
    const std::optional<RowNormBackwardInfo> info = row_norm_backward_info(*norm.op);
    if (!info || info->name != "layer_norm" || norm.outputs.empty() || norm.outputs[0] < 0) continue;
    const auto at = static_cast<int32_t>(i);
    const ValueId gx = norm.outputs[0];
    const auto& gx_readers = readers[static_cast<size_t>(gx)];
    if (is_output[static_cast<size_t>(gx)] || gx_readers.size() != 1) continue;
    const auto add_at = static_cast<size_t>(gx_readers[0]);
    const GraphNode& add = graph.nodes[add_at];
    if (removed[add_at] || !is_plain_add(graph, add) || add.inputs[0] == add.inputs[1]) continue;
    const ValueId other = add.inputs[0] == gx ? add.inputs[1] : add.inputs[0];
    const ValueId total = add.outputs[0];
    const TensorMeta& tm = meta_of_value(graph, total);
    if (!tm.device.is_cuda() || !exists_before(graph, other, at) || !is_contiguous_value(graph, other) ||
        meta_of_value(graph, other).sizes != tm.sizes || meta_of_value(graph, other).dtype != tm.dtype ||
        meta_of_value(graph, gx).dtype != tm.dtype || !is_contiguous_value(graph, total))
      continue;
    // The incoming gradient, before a cast that only the norm reads.
    ValueId gy = norm.inputs[0];
    const int32_t gy_at = graph.values[static_cast<size_t>(gy)].producer;
    int32_t gy_cast = -1;
    if (gy_at >= 0 && is_dtype_cast(graph, graph.nodes[static_cast<size_t>(gy_at)]) &&
        readers[static_cast<size_t>(gy)].size() == 1 && !is_output[static_cast<size_t>(gy)] &&
        is_contiguous_value(graph, graph.nodes[static_cast<size_t>(gy_at)].inputs[0])) {
      gy_cast = gy_at;
      gy = graph.nodes[static_cast<size_t>(gy_at)].inputs[0];
    }
    // One cast of the sum into another dtype (the 16-bit update's gradient), written alongside.
    int32_t low_cast = -1;
    for (int32_t r : readers[static_cast<size_t>(total)]) {
      if (!removed[static_cast<size_t>(r)] && is_dtype_cast(graph, graph.nodes[static_cast<size_t>(r)])) {
        low_cast = r;
        break;
      }
    }
    std::vector<ValueId> inputs{gy};
    for (size_t k = 1; k < norm.inputs.size(); ++k) inputs.push_back(norm.inputs[k]);
    inputs.push_back(other);
    std::vector<ValueId> outputs{total};
    std::optional<DType> low_dtype;
    if (low_cast >= 0) {
      outputs.push_back(graph.nodes[static_cast<size_t>(low_cast)].outputs[0]);
      low_dtype = meta_of_value(graph, outputs.back()).dtype;
      removed[static_cast<size_t>(low_cast)] = true;
    }
    for (size_t k = 1; k < norm.outputs.size(); ++k) outputs.push_back(norm.outputs[k]);
    if (gy_cast >= 0) removed[static_cast<size_t>(gy_cast)] = true;
    removed[add_at] = true;
    GraphNode node{.op = add_layer_norm_backward_op(info->geometry, info->has_weight, /*has_grad_sum=*/true,
                                                    low_dtype, info->weight_grad, info->bias_grad, info->param_dtype),
                   .inputs = std::move(inputs),
                   .outputs = outputs,
                   .phase = norm.phase,
                   .sequence_nr = norm.sequence_nr,
                   .checkpoint_region = norm.checkpoint_region};
    graph.nodes[i] = std::move(node);
    for (size_t k = 0; k < outputs.size(); ++k)
      if (outputs[k] >= 0) graph.values[static_cast<size_t>(outputs[k])].output_index = static_cast<int32_t>(k);
    ++fused;
  }
  if (fused > 0) {
    drop_nodes(graph, removed);
    log_line("fusion", std::to_string(fused) + " layer_norm backward(s) fused with the residual gradient's sum");
  }
  return fused;
}

}  // namespace tg::graphs
