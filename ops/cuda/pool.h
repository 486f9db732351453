// CUDA launchers for 2-D pooling and the average-pooling backward.
#pragma once

#include "ops/pool_geometry.h"
#include "tensor/tensor.h"

namespace tg::cuda {

// out (contiguous [N, C, OH, OW]) = pooled input; for Max also indices (int64, flat h * W + w).
void pool2d_forward(const PoolGeometry& g, const Tensor& input, Tensor& out, Tensor* indices);
// grad_input (contiguous [N, C, H, W]) = each output gradient spread over its averaging window / divisor.
void avg_pool2d_backward(const PoolGeometry& g, const Tensor& grad, Tensor& grad_input);

}  // namespace tg::cuda
