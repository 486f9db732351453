// The backward products of linear layers with what follows them fused in, as compiled graphs
// substitute them on CUDA (each is one cuBLASLt kernel there; separate kernels elsewhere):
// - the input-side gradient through an activation, with the bias gradient of the layer below
//   (cuBLASLt's DRELU_BGRAD epilogue for ReLU; the GELU's runs as separate kernels, since
//   DGELU_BGRAD loses the tanh's far negative tail);
// - a layer's weight gradient with its bias gradient (BGRADB).
#pragma once

#include <utility>

#include "ops/core/op.h"
#include "tensor/tensor.h"

namespace tg {

// h = threshold_backward(g @ w, y) and db = h summed over rows, for g [n, k], w [k, m] and the
// ReLU's output y [n, m] with its mask (relu_mask_of(y), which the cuBLASLt epilogue reads).
std::pair<Tensor, Tensor> mm_relu_backward_bias_grad(const Tensor& g, const Tensor& w, const Tensor& y,
                                                     const Tensor& mask);
// h = gelu_backward(g @ w, pre, tanh) and db = h summed over rows, for the tanh GELU's input pre.
std::pair<Tensor, Tensor> mm_gelu_tanh_backward_bias_grad(const Tensor& g, const Tensor& w, const Tensor& pre);
// (g^T @ x, g summed over rows): the weight and bias gradients of linear from its output gradient g
// [n, out] and input x [n, in].
std::pair<Tensor, Tensor> linear_weight_bias_grad(const Tensor& g, const Tensor& x);

// The ops above, for graph rewrites.
OpPtr mm_relu_backward_bias_grad_op();
OpPtr mm_gelu_tanh_backward_bias_grad_op();
OpPtr linear_weight_bias_grad_op();

}  // namespace tg
