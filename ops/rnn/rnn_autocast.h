// Autocast for the recurrent ops, as PyTorch's: under CUDA autocast a layer runs in the autocast
// dtype (PyTorch's cudnn_rnn wrapper casts input, states and weights); PyTorch's CPU autocast
// leaves it in the weights' dtype, so a 16-bit input or state (from an autocast linear) is cast to
// that. The casts are differentiable ops: gradients come back in each operand's own dtype.
#pragma once

#include "tensor/tensor.h"

namespace tg {

// The weights as a recurrent layer takes them under the current autocast (undefined ones stay so).
TensorList rnn_autocast_weights(const TensorList& weights);
// An input or state as a recurrent layer takes it beside `weights` (as rnn_autocast_weights gives).
Tensor rnn_autocast_state(const Tensor& t, const TensorList& weights);

}  // namespace tg
