// See Note [Epilogue fusion] in docs/epilogue_fusion.md.
#include "graphs/passes/epilogue_fusion.h"

#include <algorithm>
#include <map>
#include <string>

#include "graphs/ir/graph_edit.h"
#include "graphs/logs.h"
#include "graphs/passes/node_patterns.h"
#include "ops/elementwise/pointwise.h"
#include "ops/linalg/bias_grad.h"
#include "ops/linalg/linear.h"
#include "ops/linalg/linear_grad.h"
#include "ops/linalg/matmul.h"

namespace tg::graphs {
namespace {

bool on_cuda(const Graph& graph, ValueId v) { return graph.values[static_cast<size_t>(v)].meta.device.is_cuda(); }

// The elementwise math of a node; false for ops that are not elementwise.
bool math_of(const Graph& graph, const GraphNode& n, PointwiseMath& math) {
  std::vector<TensorMeta> metas;
  for (ValueId v : n.inputs) metas.push_back(meta_of_value(graph, v));
  return n.op->pointwise(metas, math);
}

bool is_gelu_tanh(const Graph& graph, const GraphNode& n) {
  PointwiseMath math;
  return n.inputs.size() == 1 && math_of(graph, n, math) && math.family == PointwiseFamily::Unary &&
         math.unary == UnaryKind::GeluTanh;
}

bool is_gelu_tanh_backward(const Graph& graph, const GraphNode& n) {
  PointwiseMath math;
  return n.inputs.size() == 2 && math_of(graph, n, math) && math.family == PointwiseFamily::Binary &&
         math.binary == BinaryKind::GeluTanhBackward && math.params.side == ScalarSide::None;
}

// The node summing `g` over all but its last dim into [last dim], in g's dtype (a bias gradient), or -1.
int32_t bias_sum_reader(const Graph& graph, const std::vector<std::vector<int32_t>>& readers,
                        const std::vector<bool>& removed, ValueId g) {
  const TensorMeta& gm = meta_of_value(graph, g);
  if (gm.sizes.empty()) return -1;
  for (int32_t r : readers[static_cast<size_t>(g)]) {
    const GraphNode& sum = graph.nodes[static_cast<size_t>(r)];
    if (removed[static_cast<size_t>(r)] || sum.op->name() != "sum_to_size" || sum.outputs.size() != 1) continue;
    const TensorMeta& dm = meta_of_value(graph, sum.outputs[0]);
    if (dm.sizes == Shape{gm.sizes.back()} && dm.dtype == gm.dtype) return r;
  }
  return -1;
}

// The mm node producing `h` when h is a 2-D CUDA value that only `reader` reads (and no graph
// output), or -1: such a product can take the reader's work into its epilogue.
int32_t sole_mm_producer(const Graph& graph, const std::vector<std::vector<int32_t>>& readers,
                         const std::vector<bool>& is_output, const std::vector<bool>& removed, ValueId h) {
  const Value& hv = graph.values[static_cast<size_t>(h)];
  if (hv.producer < 0 || readers[static_cast<size_t>(h)].size() != 1 || is_output[static_cast<size_t>(h)]) return -1;
  if (!hv.meta.device.is_cuda() || hv.meta.sizes.size() != 2 || removed[static_cast<size_t>(hv.producer)]) return -1;
  return graph.nodes[static_cast<size_t>(hv.producer)].op->name() == "mm" ? hv.producer : -1;
}

// Replaces each node `is_activation_backward` accepts (one output, the gradient h) whose result a
// bias-gradient sum_to_size also reads, and that sum, with one `fused` node producing (h, db).
template <typename Match>
int fuse_backward_bias_grads(Graph& graph, const OpPtr& fused_op, Match is_activation_backward) {
  const std::vector<std::vector<int32_t>> readers = readers_of(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  int fused = 0;
  for (GraphNode& n : graph.nodes) {
    if (n.outputs.size() != 1 || !is_activation_backward(graph, n)) continue;
    const int32_t sum = bias_sum_reader(graph, readers, removed, n.outputs[0]);
    if (sum < 0) continue;
    const ValueId db = graph.nodes[static_cast<size_t>(sum)].outputs[0];
    n.op = fused_op;
    n.outputs = {n.outputs[0], db};
    graph.values[static_cast<size_t>(db)].output_index = 1;
    removed[static_cast<size_t>(sum)] = true;
    ++fused;
  }
  if (fused > 0) drop_nodes(graph, removed);
  return fused;
}

}  // namespace

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
    OpPtr fused_op = fused_linear_relu_op(*n.op);  // null for linear ops already fused
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
  return fuse_backward_bias_grads(graph, relu_backward_bias_grad_op(), [](const Graph&, const GraphNode& n) {
    return n.op->name() == "threshold_backward" && n.inputs.size() == 2;
  });
}

int fuse_gelu_tanh_backward_bias_grad(Graph& graph) {
  return fuse_backward_bias_grads(graph, gelu_tanh_backward_bias_grad_op(), [](const Graph& g, const GraphNode& n) {
    return is_gelu_tanh_backward(g, n) && on_cuda(g, n.outputs[0]);
  });
}

int fuse_linear_gelu_tanh(Graph& graph) {
  const std::vector<std::vector<int32_t>> readers = readers_of(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  int fused = 0;
  for (GraphNode& n : graph.nodes) {
    if (linear_activation(*n.op) != LinearActivation::None || n.outputs.size() != 1) continue;
    const ValueId pre = n.outputs[0];
    if (!on_cuda(graph, pre)) continue;
    for (int32_t r : readers[static_cast<size_t>(pre)]) {
      const GraphNode& act = graph.nodes[static_cast<size_t>(r)];
      if (removed[static_cast<size_t>(r)] || act.outputs.size() != 1 || !is_gelu_tanh(graph, act)) continue;
      if (meta_of_value(graph, act.outputs[0]).dtype != meta_of_value(graph, pre).dtype) continue;
      n.op = linear_op_with(*n.op, LinearActivation::GeluTanh);
      n.outputs = {act.outputs[0], pre};
      graph.values[static_cast<size_t>(act.outputs[0])].output_index = 0;
      graph.values[static_cast<size_t>(pre)].output_index = 1;
      removed[static_cast<size_t>(r)] = true;
      ++fused;
      break;
    }
  }
  if (fused > 0) drop_nodes(graph, removed);
  return fused;
}

int fuse_relu_mask_gradients(Partition& partition, size_t first_saved) {
  Graph& fw = partition.forward;
  Graph& bw = partition.backward;
  const std::vector<std::vector<int32_t>> readers = readers_of(bw);
  const std::vector<bool> is_output = graph_outputs(bw);
  std::vector<bool> removed(bw.nodes.size(), false);
  std::map<ValueId, int32_t> saved_index;  // backward value -> its position among the saved values
  for (const GraphInput& in : bw.inputs)
    if (in.kind == InputKind::Saved) saved_index[in.value] = in.index;
  std::map<int32_t, ValueId> mask_of;  // forward node -> the backward input holding its mask
  int fused = 0;
  for (GraphNode& n : bw.nodes) {
    if (n.op->name() != "relu_backward_bias_grad" || n.inputs.size() != 2) continue;
    const ValueId y = n.inputs[1];
    const int32_t product = sole_mm_producer(bw, readers, is_output, removed, n.inputs[0]);
    const auto saved = saved_index.find(y);
    if (product < 0 || saved == saved_index.end() || meta_of_value(bw, y).sizes.size() != 2) continue;
    // The forward linear_relu that computed y.
    const size_t fw_output = first_saved + static_cast<size_t>(saved->second);
    if (fw_output >= fw.outputs.size()) continue;
    const ValueId fy = fw.outputs[fw_output];
    const int32_t producer = fw.values[static_cast<size_t>(fy)].producer;
    if (producer < 0) continue;
    GraphNode& linear = fw.nodes[static_cast<size_t>(producer)];
    if (linear_activation(*linear.op) != LinearActivation::Relu && !mask_of.count(producer)) continue;
    if (linear.outputs[0] != fy) continue;
    if (!mask_of.count(producer)) {
      // The forward writes the mask as it computes the ReLU, and saves it for the backward.
      const TensorMeta& ym = meta_of_value(fw, fy);
      const TensorMeta mask_meta = contiguous_meta({ym.sizes[0], relu_mask_row_bits(ym.sizes[1]) / 32}, kInt32, ym.device);
      const std::string name = fw.values[static_cast<size_t>(fy)].name + "_mask";
      linear.op = linear_op_with(*linear.op, LinearActivation::ReluMask);
      const ValueId fmask = fw.add_value(mask_meta, name);
      fw.values[static_cast<size_t>(fmask)].producer = producer;
      fw.values[static_cast<size_t>(fmask)].output_index = 1;
      linear.outputs.push_back(fmask);
      fw.outputs.push_back(fmask);
      const auto index = static_cast<int32_t>(fw.outputs.size() - 1 - first_saved);
      const ValueId bmask = bw.add_value(mask_meta, name);
      auto after_saved = std::find_if(bw.inputs.begin(), bw.inputs.end(),
                                      [](const GraphInput& in) { return in.kind != InputKind::Saved; });
      bw.inputs.insert(after_saved, GraphInput{bmask, InputKind::Saved, index});
      partition.saved.push_back(-1);
      partition.saved_bytes += shape_numel(mask_meta.sizes) * 4;
      mask_of[producer] = bmask;
    }
    const GraphNode& mm = bw.nodes[static_cast<size_t>(product)];
    n.op = mm_relu_backward_bias_grad_op();
    n.inputs = {mm.inputs[0], mm.inputs[1], y, mask_of[producer]};
    removed[static_cast<size_t>(product)] = true;
    ++fused;
  }
  if (fused > 0) drop_nodes(bw, removed);
  return fused;
}

int fuse_gelu_tanh_gradients(Graph& graph) {
  const std::vector<std::vector<int32_t>> readers = readers_of(graph);
  const std::vector<bool> is_output = graph_outputs(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  int fused = 0;
  for (GraphNode& n : graph.nodes) {
    if (n.outputs.size() != 1 || !is_gelu_tanh_backward(graph, n)) continue;
    const int32_t product = sole_mm_producer(graph, readers, is_output, removed, n.inputs[0]);
    if (product < 0 || meta_of_value(graph, n.inputs[1]).sizes != meta_of_value(graph, n.outputs[0]).sizes) continue;
    const int32_t sum = bias_sum_reader(graph, readers, removed, n.outputs[0]);
    if (sum < 0) continue;
    const GraphNode& mm = graph.nodes[static_cast<size_t>(product)];
    const ValueId db = graph.nodes[static_cast<size_t>(sum)].outputs[0];
    n.op = mm_gelu_tanh_backward_bias_grad_op();
    n.inputs = {mm.inputs[0], mm.inputs[1], n.inputs[1]};
    n.outputs = {n.outputs[0], db};
    graph.values[static_cast<size_t>(db)].output_index = 1;
    removed[static_cast<size_t>(product)] = removed[static_cast<size_t>(sum)] = true;
    ++fused;
  }
  if (fused > 0) drop_nodes(graph, removed);
  return fused;
}

int fuse_weight_bias_grads(Graph& graph) {
  const std::vector<std::vector<int32_t>> readers = readers_of(graph);
  const std::vector<bool> is_output = graph_outputs(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  int fused = 0;
  for (size_t v = 0; v < graph.values.size(); ++v) {
    const auto g = static_cast<ValueId>(v);
    if (!on_cuda(graph, g) || meta_of_value(graph, g).sizes.size() != 2) continue;
    const int32_t sum = bias_sum_reader(graph, readers, removed, g);
    if (sum < 0) continue;
    // t(g), and the product t(g) @ x reading it.
    int32_t transpose = -1, product = -1;
    for (int32_t r : readers[v]) {
      const GraphNode& t = graph.nodes[static_cast<size_t>(r)];
      if (removed[static_cast<size_t>(r)] || t.op->name() != "t" || t.outputs.size() != 1) continue;
      for (int32_t q : readers[static_cast<size_t>(t.outputs[0])]) {
        const GraphNode& mm = graph.nodes[static_cast<size_t>(q)];
        if (!removed[static_cast<size_t>(q)] && mm.op->name() == "mm" && mm.inputs[0] == t.outputs[0]) {
          transpose = r;
          product = q;
          break;
        }
      }
      if (product >= 0) break;
    }
    if (product < 0) continue;
    // The fused node takes the later of the two places: both inputs exist by then.
    const int32_t at = std::max(product, sum), other = std::min(product, sum);
    const ValueId x = graph.nodes[static_cast<size_t>(product)].inputs[1];
    const ValueId dw = graph.nodes[static_cast<size_t>(product)].outputs[0];
    const ValueId db = graph.nodes[static_cast<size_t>(sum)].outputs[0];
    GraphNode& node = graph.nodes[static_cast<size_t>(at)];
    node.op = linear_weight_bias_grad_op();
    node.inputs = {g, x};
    node.outputs = {dw, db};
    graph.values[static_cast<size_t>(dw)].output_index = 0;
    graph.values[static_cast<size_t>(db)].output_index = 1;
    removed[static_cast<size_t>(other)] = true;
    const ValueId tg = graph.nodes[static_cast<size_t>(transpose)].outputs[0];
    if (readers[static_cast<size_t>(tg)].size() == 1 && !is_output[static_cast<size_t>(tg)])
      removed[static_cast<size_t>(transpose)] = true;  // a view nothing else reads
    ++fused;
  }
  if (fused > 0) drop_nodes(graph, removed);
  return fused;
}

void fuse_epilogues(Partition& p, const JointGraph& joint, bool gradients) {
  const int relu = fuse_linear_relu(p.forward) + fuse_linear_relu(p.backward);
  const int gelu = fuse_linear_gelu_tanh(p.forward) + fuse_linear_gelu_tanh(p.backward);
  const int relu_bias = fuse_relu_backward_bias_grad(p.backward);
  const int relu_mm = gradients ? fuse_relu_mask_gradients(p, joint.num_user_outputs + joint.mutated.size()) : 0;
  const int gelu_mm = gradients ? fuse_gelu_tanh_gradients(p.backward) : 0;
  const int weight_bias = gradients ? fuse_weight_bias_grads(p.backward) : 0;
  // After the product fusions, which take these pairs into their own nodes where they apply.
  const int gelu_bias = fuse_gelu_tanh_backward_bias_grad(p.backward);
  if (relu + gelu + relu_bias + relu_mm + gelu_mm + weight_bias + gelu_bias == 0) return;
  log_line("fusion", std::to_string(relu) + " linear + relu pair(s) fused into linear_relu, " + std::to_string(gelu) +
                         " linear + tanh gelu into linear_gelu_tanh, " + std::to_string(relu_bias) +
                         " relu gradient + bias gradient into relu_backward_bias_grad, then " +
                         std::to_string(relu_mm) + " of those and " + std::to_string(gelu_mm) +
                         " tanh gelu gradient(s) into the product before them (" + std::to_string(relu_mm) +
                         " ReLU mask(s) saved), " + std::to_string(weight_bias) +
                         " weight + bias gradient pair(s) into linear_weight_bias_grad, " +
                         std::to_string(gelu_bias) + " tanh gelu gradient + bias gradient into " +
                         "gelu_tanh_backward_bias_grad");
}

}  // namespace tg::graphs
