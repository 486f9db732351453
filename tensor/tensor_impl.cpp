#include "tensor/tensor_impl.h"

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

AutogradMeta& TensorImpl::autograd() {
  if (!autograd_) autograd_ = std::make_unique<AutogradMeta>();
  return *autograd_;
}

}  // namespace tg
