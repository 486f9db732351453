// CUDA launchers for softmax, log_softmax and their backward kernels (one kernel per call).
#pragma once

#include <cstdint>

#include "ops/norm/softmax_rows.h"
#include "tensor/tensor.h"

namespace tg::cuda {

// out = softmax or log_softmax of `a` along `dim` (softmax_forward.cu).
void softmax_forward_rows(SoftmaxMode mode, const Tensor& a, int64_t dim, Tensor& out);
// out = the backward mode applied to a and b along `dim` (softmax_backward.cu).
void softmax_backward_rows(SoftmaxMode mode, const Tensor& a, const Tensor& b, int64_t dim, Tensor& out);

// out = mode applied along `dim` (see SoftmaxMode); b is undefined for the forward modes.
// Inputs may be strided; out is contiguous with the inputs' sizes.
inline void softmax_rows(SoftmaxMode mode, const Tensor& a, const Tensor& b, int64_t dim, Tensor& out) {
  if (mode == SoftmaxMode::Softmax || mode == SoftmaxMode::LogSoftmax) {
    softmax_forward_rows(mode, a, dim, out);
  } else {
    softmax_backward_rows(mode, a, b, dim, out);
  }
}

}  // namespace tg::cuda
