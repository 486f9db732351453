// See graphs/passes/node_patterns.h.
#include "graphs/passes/node_patterns.h"

#include <vector>

#include "ops/elementwise/pointwise.h"

namespace tg::graphs {

const TensorMeta& meta_of_value(const Graph& graph, ValueId v) { return graph.values[static_cast<size_t>(v)].meta; }

bool is_plain_add(const Graph& graph, const GraphNode& n) {
  if (n.op->name() != "add" || n.inputs.size() != 2 || n.outputs.size() != 1) return false;
  std::vector<TensorMeta> metas;
  for (ValueId v : n.inputs) {
    if (v < 0) return false;
    metas.push_back(meta_of_value(graph, v));
  }
  PointwiseMath math;
  return n.op->pointwise(metas, math) && math.family == PointwiseFamily::Binary && math.binary == BinaryKind::Add &&
         math.params.side == ScalarSide::None && math.params.alpha.to<double>() == 1.0;
}

bool is_contiguous_value(const Graph& graph, ValueId v) {
  const TensorMeta& m = meta_of_value(graph, v);
  return (m.strides.empty() || m.strides == contiguous_strides(m.sizes)) && m.offset == 0;
}

bool is_single_view(const GraphNode& n) { return n.op->has(kView) && n.inputs.size() == 1 && n.outputs.size() == 1; }

bool is_dtype_cast(const Graph& graph, const GraphNode& n) {
  if (n.op->name() != "_to_copy" || n.inputs.size() != 1 || n.outputs.size() != 1 || n.inputs[0] < 0) return false;
  const TensorMeta& in = meta_of_value(graph, n.inputs[0]);
  const TensorMeta& out = meta_of_value(graph, n.outputs[0]);
  PointwiseMath math;
  if (!n.op->pointwise({in}, math) || math.family != PointwiseFamily::Convert) return false;
  return in.device == out.device && in.dtype != out.dtype && is_contiguous_value(graph, n.outputs[0]);
}

}  // namespace tg::graphs
