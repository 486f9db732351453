// See graphs/passes/float32_gradients.h.
#include "graphs/passes/float32_gradients.h"

#include <string>
#include <string_view>
#include <vector>

#include "graphs/ir/graph_edit.h"
#include "graphs/logs.h"
#include "graphs/passes/node_patterns.h"
#include "ops/linalg/matmul.h"
#include "ops/loss/linear_cross_entropy_grads_ahead.h"

namespace tg::graphs {
namespace {

// The op that writes `producer`'s output `index` in float32 instead, or null when it cannot.
OpPtr widened(const Graph& graph, const GraphNode& producer, size_t index) {
  const std::string_view name = producer.op->name();
  if (name == "mm") return mm_op(kFloat32);
  if (name == "linear_cross_entropy_grads_scale") {
    std::vector<DType> dtypes;
    for (ValueId v : producer.outputs) dtypes.push_back(meta_of_value(graph, v).dtype);
    dtypes[index] = kFloat32;
    return linear_cross_entropy_grads_scale_op(std::move(dtypes));
  }
  return nullptr;
}

}  // namespace

int widen_parameter_gradients(Graph& graph) {
  const std::vector<bool> is_output = graph_outputs(graph);
  const std::vector<std::vector<int32_t>> readers = readers_of(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  int widened_casts = 0;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const GraphNode& cast = graph.nodes[i];
    if (!is_dtype_cast(graph, cast)) continue;
    const ValueId source = cast.inputs[0], result = cast.outputs[0];
    const DType from_dtype = meta_of_value(graph, source).dtype;
    if (meta_of_value(graph, result).dtype != kFloat32 || !is_low_precision(from_dtype)) continue;
    if (!is_output[static_cast<size_t>(result)] || !readers[static_cast<size_t>(result)].empty()) continue;
    if (sole_reader(readers, is_output, source) != static_cast<int32_t>(i)) continue;
    const Value& from = graph.values[static_cast<size_t>(source)];
    if (from.producer < 0) continue;
    GraphNode& producer = graph.nodes[static_cast<size_t>(from.producer)];
    const auto index = static_cast<size_t>(from.output_index);
    OpPtr op = widened(graph, producer, index);
    if (!op) continue;
    // The producer now computes the cast's result (float32, contiguous like the 16-bit one).
    const int32_t at = from.producer;
    producer.op = std::move(op);
    producer.outputs[index] = result;
    graph.values[static_cast<size_t>(source)].producer = -1;  // the 16-bit value is computed no more
    Value& out = graph.values[static_cast<size_t>(result)];
    out.producer = at;
    out.output_index = static_cast<int32_t>(index);
    removed[i] = true;
    ++widened_casts;
  }
  if (widened_casts > 0) {
    drop_nodes(graph, removed);
    log_line("fusion", std::to_string(widened_casts) + " parameter gradient(s) written in float32 by their products");
  }
  return widened_casts;
}

}  // namespace tg::graphs
