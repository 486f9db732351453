#include "autograd/saved_tensor.h"

#include "autograd/checkpoint_frame.h"
#include "autograd/node.h"

namespace tg {

SavedTensor::SavedTensor(const Tensor& t, bool is_output) : is_output_(is_output) {
  if (!t.defined()) return;
  if (std::shared_ptr<CheckpointFrame> frame = checkpoint_hooks::packing_frame()) {
    place_ = checkpoint_hooks::reserve(*frame);
    frame_ = std::move(frame);
    return;
  }
  save(t);
  checkpoint_hooks::record(*this);
}

void SavedTensor::save(const Tensor& t) {
  const bool is_output = is_output_;
  version_ = t.version();
  if (!is_output && t.is_leaf() && t.requires_grad()) {
    data_ = t;  // a leaf that requires grad keeps its identity: its gradient accumulates into it
    return;
  }
  if (!is_output) {
    // Any other input keeps the data and the history it had when saved, not the live tensor: the
    // tensor (or a view's base) can later take a history from an in-place write that leads back to
    // the node saving it, and holding it would close a reference cycle.
    const TensorImpl& src = *t.impl();
    data_ = Tensor(std::make_shared<TensorImpl>(src.storage(), src.sizes(), src.strides(), src.storage_offset(),
                                                src.dtype()));
    grad_fn_ = t.grad_fn();
    requires_grad_ = t.requires_grad();
    output_nr_ = t.output_nr();
    return;
  }
  // Keep the data and geometry but not the autograd link back to the owning node.
  const TensorImpl& src = *t.impl();
  data_ = Tensor(std::make_shared<TensorImpl>(src.storage(), src.sizes(), src.strides(), src.storage_offset(),
                                              src.dtype()));
  requires_grad_ = t.requires_grad();
  output_nr_ = t.output_nr();
}

void SavedTensor::release() {
  if (frame_) checkpoint_hooks::release(*frame_, place_);
  frame_.reset();
  data_ = Tensor();
  grad_fn_.reset();
  released_ = true;
}

Tensor SavedTensor::unpack(const std::shared_ptr<Node>& owner, const char* what) const {
  TG_CHECK(!released_,
           "Trying to backward through the graph a second time (or directly access saved tensors after they "
           "have already been freed). Saved intermediate values of the graph are freed when you call "
           ".backward() or autograd.grad(). Specify retain_graph=true if you need to backward through the "
           "graph a second time or if you need to access saved tensors after calling backward.");
  if (frame_) return checkpoint_hooks::recomputed(*frame_, place_).unpack(owner, what);
  if (!data_.defined()) return data_;
  TG_CHECK(data_.version() == version_,
           "one of the variables needed for gradient computation has been modified by an inplace operation: [",
           dtype_name(data_.dtype()), shape_str(data_.sizes()), "], which is ", what, " of ",
           owner ? owner->name() : std::string("a node"), ", is at version ", data_.version(),
           "; expected version ", version_, " instead.");
  if (!requires_grad_) return data_;
  // Re-link the saved tensor to its producer (the owner, for an output) so double backward can
  // differentiate through it.
  const TensorImpl& src = *data_.impl();
  auto impl = std::make_shared<TensorImpl>(src.storage(), src.sizes(), src.strides(), src.storage_offset(),
                                           src.dtype());
  AutogradMeta& meta = impl->autograd();
  meta.requires_grad = true;
  meta.grad_fn = is_output_ ? owner : grad_fn_;
  meta.output_nr = output_nr_;
  return Tensor(std::move(impl));
}

}  // namespace tg
