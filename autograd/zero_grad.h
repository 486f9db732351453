// Clearing gradients, shared by modules and optimizers.
#pragma once

#include "tensor/tensor.h"

namespace tg {

// Drops each tensor's .grad (set_to_none, PyTorch's default) or zeroes it in place, detached.
void zero_grad(const TensorList& tensors, bool set_to_none = true);

}  // namespace tg
