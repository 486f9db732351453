// The CUDA launcher of multi_tensor_norm: one launch computes per-chunk partials of every tensor (up
// to 256 tensors a launch), a second reduces each tensor's partials to its norm.
#pragma once

#include "tensor/tensor.h"

namespace tg::cuda {

// Writes the norm of order ord (1, 2 or +inf) of each of `tensors` (contiguous, on out's device) to
// out[i] (float32 or float64, validated by the op).
void multi_tensor_norm(const TensorList& tensors, double ord, const Tensor& out);

}  // namespace tg::cuda
