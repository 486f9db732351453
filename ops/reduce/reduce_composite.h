// Reductions built from other ops: the maximum and minimum with their indices (torch.max(x, dim)),
// argmin, the standard deviation and vector norms. Their gradients are those of the ops they are
// made of, and are PyTorch's: max(x, dim) sends the gradient to the index it returns, max(x) shares
// it among tied maxima (as amax), and a zero vector's norm and a constant's std have zero gradients.
#pragma once

#include <optional>
#include <utility>

#include "tensor/tensor.h"

namespace tg {

// The largest element as a 0-dim tensor (NaN when any element is NaN).
Tensor max(const Tensor& x);
// The smallest element as a 0-dim tensor (NaN when any element is NaN).
Tensor min(const Tensor& x);
// (values, int64 indices) of the largest elements along dim; the first among equals.
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
// (values, int64 indices) of the smallest elements along dim; the first among equals.
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
// Index (int64) of the first minimum, over all elements flattened or along `dim`.
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = {}, bool keepdim = false);
// The standard deviation: sqrt(var(x, dims, correction, keepdim)), of gradient 0 where it is 0.
Tensor std(const Tensor& x, const Shape& dims = {}, int64_t correction = 1, bool keepdim = false);
// torch.linalg.vector_norm of a floating x over `dims` (all when empty): (sum |x|^ord)^(1/ord) for
// ord > 0, amax(|x|) for +infinity and amin(|x|) for -infinity. Under CUDA autocast a 16-bit x is
// reduced in float32 (PyTorch's float32 list).
Tensor vector_norm(const Tensor& x, double ord = 2, const Shape& dims = {}, bool keepdim = false);

}  // namespace tg
