// Normalization: batch_norm, layer_norm and group_norm over [N, C, *] inputs.
#pragma once

#include "tensor/tensor.h"

namespace tg {

// Normalizes each channel (dim 1) of input [N, C, *]. Training: uses batch statistics (biased
// variance) and, when running_mean / running_var are defined, updates them in place:
// running = (1 - momentum) * running + momentum * stat, with the unbiased variance for running_var.
// Eval: uses running_mean / running_var. weight and bias ([C]) are optional.
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(), bool training = false,
                  double momentum = 0.1, double eps = 1e-5);
// Normalizes over the trailing dims named by normalized_shape; weight and bias have that shape.
Tensor layer_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// Normalizes input [N, C, *] over groups of C / num_groups channels; weight and bias are [C].
Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

}  // namespace tg
