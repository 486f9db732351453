// Fused backward ops of compiled graphs: an activation's gradient (ReLU, tanh GELU) together with
// the bias gradient of the layer under it, so the gradient is summed while it is written.
#pragma once

#include <utility>

#include "ops/core/op.h"
#include "tensor/tensor.h"

namespace tg {

// (h, db) with h = threshold_backward(g, y) = g * (y > 0) and db = h summed over every dimension but
// the last; one kernel on CUDA. g and y share their shape (at least 1-D) and floating dtype.
std::pair<Tensor, Tensor> relu_backward_bias_grad(const Tensor& g, const Tensor& y);
// The op of relu_backward_bias_grad (the graph fusion pass builds nodes from it).
OpPtr relu_backward_bias_grad_op();

// (h, db) with h = gelu_backward(g, x, tanh approximation) and db = h summed over every dimension
// but the last; one kernel on CUDA, the same bits as the two ops. g and x as above.
std::pair<Tensor, Tensor> gelu_tanh_backward_bias_grad(const Tensor& g, const Tensor& x);
// The op of gelu_tanh_backward_bias_grad.
OpPtr gelu_tanh_backward_bias_grad_op();

}  // namespace tg
