// CUDA launchers for pooling over 1, 2 or 3 spatial dims and the average-pooling backward.
#pragma once

#include "ops/conv/pool_geometry.h"
#include "tensor/tensor.h"

namespace tg::cuda {

// out (contiguous [N, C, *out]) = pooled input; for Max also indices (int64, flat in the input plane).
void pool_forward(const PoolGeometry& g, const Tensor& input, Tensor& out, Tensor* indices);
// grad_input (contiguous [N, C, *in]) = each output gradient spread over its averaging window / divisor.
void avg_pool_backward(const PoolGeometry& g, const Tensor& grad, Tensor& grad_input);

}  // namespace tg::cuda
