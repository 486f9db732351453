// 2-D pooling over [N, C, H, W] (or [C, H, W]) inputs: max, average and adaptive average.
#pragma once

#include <utility>

#include "tensor/tensor.h"

namespace tg {

// Max over windows of `kernel` (dilated by `dilation`, moved by `stride`, over an input padded by
// `padding` with -inf); stride {} means stride = kernel. Returns (values, indices): each index is
// the flat position h * W + w of the maximum inside its input plane, as PyTorch's return_indices.
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, const Shape& kernel, const Shape& stride = {},
                                                  const Shape& padding = {0}, const Shape& dilation = {1},
                                                  bool ceil_mode = false);
// The values of max_pool2d_with_indices.
Tensor max_pool2d(const Tensor& input, const Shape& kernel, const Shape& stride = {}, const Shape& padding = {0},
                  const Shape& dilation = {1}, bool ceil_mode = false);
// Mean over windows; count_include_pad counts the zero padding in the divisor.
Tensor avg_pool2d(const Tensor& input, const Shape& kernel, const Shape& stride = {}, const Shape& padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true);
// Mean over the windows that split H and W into output_size (PyTorch's start/end rule).
Tensor adaptive_avg_pool2d(const Tensor& input, const Shape& output_size);

}  // namespace tg
