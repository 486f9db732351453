#include "autograd/view_rebase.h"

#include "ops/core/dispatch.h"
#include "ops/factory/factory.h"
#include "ops/shape/view.h"
#include "tensor/grad_mode.h"

namespace tg {

CopySlices::CopySlices(const Tensor& base, const Tensor& view, std::shared_ptr<Node> fn, int mutated_input)
    : base_(meta_of(base)), view_(meta_of(view)), fn_(std::move(fn)), mutated_(static_cast<size_t>(mutated_input)) {
  output_metas().push_back(base_);
  auto& edges = mutable_next_edges();
  edges = fn_->next_edges();
  edges[mutated_] = base.requires_grad() ? gradient_edge(base) : Edge{};
}

TensorList CopySlices::apply(TensorList&& grad_outputs) {
  const Tensor& grad = grad_outputs.at(0);
  // No gradient reached the base (a later write overwrote all of it): none flows on.
  if (!grad.defined()) return TensorList(next_edges().size());
  // A gradient buffer laid out like the base, so the view's strides address the same elements.
  Tensor result = empty_strided(base_.sizes, base_.strides, {.dtype = grad.dtype(), .device = grad.device()});
  result.copy_(grad);
  Tensor grad_slice = result.as_strided(view_.sizes, view_.strides, view_.offset - base_.offset);
  TensorList fn_grads = fn_->apply({grad_slice.clone()});
  if (fn_grads[mutated_].defined()) {
    grad_slice.copy_(fn_grads[mutated_]);
  } else {
    grad_slice.zero_();
  }
  fn_grads[mutated_] = result;
  return fn_grads;
}

void rebase_history(const Tensor& target, const std::shared_ptr<OpNode>& node) {
  rebase_history(target, node, node->op()->schema().mutates);
}

void rebase_history(const Tensor& target, const std::shared_ptr<Node>& node, int mutated_input) {
  const auto& base_impl = target.impl()->view_base();
  if (!base_impl) {
    AutogradMeta& meta = target.impl()->autograd();
    meta.grad_fn = node;
    meta.output_nr = 0;
    return;
  }
  Tensor base(base_impl);
  auto copy_slices = std::make_shared<CopySlices>(base, target, node, mutated_input);
  AutogradMeta& base_meta = base_impl->autograd();
  base_meta.grad_fn = copy_slices;
  base_meta.output_nr = 0;
  // Re-derive the view from the base's new history so later uses of the view see the write.
  regenerate_view_history(target);
}

void regenerate_view_history(const Tensor& view) {
  TensorImpl* impl = view.impl();
  AutogradMeta& meta = impl->autograd();
  meta.view_version = impl->storage()->version();
  const Tensor base(impl->view_base());
  if (!base.requires_grad()) return;
  // Only the node matters here: the tracer need not see this as_strided, whose output is dropped.
  GradModeGuard grad(true);
  OpObserverGuard no_observer(nullptr);
  const Tensor regenerated = base.as_strided(view.sizes(), view.strides(), view.storage_offset());
  meta.grad_fn = regenerated.grad_fn();
  meta.output_nr = 0;
}

}  // namespace tg
