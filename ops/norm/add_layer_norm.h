// add_layer_norm: a residual add and the layer_norm of its sum as one op each way, the pair every
// pre-norm transformer block runs (x = x + f(x); h = layer_norm(x)). One pass over memory forms the
// sum, normalizes it and writes both, the normalized rows directly in the dtype the next product
// reads under autocast; the backward adds the residual's gradient and writes the update's
// gradient in its dtype in the same pass. Values and gradients are those of the separate ops:
//     sum = residual + update;  normed = layer_norm(sum, ...).to(out_dtype)
// The compiler rewrites that pattern into this op by itself (graphs/passes/norm_fusion.h).
#pragma once

#include <optional>

#include "ops/core/op.h"
#include "ops/norm/row_norm.h"
#include "tensor/tensor.h"

namespace tg {

// The two results of add_layer_norm.
struct AddLayerNormResult {
  Tensor sum;     // residual + update, in their promoted dtype
  Tensor normed;  // layer_norm of the sum, in out_dtype
};

// residual + update (same shape, no broadcasting) and layer_norm of that sum over its trailing
// `normalized_shape` dims with the optional affine parameters. out_dtype defaults to what
// layer_norm(sum) gives: the sum's dtype, or float32 for a 16-bit sum under CUDA autocast.
AddLayerNormResult add_layer_norm(const Tensor& residual, const Tensor& update, const Shape& normalized_shape,
                                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(), double eps = 1e-5,
                                  std::optional<DType> out_dtype = std::nullopt);

// The forward op, for graph rewrites: inputs {residual, update[, weight][, bias]} (contiguous, the
// geometry's rows), outputs {sum, normed (out_dtype), mean, rstd} as layer_norm's statistics.
OpPtr add_layer_norm_op(const RowNormGeometry& geometry, bool has_weight, bool has_bias, DType out_dtype);

// The backward op, for graph rewrites: inputs {grad_normed (any floating dtype), sum[, weight], mean,
// rstd[, grad_sum]}, outputs {grad_sum_total (the sum's dtype)[, the same in low_dtype][,
// grad_weight][, grad_bias]}: layer_norm's input gradient plus grad_sum. `low_dtype` (when set)
// adds the copy a lower-precision update's gradient needs.
OpPtr add_layer_norm_backward_op(const RowNormGeometry& geometry, bool has_weight, bool has_grad_sum,
                                 std::optional<DType> low_dtype, bool weight_grad, bool bias_grad, DType param_dtype);

}  // namespace tg
