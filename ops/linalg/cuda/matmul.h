// CUDA kernels around the cuBLAS products: writing the (broadcast) bias of addmm and linear.
#pragma once

#include <cstdint>

#include "ops/linalg/gemm.h"

namespace tg::cuda {

// Writes beta * bias (zeros when bias.data is null) into the contiguous [n, m] matrix `out` on
// `device`, on the current stream; a following gemm with beta = 1 then adds the product.
void fill_bias(int device, DType dtype, void* out, int64_t n, int64_t m, const BiasRef& bias, double beta);

}  // namespace tg::cuda
