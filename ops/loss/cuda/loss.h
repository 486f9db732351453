// CUDA launchers for nll_loss, the fused cross_entropy and their backward (one kernel each for
// typical batch sizes).
#pragma once

#include "tensor/tensor.h"

namespace tg::cuda {

// out = nll_loss(input [N, C] or [C], target [N] or []) with `reduction`; samples whose target is
// ignore_index add 0 (Mean divides by the number of the others). An out-of-range target gives NaN
// and is reported through the device error record (raised at the next host sync).
void nll_loss_forward(const Tensor& input, const Tensor& target, Reduction reduction, int64_t ignore_index,
                      Tensor& out);
// out [N, C] (or [C]) = zeros with -grad (divided by the counted samples for Mean) at each counted
// target position.
void nll_loss_backward(const Tensor& grad, const Tensor& target, Reduction reduction, int64_t ignore_index,
                       Tensor& out);
// loss = nll_loss(log_softmax(input), target) and log_probs (contiguous, input's sizes) at once; one
// kernel for a reduced loss over up to 64K samples. Ignored and bad targets as for nll_loss.
void cross_entropy_forward(const Tensor& input, const Tensor& target, Reduction reduction, int64_t ignore_index,
                           Tensor& loss, Tensor& log_probs);
// out = (exp(log_probs) - onehot(target)) * grad (divided by the counted samples for Mean), zero on
// ignored samples, in one kernel (and, for Mean, one more that counts).
void cross_entropy_backward(const Tensor& grad, const Tensor& log_probs, const Tensor& target, Reduction reduction,
                            int64_t ignore_index, Tensor& out);

}  // namespace tg::cuda
