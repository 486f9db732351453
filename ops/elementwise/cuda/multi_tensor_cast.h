// The CUDA kernel of multi_tensor_cast (ops/elementwise/copy.h).
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace tg::cuda {

// Casts in[i] into out[i] (same sizes, contiguous) for every pair it takes: contiguous float32
// sources into 16-bit outputs and contiguous 16-bit sources into float32, 16-byte aligned, one launch
// per source dtype and up to 128 tensors. Returns which pairs it cast; the caller copies the rest.
std::vector<bool> multi_tensor_cast(const TensorList& in, const TensorList& out);

}  // namespace tg::cuda
