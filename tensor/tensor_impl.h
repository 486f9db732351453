// The state behind a Tensor handle: storage, geometry, dtype, and autograd metadata.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/memory/storage.h"
#include "tensor/shape.h"

namespace tg {

class Node;
class TensorImpl;
class Tensor;
class GradReducer;

// A gradient hook: sees the incoming gradient and may return a replacement (or an undefined tensor).
using GradHook = std::function<Tensor(const Tensor&)>;
// Runs after a leaf's .grad has been updated (PyTorch's post-accumulate-grad hook); sees the leaf.
using PostAccumulateGradHook = std::function<void(const Tensor&)>;

// Autograd state, created only for tensors that take part in differentiation.
struct AutogradMeta {
  bool requires_grad = false;
  bool retains_grad = false;
  std::shared_ptr<TensorImpl> grad;        // accumulated gradient (leaves, or retain_grad)
  std::shared_ptr<Node> grad_fn;           // the node that produced this tensor; null for leaves
  uint32_t output_nr = 0;                  // which output of grad_fn this tensor is
  std::weak_ptr<Node> grad_accumulator;    // leaves: the node that accumulates into grad
  std::vector<GradHook> hooks;             // leaves: run before accumulation
  std::vector<PostAccumulateGradHook> post_accumulate_hooks;  // leaves: run after accumulation
  std::shared_ptr<GradReducer> grad_reducer;  // leaves: reduces the gradient across processes (data parallel)
  // Views: the storage version grad_fn was derived at. A later write into the storage (through the
  // base or another view) makes gradient_edge() derive it again from the base's new history.
  uint64_t view_version = 0;
};

// Destroys an AutogradMeta that TensorImpl::autograd() made in the CPU allocator's small blocks.
struct AutogradMetaDelete {
  void operator()(AutogradMeta* meta) const noexcept;
};

// Geometry and data of a tensor; several TensorImpls share one StorageImpl when they are views.
class TensorImpl {
 public:
  TensorImpl(Storage storage, Shape sizes, Shape strides, int64_t offset, DType dtype);

  const Storage& storage() const { return storage_; }
  const Shape& sizes() const { return sizes_; }
  const Shape& strides() const { return strides_; }
  int64_t storage_offset() const { return offset_; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_->device(); }
  int64_t dim() const { return static_cast<int64_t>(sizes_.size()); }
  int64_t numel() const { return numel_; }
  bool is_contiguous() const { return contiguous_; }
  // Address of the first element (storage data plus offset); null for fake/meta tensors.
  void* data() const;

  // Replaces storage and geometry in place (set_, resize_); the handle's identity is kept.
  void set_geometry(Storage storage, Shape sizes, Shape strides, int64_t offset);
  // As set_geometry, over storage holding elements of `dtype` (converting a module's tensors in place).
  void set_typed_geometry(DType dtype, Storage storage, Shape sizes, Shape strides, int64_t offset);

  // Autograd metadata; created on first use.
  AutogradMeta& autograd();
  AutogradMeta* autograd_if_present() const { return autograd_.get(); }

  // The tensor this one is a view of (the root base, never itself a view); null when not a view.
  const std::shared_ptr<TensorImpl>& view_base() const { return view_base_; }
  void set_view_base(std::shared_ptr<TensorImpl> base) { view_base_ = std::move(base); }

 private:
  Storage storage_;
  Shape sizes_;
  Shape strides_;
  int64_t offset_ = 0;
  int64_t numel_ = 1;
  DType dtype_;
  bool contiguous_ = true;
  std::unique_ptr<AutogradMeta, AutogradMetaDelete> autograd_;
  std::shared_ptr<TensorImpl> view_base_;
};

}  // namespace tg
