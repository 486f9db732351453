// See graphs/passes/lm_head_fusion.h.
#include "graphs/passes/lm_head_fusion.h"

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "graphs/ir/graph_edit.h"
#include "graphs/logs.h"
#include "graphs/passes/node_patterns.h"
#include "ops/linalg/linear.h"
#include "ops/loss/linear_cross_entropy_grads_ahead.h"
#include "tensor/shape.h"

namespace tg::graphs {
namespace {

// What one rewrite replaces and with what.
struct LmHead {
  int32_t loss_at = -1;                 // the cross_entropy node (its place takes the fused node)
  std::vector<int32_t> forward_nodes;   // the linear, the views and casts, the cross_entropy
  std::vector<int32_t> backward_nodes;  // their backward (the cluster)
  int32_t first_backward = -1;          // the cross_entropy's backward node: the scaling node's place
  ValueId x = -1, w = -1, b = -1, target = -1, loss = -1, loss_grad = -1;
  ValueId grad_x = -1, grad_w = -1, grad_b = -1;  // the cluster's results (-1: not computed)
  CrossEntropyInfo info{};
};

// The forward nodes from a cross_entropy's input up to the linear producing the logits, through
// views and a cast of 16-bit logits to float32 (autocast's): the linear's index last, or nothing.
std::optional<std::vector<int32_t>> chain_to_linear(const Graph& graph, ValueId v) {
  std::vector<int32_t> chain;
  while (v >= 0) {
    const int32_t at = graph.values[static_cast<size_t>(v)].producer;
    if (at < 0) return std::nullopt;
    const GraphNode& n = graph.nodes[static_cast<size_t>(at)];
    if (n.phase != Phase::Forward) return std::nullopt;
    chain.push_back(at);
    const std::optional<LinearActivation> act = linear_activation(*n.op);
    if (act) {
      if (*act != LinearActivation::None || n.outputs.size() != 1) return std::nullopt;
      return chain;
    }
    if (!is_single_view(n) && !is_dtype_cast(graph, n)) return std::nullopt;
    v = n.inputs[0];
  }
  return std::nullopt;
}

// Fills `head` for the cross_entropy node at `at`, or returns false when the pattern does not hold.
bool match(const Graph& graph, const std::vector<std::vector<int32_t>>& readers, const std::vector<bool>& is_output,
           int32_t at, int64_t min_logit_bytes, LmHead& head) {
  const GraphNode& ce = graph.nodes[static_cast<size_t>(at)];
  const std::optional<CrossEntropyInfo> info = cross_entropy_info(*ce.op);
  if (!info || info->reduction == Reduction::None || ce.phase != Phase::Forward || ce.sequence_nr < 0) return false;
  const std::optional<std::vector<int32_t>> chain = chain_to_linear(graph, ce.inputs[0]);
  if (!chain) return false;
  const GraphNode& linear = graph.nodes[static_cast<size_t>(chain->back())];
  const ValueId logits = linear.outputs[0];
  const TensorMeta& lm = meta_of_value(graph, logits);
  if (shape_numel(lm.sizes) * dtype_size(lm.dtype) < min_logit_bytes || lm.sizes.size() < 2) return false;
  const ValueId x = linear.inputs[0], w = linear.inputs[1], b = linear.inputs.size() > 2 ? linear.inputs[2] : -1;
  const TensorMeta& wm = meta_of_value(graph, w);
  const TensorMeta& xm = meta_of_value(graph, x);
  if (xm.sizes.size() < 2 || wm.sizes.size() != 2 || (b >= 0 && meta_of_value(graph, b).sizes != Shape{wm.sizes[0]}))
    return false;
  // The loss is what linear_cross_entropy gives: float32 for 16-bit products, else their dtype.
  const DType acc = xm.dtype == kFloat16 || xm.dtype == kBFloat16 ? kFloat32 : xm.dtype;
  if (meta_of_value(graph, ce.outputs[0]).dtype != acc) return false;
  // The backward of the chain: every backward node mapped to one of its forward nodes.
  std::set<int64_t> seqs{ce.sequence_nr};
  for (int32_t n : *chain) {
    if (graph.nodes[static_cast<size_t>(n)].sequence_nr < 0) return false;
    seqs.insert(graph.nodes[static_cast<size_t>(n)].sequence_nr);
  }
  std::vector<bool> in_cluster(graph.nodes.size(), false);
  head = LmHead{};
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const GraphNode& n = graph.nodes[i];
    if (n.phase != Phase::Backward || !seqs.count(n.sequence_nr)) continue;
    in_cluster[i] = true;
    head.backward_nodes.push_back(static_cast<int32_t>(i));
    if (n.sequence_nr == ce.sequence_nr) {
      if (n.op->name() != "cross_entropy_backward" || head.loss_grad >= 0) return false;
      head.loss_grad = n.inputs[0];
      head.first_backward = static_cast<int32_t>(i);  // the cluster's results all come after it
    }
  }
  if (head.loss_grad < 0) return false;
  // Each value the chain computes is read only by the next forward node of the chain and by the
  // cluster, and is no graph output; the cross_entropy's log-probabilities only by the cluster.
  std::vector<ValueId> inner{ce.outputs[1]};
  for (int32_t n : *chain) inner.push_back(graph.nodes[static_cast<size_t>(n)].outputs[0]);
  for (size_t k = 0; k < inner.size(); ++k) {
    const ValueId v = inner[k];
    if (is_output[static_cast<size_t>(v)]) return false;
    // inner[1] is read by the cross_entropy; inner[k] (k > 1) by the chain's node k - 2.
    const int32_t next = k == 0 ? -1 : k == 1 ? at : (*chain)[k - 2];
    for (int32_t r : readers[static_cast<size_t>(v)])
      if (r != next && !in_cluster[static_cast<size_t>(r)]) return false;
  }
  // The cluster's results read elsewhere: the gradients of x, w and b, told apart by their sizes.
  const auto& bsizes = b >= 0 ? meta_of_value(graph, b).sizes : Shape{};
  if (xm.sizes == wm.sizes || (b >= 0 && (bsizes == xm.sizes || bsizes == wm.sizes))) return false;
  for (int32_t n : head.backward_nodes) {
    for (ValueId v : graph.nodes[static_cast<size_t>(n)].outputs) {
      if (v < 0) continue;
      bool read_outside = is_output[static_cast<size_t>(v)];
      for (int32_t r : readers[static_cast<size_t>(v)])
        read_outside = read_outside || !in_cluster[static_cast<size_t>(r)];
      if (!read_outside) continue;
      const TensorMeta& m = meta_of_value(graph, v);
      ValueId* slot = m.sizes == xm.sizes && m.dtype == xm.dtype   ? &head.grad_x
                      : m.sizes == wm.sizes && m.dtype == wm.dtype ? &head.grad_w
                      : b >= 0 && m.sizes == bsizes && m.dtype == meta_of_value(graph, b).dtype ? &head.grad_b
                                                                                                 : nullptr;
      if (slot == nullptr || *slot >= 0 || !is_contiguous_value(graph, v)) return false;
      *slot = v;
    }
  }
  if (head.grad_x < 0 && head.grad_w < 0 && head.grad_b < 0) return false;
  head.loss_at = at;
  head.forward_nodes = *chain;
  head.forward_nodes.push_back(at);
  head.x = x;
  head.w = w;
  head.b = b;
  head.target = ce.inputs[1];
  head.loss = ce.outputs[0];
  head.info = *info;
  return true;
}

// Drops view nodes of the backward that nothing reads any more (the target's aliases the
// cross_entropy's backward read).
void drop_dead_backward_views(Graph& graph) {
  for (bool changed = true; changed;) {
    changed = false;
    const std::vector<std::vector<int32_t>> readers = readers_of(graph);
    const std::vector<bool> is_output = graph_outputs(graph);
    std::vector<bool> removed(graph.nodes.size(), false);
    for (size_t i = 0; i < graph.nodes.size(); ++i) {
      const GraphNode& n = graph.nodes[i];
      if (n.phase != Phase::Backward || !is_single_view(n)) continue;
      const ValueId v = n.outputs[0];
      if (v < 0 || is_output[static_cast<size_t>(v)] || !readers[static_cast<size_t>(v)].empty()) continue;
      removed[i] = changed = true;
    }
    if (changed) drop_nodes(graph, removed);
  }
}

}  // namespace

int fuse_linear_cross_entropy(JointGraph& joint, int64_t min_logit_bytes) {
  Graph& graph = joint.graph;
  int fused = 0;
  // One head at a time: each rewrite renumbers the nodes.
  for (bool again = true; again;) {
    again = false;
    const std::vector<std::vector<int32_t>> readers = readers_of(graph);
    const std::vector<bool> is_output = graph_outputs(graph);
    LmHead head;
    for (size_t i = 0; i < graph.nodes.size() && !again; ++i)
      again = match(graph, readers, is_output, static_cast<int32_t>(i), min_logit_bytes, head);
    if (!again) break;
    const GradsAhead wanted{.input = head.grad_x >= 0, .weight = head.grad_w >= 0, .bias = head.grad_b >= 0};
    const GraphNode& ce = graph.nodes[static_cast<size_t>(head.loss_at)];
    const GraphNode& bwd = graph.nodes[static_cast<size_t>(head.first_backward)];
    // The fused forward node: the loss in the cross_entropy's value, the gradients in new ones.
    std::vector<ValueId> fwd_in{head.x, head.w};
    if (head.b >= 0) fwd_in.push_back(head.b);
    fwd_in.push_back(head.target);
    const DType acc = meta_of_value(graph, head.loss).dtype;
    std::vector<ValueId> fwd_out{head.loss}, bwd_in{head.loss_grad}, bwd_out;
    std::vector<DType> grad_dtypes;
    for (const auto& [grad, of] :
         {std::pair{head.grad_x, head.x}, std::pair{head.grad_w, head.w}, std::pair{head.grad_b, head.b}}) {
      if (grad < 0) continue;
      const TensorMeta om = meta_of_value(graph, of);  // a copy: add_value may move the values
      const std::string name = "lm_head_grad_" + std::to_string(graph.values.size());
      const ValueId unit = graph.add_value(contiguous_meta(om.sizes, acc, om.device), name);
      fwd_out.push_back(unit);
      bwd_in.push_back(unit);
      bwd_out.push_back(grad);
      grad_dtypes.push_back(meta_of_value(graph, grad).dtype);
    }
    const OpPtr fused_op =
        linear_cross_entropy_grads_ahead_op(head.b >= 0, head.info.reduction, head.info.ignore_index, 0, wanted);
    GraphNode forward{.op = fused_op,
                      .inputs = std::move(fwd_in),
                      .outputs = fwd_out,
                      .phase = Phase::Forward,
                      .sequence_nr = ce.sequence_nr,
                      .checkpoint_region = ce.checkpoint_region};
    GraphNode backward{.op = linear_cross_entropy_grads_scale_op(std::move(grad_dtypes)),
                       .inputs = std::move(bwd_in),
                       .outputs = bwd_out,
                       .phase = Phase::Backward,
                       .sequence_nr = ce.sequence_nr,
                       .checkpoint_region = bwd.checkpoint_region};
    // The fused nodes in place of the cross_entropy and of its backward, the rest of the pattern gone.
    std::vector<bool> removed(graph.nodes.size(), false);
    for (int32_t n : head.forward_nodes) removed[static_cast<size_t>(n)] = true;
    for (int32_t n : head.backward_nodes) removed[static_cast<size_t>(n)] = true;
    for (auto [at, node] : {std::pair{head.loss_at, &forward}, std::pair{head.first_backward, &backward}}) {
      removed[static_cast<size_t>(at)] = false;
      for (size_t k = 0; k < node->outputs.size(); ++k)
        graph.values[static_cast<size_t>(node->outputs[k])].output_index = static_cast<int32_t>(k);
      graph.nodes[static_cast<size_t>(at)] = std::move(*node);
    }
    drop_nodes(graph, removed);
    drop_dead_backward_views(graph);
    ++fused;
  }
  if (fused > 0)
    log_line("fusion", std::to_string(fused) + " LM head(s) (linear -> cross_entropy) as linear_cross_entropy with "
                                                "gradients in the forward");
  return fused;
}

}  // namespace tg::graphs
