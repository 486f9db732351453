// CUDA launchers for softmax, log_softmax and their backward kernels (one kernel per call).
#pragma once

#include <cstdint>

#include "ops/norm/softmax_rows.h"
#include "tensor/tensor.h"

namespace tg::cuda {

// The forward modes' kernels are instantiated in softmax_forward.cu, the backward ones' in
// softmax_backward.cu.
void softmax_forward_rows(const Tensor& a, int64_t dim, Tensor& out);
void log_softmax_forward_rows(const Tensor& a, int64_t dim, Tensor& out);
void softmax_backward_rows(const Tensor& a, const Tensor& b, int64_t dim, Tensor& out);
void log_softmax_backward_rows(const Tensor& a, const Tensor& b, int64_t dim, Tensor& out);

// out = mode applied along `dim` (see SoftmaxMode); b is undefined for the forward modes.
// Inputs may be strided; out is contiguous with the inputs' sizes.
inline void softmax_rows(SoftmaxMode mode, const Tensor& a, const Tensor& b, int64_t dim, Tensor& out) {
  switch (mode) {
    case SoftmaxMode::Softmax: return softmax_forward_rows(a, dim, out);
    case SoftmaxMode::LogSoftmax: return log_softmax_forward_rows(a, dim, out);
    case SoftmaxMode::SoftmaxBackward: return softmax_backward_rows(a, b, dim, out);
    case SoftmaxMode::LogSoftmaxBackward: return log_softmax_backward_rows(a, b, dim, out);
  }
}

}  // namespace tg::cuda
