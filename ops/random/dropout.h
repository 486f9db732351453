// Dropout: zeroes each element with probability p and scales the rest by 1 / (1 - p).
#pragma once

#include "tensor/tensor.h"

namespace tg {

// In training, input * (rand >= p) / (1 - p) with a fresh mask per call (built from rand_like, so
// it stays inside CUDA graphs and draws new numbers on every replay); otherwise input itself.
// p must lie in [0, 1]; p = 1 gives zeros.
Tensor dropout(const Tensor& input, double p = 0.5, bool training = true);

}  // namespace tg
