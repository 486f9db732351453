// Masked writes: tril/triu (keep a triangle of the last two dims) and masked_fill.
#pragma once

#include "tensor/tensor.h"

namespace tg {

// Lower triangle of the last two dims (elements with col - row <= diagonal), zeros elsewhere.
Tensor tril(const Tensor& x, int64_t diagonal = 0);
// Upper triangle of the last two dims (elements with col - row >= diagonal), zeros elsewhere.
Tensor triu(const Tensor& x, int64_t diagonal = 0);
// x with `value` where the bool `mask` (broadcast to x's shape) is true.
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value);
// The bool [rows, cols] mask of col - row <= diagonal (lower) or >= diagonal (upper) on `device`.
Tensor triangle_mask(int64_t rows, int64_t cols, int64_t diagonal, bool lower, Device device);

}  // namespace tg
