// One recurrent layer in one direction: LSTM and GRU cells run over a [T, B, I] sequence.
#pragma once

#include "tensor/tensor.h"

namespace tg {

// Output of one recurrent layer: the hidden state at every step [T, B, H] and the final states
// [B, H] (`c` only for LSTM).
struct RnnLayerResult {
  Tensor output;
  Tensor h;
  Tensor c;
};

// LSTM layer with PyTorch's gate order (i, f, g, o): w_ih [4H, I], w_hh [4H, H], biases [4H]
// (may be undefined), h0/c0 [B, H]. `reverse` runs the sequence backwards (outputs stay in input order).
RnnLayerResult lstm_layer(const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& w_ih, const Tensor& w_hh,
                          const Tensor& b_ih, const Tensor& b_hh, bool reverse = false);
// GRU layer with PyTorch's gate order (r, z, n): w_ih [3H, I], w_hh [3H, H], biases [3H].
RnnLayerResult gru_layer(const Tensor& x, const Tensor& h0, const Tensor& w_ih, const Tensor& w_hh,
                         const Tensor& b_ih, const Tensor& b_hh, bool reverse = false);

}  // namespace tg
