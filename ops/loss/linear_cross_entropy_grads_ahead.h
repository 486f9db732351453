// linear_cross_entropy of a reduced loss whose gradients are wanted, with those gradients computed
// in the forward pass (llm.c's fused classifier): each chunk's logits, while in hand, give the loss
// and then its gradient for an upstream gradient of one, and the products of that gradient; the
// backward only scales the results by the loss's real gradient. The [N, V] product with the weight
// then runs once per step instead of twice.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/core/op.h"
#include "ops/loss/loss.h"
#include "tensor/tensor.h"

namespace tg {

// Which gradients the forward computes ahead (the inputs that need one).
struct GradsAhead {
  bool input = false;
  bool weight = false;
  bool bias = false;
};

// The Mean- or Sum-reduced loss of linear_cross_entropy(x, w, b, target) (x, w, b as the op takes
// them: autocast already applied), recorded with a backward that scales the `wanted` gradients
// computed here. The loss cannot be differentiated twice.
Tensor linear_cross_entropy_grads_ahead(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& target,
                                        Reduction reduction, int64_t ignore_index, int64_t chunk_rows,
                                        GradsAhead wanted);

// The forward op, for graph rewrites: inputs {x [..., D] (rows flattened), w [V, D], [b [V]], target
// [rows]}, outputs {loss (0-dim), [dx], [dw], [db]}: the wanted gradients for an upstream gradient of
// one, each of its input's sizes, in float32 for 16-bit inputs.
OpPtr linear_cross_entropy_grads_ahead_op(bool has_bias, Reduction reduction, int64_t ignore_index, int64_t chunk_rows,
                                          GradsAhead wanted);
// Its backward op: inputs {grad (the loss's gradient, 0-dim), gradients...}, outputs each gradient
// times grad, in `dtypes` (one per gradient). Not differentiable.
OpPtr linear_cross_entropy_grads_scale_op(std::vector<DType> dtypes);

}  // namespace tg
