// Splitting a tensor into views along one dim: split, split_with_sizes, chunk, unbind.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace tg {

// Views of consecutive pieces of `sizes[i]` elements along `dim`; the sizes must sum to x.size(dim).
TensorList split_with_sizes(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
// Views of pieces of `split_size` elements along `dim` (the last one may be smaller).
TensorList split(const Tensor& x, int64_t split_size, int64_t dim = 0);
// At most `chunks` views of ceil(size / chunks) elements along `dim`, as torch.chunk.
TensorList chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
// The size(dim) slices of x with `dim` removed (views).
TensorList unbind(const Tensor& x, int64_t dim = 0);

}  // namespace tg
