// See Note [CUDA graph executor] in docs/cudagraph_executor.md.
#include "graphs/runtime/compiled_backward.h"

#include "graphs/runtime/cudagraph_step.h"
#include "ops/factory/factory.h"
#include "tensor/grad_mode.h"
#include "tensor/shape.h"
#include "tensor/tensor_impl.h"

namespace tg::graphs {

Tensor UnitTangents::get(size_t k, const TensorMeta& meta) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ones_.size() <= k) {
    ones_.resize(k + 1);
    versions_.resize(k + 1);
  }
  Tensor& t = ones_[k];
  if (!t.defined() || t.version() != versions_[k]) {
    NoGradGuard no_grad;
    t = ones(meta.sizes, {.dtype = meta.dtype, .device = meta.device});
    mark_static_address(t);
    versions_[k] = t.version();
  }
  return t;
}

bool UnitTangents::holds(const Tensor& t) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Tensor& one : ones_)
    if (one.defined() && one.impl()->storage() == t.impl()->storage()) return true;
  return false;
}

CompiledBackward::CompiledBackward(Runner runner, TensorList saved, std::vector<TensorMeta> tangent_metas,
                                   std::shared_ptr<void> pending, std::shared_ptr<UnitTangents> units)
    : runner_(std::move(runner)), saved_(std::move(saved)), pending_(std::move(pending)), units_(std::move(units)) {
  output_metas() = std::move(tangent_metas);
}

Tensor CompiledBackward::implicit_root_gradient(uint32_t output_nr) {
  if (!units_ || output_nr >= output_metas().size()) return Tensor();
  const TensorMeta& meta = output_metas()[output_nr];
  if (shape_numel(meta.sizes) != 1) return Tensor();
  return units_->get(output_nr, meta);
}

namespace {

// Stands where a compiled backward's results would need their own backward: refuses it.
class RefuseDoubleBackward final : public Node {
 public:
  TensorList apply(TensorList&&) override { throw DoubleBackwardError(); }
  std::string name() const override { return "CompiledFunctionBackwardBackward"; }
};

}  // namespace

TensorList CompiledBackward::apply(TensorList&& grad_outputs) {
  if (is_grad_enabled()) {
    // create_graph: the gradients are computed, but differentiating them again is refused.
    TensorList grads;
    {
      NoGradGuard no_grad;
      grads = apply(std::move(grad_outputs));
    }
    auto refuse = std::make_shared<RefuseDoubleBackward>();
    refuse->mutable_next_edges() = next_edges();  // so the engine sees the inputs it would lead to
    for (size_t i = 0; i < grads.size(); ++i) {
      if (!grads[i].defined()) continue;
      refuse->output_metas().push_back(meta_of(grads[i]));
      AutogradMeta& meta = grads[i].impl()->autograd();
      meta.grad_fn = refuse;
      meta.output_nr = static_cast<uint32_t>(refuse->output_metas().size() - 1);
    }
    return grads;
  }
  TG_CHECK(!released_, "Trying to backward through the graph a second time (or directly access saved tensors after "
           "they have already been freed). Saved intermediate values of the graph are freed when you call "
           ".backward() or autograd.grad(). Specify retain_graph=true if you need to backward through the graph a "
           "second time.");
  TensorList tangents;
  tangents.reserve(grad_outputs.size());
  bool unit_given = false;
  for (size_t i = 0; i < grad_outputs.size(); ++i) {
    const TensorMeta& m = output_metas()[i];
    Tensor g = grad_outputs[i];
    if (!g.defined()) g = zeros(m.sizes, {.dtype = m.dtype, .device = m.device});
    unit_given = unit_given || (units_ && units_->holds(g));
    tangents.push_back(g.is_contiguous() ? g : g.contiguous());
  }
  TensorList grads;
  if (!hand_over_saved_) {
    grads = runner_(saved_, tangents);
  } else {
    // The graph is not kept: the backward graph owns the saved values and frees each after its last
    // reader, as eager autograd frees a node's saved tensors once it has run.
    hand_over_saved_ = false;
    released_ = true;
    grads = runner_(std::move(saved_), tangents);
  }
  // A gradient that is a unit tangent passed through leaves as a copy: the 1 stays read-only.
  if (unit_given)
    for (Tensor& g : grads)
      if (g.defined() && units_->holds(g)) g = g.clone();
  return grads;
}

void CompiledBackward::release_saved() {
  saved_.clear();
  pending_.reset();
  released_ = true;
}

}  // namespace tg::graphs
