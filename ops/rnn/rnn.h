// Recurrent layers: one LSTM/GRU layer in one direction composed from ops, and whole stacks of
// layers (rnn) that run as one fused op on CUDA.
#pragma once

#include <cstdint>

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
// With a projection w_hr [P, H] (P < H), h_t = w_hr (o_t * tanh(c_t)) has P features: w_hh is
// [4H, P], h0 [B, P] and the output [T, B, P] (c0 and c stay [B, H]). Under autocast the operands
// are cast as PyTorch's recurrent ops cast them (ops/rnn/rnn_autocast.h); the layers below too.
RnnLayerResult lstm_layer(const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& w_ih, const Tensor& w_hh,
                          const Tensor& b_ih, const Tensor& b_hh, bool reverse = false, const Tensor& w_hr = Tensor());
// GRU layer with PyTorch's gate order (r, z, n): w_ih [3H, I], w_hh [3H, H], biases [3H].
RnnLayerResult gru_layer(const Tensor& x, const Tensor& h0, const Tensor& w_ih, const Tensor& w_hh,
                         const Tensor& b_ih, const Tensor& b_hh, bool reverse = false);

// The cell of a stacked recurrent call.
enum class RnnMode : uint8_t { LSTM, GRU };

// What rnn() returns: the last layer's output [T, B, D*H] and the final states [L*D, B, H]
// (`c` only for LSTM), D = 2 when bidirectional.
struct RnnResult {
  Tensor output;
  Tensor h;
  Tensor c;
};

// `num_layers` stacked layers (both directions when `bidirectional`) over x [T, B, I] from states
// h0/c0 [L*D, B, H] (c0 ignored for GRU). `weights` holds, per layer and direction (layer-major,
// forward first), w_ih, w_hh, when biased b_ih, b_hh, and with projections w_hr: torch.nn.LSTM's
// flat-weights order. `proj_size` > 0 (LSTM only, below H) projects each hidden state to proj_size
// features (see lstm_layer): h0 and h are then [L*D, B, proj_size], the output [T, B, D*proj_size].
// On the CPU and CUDA the stack is one op (cuDNN on CUDA, fused kernels on the CPU: one graph node
// forward, one backward); projections, empty inputs and other devices compose it from lstm_layer/
// gru_layer. Under autocast (either device type) the layers run in the autocast dtype: x, the states
// and the weights are cast to it, as PyTorch lists cudnn_rnn and mkldnn_rnn_layer.
RnnResult rnn(RnnMode mode, const Tensor& x, const Tensor& h0, const Tensor& c0, const TensorList& weights,
              int64_t num_layers, bool bidirectional, int64_t proj_size = 0);

}  // namespace tg
