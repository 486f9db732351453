// Shared pieces of the view op files: the view-op base class and the differentiable backward ops.
#pragma once

#include "ops/core/op.h"

namespace tg {

// Base of every view op: no kernel runs (the dispatcher aliases the input's storage) and the
// backward needs only input metadata, so nothing is saved.
class ViewOpBase : public Op {
 public:
  void eval(const TensorList&, TensorList&) const override {}
  SaveSpec saves() const override { return {false, false}; }
};

// Metadata of a view of x with the given geometry (offset is absolute in x's storage).
TensorMeta view_meta(const Tensor& x, Shape sizes, Shape strides, int64_t offset);

// Writes into `out` strides that let a tensor of (sizes, strides) be viewed with new_sizes; false
// when the existing strides cannot express it (PyTorch's computeStride).
bool compute_view_strides(const Shape& sizes, const Shape& strides, const Shape& new_sizes, Shape& out);

// Resolves a single -1 in `sizes` against numel and checks the element count.
Shape infer_view_size(const Shape& sizes, int64_t numel, const char* op);

// Gradient of slice: zeros of input_sizes with grad written at [start:end:step] along dim
// (start/end already clamped); its own backward slices again.
Tensor slice_backward(const Tensor& grad, const Shape& input_sizes, int64_t dim, int64_t start, int64_t end,
                      int64_t step);

// Gradient of select: zeros of input_sizes with grad written at `index` along dim.
Tensor select_backward(const Tensor& grad, const Shape& input_sizes, int64_t dim, int64_t index);

// Gradient of as_strided: scatters grad (laid out by the output geometry) into the shared storage
// and gathers it back at the input's geometry; overlapping input elements share it evenly.
Tensor as_strided_backward(const Tensor& grad, const TensorMeta& input, const Shape& sizes, const Shape& strides,
                           int64_t offset);

}  // namespace tg
