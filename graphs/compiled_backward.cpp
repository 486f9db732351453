#include "graphs/compiled_backward.h"

#include "autograd/grad_mode.h"
#include "ops/factory.h"

namespace tg::graphs {

CompiledBackward::CompiledBackward(Runner runner, TensorList saved, std::vector<TensorMeta> tangent_metas,
                                   std::shared_ptr<void> pending)
    : runner_(std::move(runner)), saved_(std::move(saved)), pending_(std::move(pending)) {
  output_metas() = std::move(tangent_metas);
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
  for (size_t i = 0; i < grad_outputs.size(); ++i) {
    const TensorMeta& m = output_metas()[i];
    Tensor g = grad_outputs[i];
    if (!g.defined()) g = zeros(m.sizes, {.dtype = m.dtype, .device = m.device});
    tangents.push_back(g.is_contiguous() ? g : g.contiguous());
  }
  if (!hand_over_saved_) return runner_(saved_, tangents);
  // The graph is not kept: the backward graph owns the saved values and frees each after its last
  // reader, as eager autograd frees a node's saved tensors once it has run.
  hand_over_saved_ = false;
  released_ = true;
  return runner_(std::move(saved_), tangents);
}

void CompiledBackward::release_saved() {
  saved_.clear();
  pending_.reset();
  released_ = true;
}

}  // namespace tg::graphs
