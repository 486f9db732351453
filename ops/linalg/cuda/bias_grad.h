// CUDA launchers of the fused activation backwards with their bias gradients (compiled graphs' fusions).
#pragma once

#include "tensor/tensor.h"

namespace tg::cuda {

// h = g * (y > 0) and db[j] = sum_i h[i, j] for contiguous g, y, h of [rows, cols] and db of [cols],
// in one kernel (the column sums of column_sum.cuh: the same sums on every run).
void relu_backward_bias_grad(const Tensor& g, const Tensor& y, Tensor& h, Tensor& db);
// h = gelu_backward(g, x) (tanh approximation) and db its column sums, likewise, in one kernel.
void gelu_tanh_backward_bias_grad(const Tensor& g, const Tensor& x, Tensor& h, Tensor& db);

}  // namespace tg::cuda
