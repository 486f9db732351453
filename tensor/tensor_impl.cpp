#include "tensor/tensor_impl.h"

#include <new>

#include "tensor/memory/cpu_allocator.h"

namespace tg {

TensorImpl::TensorImpl(Storage storage, Shape sizes, Shape strides, int64_t offset, DType dtype)
    : dtype_(dtype) {
  set_geometry(std::move(storage), std::move(sizes), std::move(strides), offset);
}

void* TensorImpl::data() const {
  if (storage_->is_stale()) [[unlikely]] storage_->throw_stale();
  if (storage_->is_fake() || storage_->data() == nullptr) return nullptr;
  return static_cast<char*>(storage_->data()) + offset_ * dtype_size(dtype_);
}

void TensorImpl::set_typed_geometry(DType dtype, Storage storage, Shape sizes, Shape strides, int64_t offset) {
  dtype_ = dtype;
  set_geometry(std::move(storage), std::move(sizes), std::move(strides), offset);
}

void TensorImpl::set_geometry(Storage storage, Shape sizes, Shape strides, int64_t offset) {
  storage_ = std::move(storage);
  sizes_ = std::move(sizes);
  strides_ = std::move(strides);
  offset_ = offset;
  numel_ = shape_numel(sizes_);
  contiguous_ = is_contiguous_layout(sizes_, strides_);
}

void AutogradMetaDelete::operator()(AutogradMeta* meta) const noexcept {
  meta->~AutogradMeta();
  host_deallocate(meta, sizeof(AutogradMeta));
}

AutogradMeta& TensorImpl::autograd() {
  // Every output that joins the tape gets one: a small block from the allocator's cache, not malloc.
  if (!autograd_) autograd_.reset(new (host_allocate(sizeof(AutogradMeta))) AutogradMeta());
  return *autograd_;
}

}  // namespace tg
