// The loss paths composed from tapegraph ops (class weights, label smoothing, probability targets):
// slower than the fused kernels of ops/loss/loss.cpp, differentiable to every order through their ops.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace tg {

// nll_loss of rows of log-probabilities logp [M, C] with class indices target [M]: each counted row
// weighs weight[target] (1 without weights), rows whose target is ignore_index weigh 0, and Mean
// divides by the summed weights. label_smoothing > 0 mixes in -sum_c(weight[c] * logp[c]) / C per
// counted row as F.cross_entropy does. None gives [M].
Tensor class_index_loss(const Tensor& logp, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                        Reduction reduction, double label_smoothing);

// cross_entropy with class probabilities: logp and target of one shape, classes along class_dim.
Tensor class_probability_loss(const Tensor& logp, const Tensor& target, const Tensor& weight, int64_t class_dim,
                              Reduction reduction, double label_smoothing);

}  // namespace tg
