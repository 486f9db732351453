// Losses, as in torch.nn.functional.
#pragma once

#include "tensor/tensor.h"

namespace tg {

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
// input: log-probabilities [N, C] (or [C]); target: class indices (int64) [N] (or []).
Tensor nll_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
// log_softmax over dim 1 followed by nll_loss.
Tensor cross_entropy(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

}  // namespace tg
