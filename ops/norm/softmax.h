// Softmax and log-softmax along one dim (numerically stable).
#pragma once

#include "tensor/tensor.h"

namespace tg {

Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

}  // namespace tg
