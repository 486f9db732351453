// Data-less tensors on any device: what tracing runs on, and what tests use to trace CUDA graphs
// on machines without a GPU.
#pragma once

#include "tensor/tensor.h"
#include "tensor/tensor_meta.h"

namespace tg::graphs {

// A tensor with `meta`'s sizes, strides, dtype and device whose storage holds no data.
Tensor fake_tensor(const TensorMeta& meta, bool requires_grad = false);
// A contiguous data-less tensor.
Tensor fake_tensor(const Shape& sizes, DType dtype, Device device, bool requires_grad = false);

}  // namespace tg::graphs
