// CUDA launchers for softmax, log_softmax and their backward kernels (one kernel per call).
#pragma once

#include <cstdint>

#include "ops/norm/softmax_rows.h"
#include "tensor/tensor.h"

namespace tg::cuda {

// out = mode applied along `dim` (see SoftmaxMode); b is undefined for the forward modes.
// Inputs may be strided; out is contiguous with the inputs' sizes.
void softmax_rows(SoftmaxMode mode, const Tensor& a, const Tensor& b, int64_t dim, Tensor& out);

}  // namespace tg::cuda
