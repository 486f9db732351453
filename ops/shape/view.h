// View ops: outputs share the input's storage (writes through a view reach the base).
#pragma once

#include <optional>

#include "ops/core/op.h"
#include "tensor/tensor.h"

namespace tg {

// A view with new sizes (one may be -1); errors when the strides cannot express it.
Tensor view(const Tensor& x, const Shape& sizes);
// A view when strides allow, else a contiguous copy.
Tensor reshape(const Tensor& x, const Shape& sizes);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
// Splits dim into `sizes` (one may be -1), the inverse of flatten; a view.
Tensor unflatten(const Tensor& x, int64_t dim, const Shape& sizes);
// Python-style slicing x[start:end:step] along dim (negative and out-of-range bounds clamp).
Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step = 1);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor select(const Tensor& x, int64_t dim, int64_t index);
Tensor squeeze(const Tensor& x);
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor expand(const Tensor& x, const Shape& sizes);
Tensor permute(const Tensor& x, const Shape& dims);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
// Transpose of a tensor with at most 2 dims.
Tensor t(const Tensor& x);
// A view with explicit geometry; offset is an absolute storage offset (default: x's own).
Tensor as_strided(const Tensor& x, const Shape& sizes, const Shape& strides, std::optional<int64_t> offset = {});

// What a slice_backward node computes: zeros of `sizes` with its gradient written at
// [start:end:step] along dim (the gradient of slice, narrow and split).
struct SliceBackwardRegion {
  Shape sizes;
  int64_t dim = 0, start = 0, end = 0, step = 1;
};
// The region of a slice_backward op, or nothing for any other op (for graph rewrites).
std::optional<SliceBackwardRegion> slice_backward_region(const Op& op);

}  // namespace tg
