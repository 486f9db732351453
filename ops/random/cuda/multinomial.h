// CUDA launcher for multinomial; defined in multinomial.cu.
#pragma once

#include <cstdint>

#include "ops/random/random.h"
#include "tensor/tensor.h"

namespace tg::cuda {

// Fills `out` (contiguous int64, [num_samples] or [rows, num_samples]) with draws from the rows of
// `weights` (1-D or 2-D, any strides) under `state`, following ops/random/multinomial_draw.h. Bad weights
// are reported through the device error record instead of a synchronization.
void multinomial(const Tensor& weights, int64_t num_samples, bool replacement, PhiloxState state, const Tensor& out);

}  // namespace tg::cuda
