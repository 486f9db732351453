// The language-model head's loss without its logits: cross_entropy(linear(input, weight, bias),
// target) computed a chunk of rows at a time, so neither the forward nor the backward ever holds
// the [N, V] logits (50k classes times the batch's tokens) or their gradient.
#pragma once

#include <cstdint>

#include "ops/loss/loss.h"
#include "tensor/tensor.h"

namespace tg {

// Keyword arguments of linear_cross_entropy (cross_entropy's, plus the chunk size).
struct LinearCrossEntropyOptions {
  Reduction reduction = Reduction::Mean;       // Mean divides by the number of rows not ignored
  int64_t ignore_index = kDefaultIgnoreIndex;  // rows with this target add nothing to loss or gradients
  int64_t chunk_rows = 0;                      // rows per chunk; 0 picks chunks of <= 256 MiB of logits
  // A reduced loss under grad mode computes its gradients in the forward pass, from the logits it
  // has in hand, and the backward only scales them: one product with the weight fewer per step, but
  // the loss can be differentiated only once (as with the recomputing backward).
  bool gradients_in_forward = true;
};

// cross_entropy(linear(input, weight, bias), target, reduction, ignore_index), with the same value
// and gradients (w.r.t. input, weight and bias) but only a chunk's logits alive at a time: the
// forward keeps each row's log-sum-exp, the backward recomputes each chunk's logits (or, for a
// reduced loss that needs gradients, see gradients_in_forward: the forward computes them). input [N, D],
// weight [V, D], bias [V] or undefined, target [N] int64. Under autocast the products run in the
// autocast dtype (as linear) and the softmax and loss in float32 (as cross_entropy); the loss is then
// float32. 16-bit parameters accumulate their gradient over the chunks in float32.
Tensor linear_cross_entropy(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& target,
                            const LinearCrossEntropyOptions& options = {});

}  // namespace tg
