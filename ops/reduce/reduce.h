// Reductions over all dims or chosen dims, with keepdim.
#pragma once

#include <optional>

#include "tensor/tensor.h"

namespace tg {

// Sum over `dims` (all when empty); ints and bools sum to int64 unless dtype is given.
Tensor sum(const Tensor& x, const Shape& dims = {}, bool keepdim = false, std::optional<DType> dtype = {});
Tensor mean(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor amax(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
// Index (int64) of the first maximum, over all elements flattened or along `dim`.
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = {}, bool keepdim = false);
Tensor var(const Tensor& x, const Shape& dims = {}, int64_t correction = 1, bool keepdim = false);
// Sums a broadcast gradient back down to `sizes` (the reverse of expand).
Tensor sum_to(const Tensor& x, const Shape& sizes);

}  // namespace tg
