#include "autograd/op_node.h"

#include <algorithm>

#include "autograd/view_rebase.h"
#include "ops/factory/factory.h"
#include "tensor/grad_mode.h"

namespace tg {

// Exposes an OpNode's saved state to Op::backward().
class OpNodeContext final : public BackwardContext {
 public:
  OpNodeContext(const OpNode& node, std::shared_ptr<Node> self) : node_(node), self_(std::move(self)) {}
  Tensor input(size_t i) const override {
    TG_CHECK(i < node_.saved_inputs_.size(), "[", node_.op_->name(), "] backward read input ", i,
             ", but the op's SaveSpec did not save inputs");
    return node_.saved_inputs_[i].unpack(self_, "an input");
  }
  Tensor output(size_t i) const override {
    TG_CHECK(i < node_.saved_outputs_.size(), "[", node_.op_->name(), "] backward read output ", i,
             ", but the op's SaveSpec did not save outputs");
    return node_.saved_outputs_[i].unpack(self_, "an output");
  }
  const TensorMeta& input_meta(size_t i) const override { return node_.input_metas_.at(i); }
  bool needs_input_grad(size_t i) const override { return node_.next_edges().at(i).valid(); }

 private:
  const OpNode& node_;
  std::shared_ptr<Node> self_;
};

OpNode::OpNode(OpPtr op, const TensorList& inputs) : op_(std::move(op)) {
  input_metas_.reserve(inputs.size());
  auto& edges = mutable_next_edges();
  edges.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    input_metas_.push_back(meta_of(t));
    edges.push_back(t.requires_grad() ? gradient_edge(t) : Edge{});
  }
}

void OpNode::save_inputs(const TensorList& inputs) {
  const SaveSpec spec = op_->saves();
  if (!spec.inputs) return;
  saved_inputs_.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i < 32 && (spec.input_mask >> i & 1u)) saved_inputs_.emplace_back(inputs[i], false);
    else saved_inputs_.emplace_back();
  }
}

void OpNode::save_outputs(const TensorList& outputs) {
  const SaveSpec spec = op_->saves();
  if (!spec.outputs) return;
  saved_outputs_.reserve(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i)
    saved_outputs_.push_back(i < 32 && (spec.output_mask >> i & 1u) ? SavedTensor(outputs[i], true) : SavedTensor());
}

TensorList OpNode::apply(TensorList&& grad_outputs) {
  // A node none of whose outputs received a gradient passes none on (PyTorch's generated backward
  // functions return undefined gradients unless any_grad_defined): a compiled function's backward
  // hands an undefined gradient to an input it does not depend on, and zeros made here would give
  // that input's leaves a gradient eager mode leaves undefined.
  if (std::none_of(grad_outputs.begin(), grad_outputs.end(), [](const Tensor& g) { return g.defined(); }))
    return TensorList(input_metas_.size());
  // Outputs that received no gradient count as zero.
  for (size_t i = 0; i < grad_outputs.size() && op_->needs_zero_filled_grads(); ++i) {
    if (!grad_outputs[i].defined()) {
      const TensorMeta& m = output_metas()[i];
      grad_outputs[i] = zeros(m.sizes, {.dtype = m.dtype, .device = m.device});
    }
  }
  OpNodeContext ctx(*this, shared_from_this());
  TensorList grads = op_->backward(ctx, grad_outputs);
  TG_CHECK(grads.size() == input_metas_.size(), "Function ", name(), " returned an incorrect number of gradients (expected ",
           input_metas_.size(), ", got ", grads.size(), ")");
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined() || !next_edges()[i].valid()) continue;
    TG_CHECK(grads[i].sizes() == input_metas_[i].sizes, "Function ", name(),
             " returned an invalid gradient at index ", i, " - got ", shape_str(grads[i].sizes()),
             " but expected shape compatible with ", shape_str(input_metas_[i].sizes));
  }
  return grads;
}

std::string OpNode::name() const {
  std::string n(op_->name());
  std::string out;
  bool upper = true;
  for (char c : n) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return out + "Backward0";
}

void OpNode::release_saved() {
  for (auto& s : saved_inputs_) s.release();
  for (auto& s : saved_outputs_) s.release();
}

AccumulateGrad::AccumulateGrad(const std::shared_ptr<TensorImpl>& leaf) : leaf_(leaf) {
  output_metas().push_back(meta_of(Tensor(leaf)));
}

TensorList AccumulateGrad::apply(TensorList&& grad_outputs) {
  std::shared_ptr<TensorImpl> leaf = leaf_.lock();
  Tensor g = std::move(grad_outputs.at(0));
  if (!leaf || !g.defined()) return {};
  AutogradMeta& meta = leaf->autograd();
  for (const GradHook& hook : meta.hooks) {
    Tensor replaced = hook(g);
    if (replaced.defined()) g = replaced;
  }
  if (!meta.grad) {
    // Take the incoming buffer when nobody else holds it; otherwise keep a private copy.
    const bool stealable = g.impl_ptr().use_count() == 1 && g.is_contiguous() && !g.requires_grad();
    Tensor stored = is_grad_enabled() ? g : (stealable ? g : g.detach().clone());
    meta.grad = stored.impl_ptr();
  } else if (is_grad_enabled()) {
    meta.grad = (Tensor(meta.grad) + g).impl_ptr();
  } else {
    Tensor acc(meta.grad);
    acc.add_(g);
  }
  if (!meta.post_accumulate_hooks.empty()) {
    const Tensor leaf_tensor(leaf);
    for (const PostAccumulateGradHook& hook : meta.post_accumulate_hooks) hook(leaf_tensor);
  }
  return {};
}

Edge gradient_edge(const Tensor& t) {
  TensorImpl* impl = t.impl();
  AutogradMeta& meta = impl->autograd();
  if (meta.grad_fn && impl->view_base() && meta.view_version != impl->storage()->version()) regenerate_view_history(t);
  if (meta.grad_fn) return Edge{meta.grad_fn, meta.output_nr};
  std::shared_ptr<Node> acc = meta.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    meta.grad_accumulator = acc;
  }
  return Edge{acc, 0};
}

}  // namespace tg
