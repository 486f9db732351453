#include "graphs/capture/fake.h"

namespace tg::graphs {

Tensor fake_tensor(const TensorMeta& meta, bool requires_grad) {
  const int64_t span = storage_span(meta.sizes, meta.strides);
  const int64_t nbytes = span == 0 ? 0 : (meta.offset + span) * dtype_size(meta.dtype);
  auto storage = std::make_shared<StorageImpl>(meta.device, nbytes, /*fake=*/true);
  Tensor t(std::make_shared<TensorImpl>(storage, meta.sizes, meta.strides, meta.offset, meta.dtype));
  if (requires_grad) t.requires_grad_(true);
  return t;
}

Tensor fake_tensor(const Shape& sizes, DType dtype, Device device, bool requires_grad) {
  return fake_tensor(TensorMeta{sizes, contiguous_strides(sizes), 0, dtype, device}, requires_grad);
}

}  // namespace tg::graphs
