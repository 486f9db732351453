// Gathering and scatter-adding along one dim by an index tensor of the input's rank.
#pragma once

#include "tensor/tensor.h"

namespace tg {

// out[i][j][k] = x[i][index[i][j][k]][k] (for dim = 1); out has index's shape.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// x with src[i][j][k] added at x[i][index[i][j][k]][k] (for dim = 1), duplicates accumulating.
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);

}  // namespace tg
