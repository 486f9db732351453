// Pooling over 1, 2 or 3 spatial dims ([N, C, L], [N, C, H, W], [N, C, D, H, W], or the same without
// the batch dim): max, average and adaptive average, with PyTorch's arguments and defaults.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "tensor/tensor.h"

namespace tg {

// Max over windows of `kernel` (dilated by `dilation`, moved by `stride`, over an input padded by
// `padding` with -inf); stride {} means stride = kernel; each list has one value or one per spatial
// dim. Returns (values, indices): each index is the flat position of the maximum inside its input
// plane (h * W + w in 2-D, (d * H + h) * W + w in 3-D), as PyTorch's return_indices.
std::pair<Tensor, Tensor> max_pool1d_with_indices(const Tensor& input, const Shape& kernel, const Shape& stride = {},
                                                  const Shape& padding = {0}, const Shape& dilation = {1},
                                                  bool ceil_mode = false);
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, const Shape& kernel, const Shape& stride = {},
                                                  const Shape& padding = {0}, const Shape& dilation = {1},
                                                  bool ceil_mode = false);
std::pair<Tensor, Tensor> max_pool3d_with_indices(const Tensor& input, const Shape& kernel, const Shape& stride = {},
                                                  const Shape& padding = {0}, const Shape& dilation = {1},
                                                  bool ceil_mode = false);
// The values of max_pool{1,2,3}d_with_indices.
Tensor max_pool1d(const Tensor& input, const Shape& kernel, const Shape& stride = {}, const Shape& padding = {0},
                  const Shape& dilation = {1}, bool ceil_mode = false);
Tensor max_pool2d(const Tensor& input, const Shape& kernel, const Shape& stride = {}, const Shape& padding = {0},
                  const Shape& dilation = {1}, bool ceil_mode = false);
Tensor max_pool3d(const Tensor& input, const Shape& kernel, const Shape& stride = {}, const Shape& padding = {0},
                  const Shape& dilation = {1}, bool ceil_mode = false);
// Mean over windows; count_include_pad counts the zero padding in the divisor; divisor_override
// (2-D and 3-D, as in PyTorch) replaces the divisor of every window.
Tensor avg_pool1d(const Tensor& input, const Shape& kernel, const Shape& stride = {}, const Shape& padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true);
Tensor avg_pool2d(const Tensor& input, const Shape& kernel, const Shape& stride = {}, const Shape& padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
Tensor avg_pool3d(const Tensor& input, const Shape& kernel, const Shape& stride = {}, const Shape& padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
// Mean over the windows that split each spatial dim into output_size (PyTorch's start/end rule).
Tensor adaptive_avg_pool1d(const Tensor& input, const Shape& output_size);
Tensor adaptive_avg_pool2d(const Tensor& input, const Shape& output_size);
Tensor adaptive_avg_pool3d(const Tensor& input, const Shape& output_size);

}  // namespace tg
