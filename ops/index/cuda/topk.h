// CUDA launcher for topk; defined in topk.cu.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace tg::cuda {

// Writes the k preferred elements of each row of `x` along `dim` (order of ops/index/topk_key.h) into
// `values` (skipped when undefined) and their positions into the int64 `indices`; both shaped like
// `x` with size k at `dim`, any strides. Never synchronizes; temporaries come from the allocator.
void topk(const Tensor& x, int64_t k, int64_t dim, bool largest, const Tensor& values, const Tensor& indices);

}  // namespace tg::cuda
