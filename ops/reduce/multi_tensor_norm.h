// The norms of many tensors in one op: what gradient clipping reduces, one launch for all of them
// on CUDA instead of a few per tensor.
#pragma once

#include "tensor/tensor.h"

namespace tg {

// [n]: the vector norm of order `ord` (1, 2 or +inf) of each of the n tensors, as
// stack([linalg.vector_norm(t, ord) for t in tensors]) (torch._foreach_norm's values), accumulated in
// float32 (float64 when a tensor is float64) and returned in that dtype. All tensors are floating
// point, on one device; an empty tensor's norm is 0. Not differentiable.
Tensor multi_tensor_norm(const TensorList& tensors, double ord = 2.0);

}  // namespace tg
