// Recurrent layers composed from tapegraph ops: the input projection of all steps is one GEMM,
// each step adds one [B, H] x [H, gates] GEMM and the cell's elementwise ops. The tape (and so a
// traced graph) differentiates them like any other ops.
#include "ops/rnn/rnn.h"

#include "ops/rnn/rnn_autocast.h"
#include "ops/rnn/rnn_kernels.h"

#include "ops/elementwise/binary.h"
#include "ops/elementwise/unary.h"
#include "ops/factory/factory.h"
#include "ops/linalg/matmul.h"
#include "ops/shape/join.h"
#include "ops/shape/split.h"
#include "ops/shape/view.h"
#include "tensor/shape.h"

namespace tg {
namespace {

// Validates the layer's operands against `gates` gate blocks (and the projection w_hr when defined);
// returns the hidden size.
int64_t check_layer(const char* op, int64_t gates, const Tensor& x, const Tensor& h0, const Tensor& w_ih,
                    const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh, const Tensor& w_hr = Tensor()) {
  TG_CHECK(x.dim() == 3, "[", op, "] expected input of shape [seq_len, batch, input_size], got ",
           shape_str(x.sizes()));
  TG_CHECK(w_hh.dim() == 2 && w_hh.size(0) % gates == 0, "[", op, "] expected weight_hh of shape [", gates,
           "*hidden_size, ", w_hr.defined() ? "proj_size" : "hidden_size", "], got ", shape_str(w_hh.sizes()));
  const int64_t H = w_hh.size(0) / gates;
  if (w_hr.defined())
    TG_CHECK(w_hr.dim() == 2 && w_hr.size(1) == H && w_hr.size(0) > 0 && w_hr.size(0) < H, "[", op,
             "] expected weight_hr of shape [proj_size, ", H, "] with 0 < proj_size < hidden_size (", H, "), got ",
             shape_str(w_hr.sizes()));
  const int64_t P = w_hr.defined() ? w_hr.size(0) : H;  // features of h
  TG_CHECK(w_hh.size(1) == P, "[", op, "] expected weight_hh of shape [", gates * H, ", ", P, "], got ",
           shape_str(w_hh.sizes()));
  TG_CHECK(w_ih.dim() == 2 && w_ih.size(0) == gates * H && w_ih.size(1) == x.size(2), "[", op,
           "] expected weight_ih of shape [", gates * H, ", ", x.size(2), "] (input_size ", x.size(2), "), got ",
           shape_str(w_ih.sizes()));
  for (const Tensor* b : {&b_ih, &b_hh})
    TG_CHECK(!b->defined() || (b->dim() == 1 && b->size(0) == gates * H), "[", op, "] expected biases of shape [",
             gates * H, "], got ", shape_str(b->sizes()));
  TG_CHECK(h0.dim() == 2 && h0.size(0) == x.size(1) && h0.size(1) == P, "[", op, "] Expected hidden size [",
           x.size(1), ", ", P, "], got ", shape_str(h0.sizes()));
  if (w_hr.defined())
    TG_CHECK(w_hr.dtype() == x.dtype() && w_hr.device() == x.device(), "[", op, "] weight_hr must share the input's ",
             "dtype and device, got ", dtype_name(w_hr.dtype()), " on ", w_hr.device().str(), " and ",
             dtype_name(x.dtype()), " on ", x.device().str());
  TG_CHECK(x.dtype() == w_ih.dtype() && x.dtype() == h0.dtype(), "[", op,
           "] input, weights and hidden state must share a dtype, got ", dtype_name(x.dtype()), ", ",
           dtype_name(w_ih.dtype()), " and ", dtype_name(h0.dtype()));
  TG_CHECK(x.device() == w_ih.device() && x.device() == h0.device(), "[", op,
           "] input, weights and hidden state must be on one device, got ", x.device().str(), ", ",
           w_ih.device().str(), " and ", h0.device().str());
  return H;
}

// x W_ih^T + b_ih (+ b_hh when `fold_hh`) for all steps at once: [T, B, gates*H].
Tensor input_projection(const Tensor& x, const Tensor& w_ih, const Tensor& b_ih, const Tensor& b_hh, bool fold_hh) {
  Tensor bias = b_ih;
  if (fold_hh && b_hh.defined()) bias = bias.defined() ? add(b_ih, b_hh) : b_hh;
  return linear(x, w_ih, bias);
}

}  // namespace

RnnLayerResult lstm_layer(const Tensor& x_in, const Tensor& h0_in, const Tensor& c0_in, const Tensor& w_ih_in,
                          const Tensor& w_hh_in, const Tensor& b_ih_in, const Tensor& b_hh_in, bool reverse,
                          const Tensor& w_hr_in) {
  const TensorList w = rnn_autocast_weights({w_ih_in, w_hh_in, b_ih_in, b_hh_in, w_hr_in});
  const Tensor &w_ih = w[0], &w_hh = w[1], &b_ih = w[2], &b_hh = w[3], &w_hr = w[4];
  const Tensor x = rnn_autocast_state(x_in, w), h0 = rnn_autocast_state(h0_in, w), c0 = rnn_autocast_state(c0_in, w);
  const int64_t H = check_layer("lstm", 4, x, h0, w_ih, w_hh, b_ih, b_hh, w_hr);
  const Shape cell_shape{x.size(1), H};
  TG_CHECK(c0.sizes() == cell_shape, "[lstm] Expected cell state size ", shape_str(cell_shape), ", got ",
           shape_str(c0.sizes()));
  const int64_t T = x.size(0);
  const Tensor xw = input_projection(x, w_ih, b_ih, b_hh, true);
  const Tensor w_hh_t = transpose(w_hh, 0, 1);
  const Tensor w_hr_t = w_hr.defined() ? transpose(w_hr, 0, 1) : Tensor();
  Tensor h = h0, c = c0;
  TensorList outs(static_cast<size_t>(T));
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = reverse ? T - 1 - s : s;
    const Tensor gates = addmm(xw.select(0, t), h, w_hh_t);
    const TensorList g = chunk(gates, 4, 1);
    c = add(mul(sigmoid(g[1]), c), mul(sigmoid(g[0]), tanh(g[2])));
    h = mul(sigmoid(g[3]), tanh(c));
    if (w_hr.defined()) h = mm(h, w_hr_t);  // the projection: h_t = W_hr (o_t * tanh(c_t))
    outs[static_cast<size_t>(t)] = h;
  }
  Tensor output = T > 0 ? stack(outs, 0) : empty({0, x.size(1), h0.size(1)}, {.dtype = x.dtype(), .device = x.device()});
  return {output, h, c};
}

RnnLayerResult gru_layer(const Tensor& x_in, const Tensor& h0_in, const Tensor& w_ih_in, const Tensor& w_hh_in,
                         const Tensor& b_ih_in, const Tensor& b_hh_in, bool reverse) {
  const TensorList w = rnn_autocast_weights({w_ih_in, w_hh_in, b_ih_in, b_hh_in});
  const Tensor &w_ih = w[0], &w_hh = w[1], &b_ih = w[2], &b_hh = w[3];
  const Tensor x = rnn_autocast_state(x_in, w), h0 = rnn_autocast_state(h0_in, w);
  check_layer("gru", 3, x, h0, w_ih, w_hh, b_ih, b_hh);
  const int64_t T = x.size(0);
  const Tensor xw = input_projection(x, w_ih, b_ih, b_hh, false);
  const Tensor w_hh_t = transpose(w_hh, 0, 1);
  Tensor h = h0;
  TensorList outs(static_cast<size_t>(T));
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = reverse ? T - 1 - s : s;
    const TensorList gi = chunk(xw.select(0, t), 3, 1);
    const Tensor hw = b_hh.defined() ? addmm(b_hh, h, w_hh_t) : mm(h, w_hh_t);
    const TensorList gh = chunk(hw, 3, 1);
    const Tensor r = sigmoid(add(gi[0], gh[0]));
    const Tensor z = sigmoid(add(gi[1], gh[1]));
    const Tensor n = tanh(add(gi[2], mul(r, gh[2])));
    h = add(n, mul(z, sub(h, n)));  // (1 - z) * n + z * h
    outs[static_cast<size_t>(t)] = h;
  }
  Tensor output = T > 0 ? stack(outs, 0) : empty({0, x.size(1), h0.size(1)}, {.dtype = x.dtype(), .device = x.device()});
  return {output, h, Tensor()};
}

RnnResult rnn_composed(const RnnConfig& cfg, const Tensor& x, const Tensor& h0, const Tensor& c0,
                       const TensorList& weights) {
  const int64_t dirs = cfg.dirs(), per = cfg.tensors_per_layer();
  Tensor layer_in = x;
  TensorList hs, cs;
  for (int64_t layer = 0; layer < cfg.num_layers; ++layer) {
    TensorList outs;
    for (int64_t d = 0; d < dirs; ++d) {
      const int64_t k = layer * dirs + d;
      const auto w = [&](int64_t i) { return weights[static_cast<size_t>(k * per + i)]; };
      const Tensor b_ih = cfg.bias ? w(2) : Tensor(), b_hh = cfg.bias ? w(3) : Tensor();
      const Tensor w_hr = cfg.proj_size > 0 ? w(per - 1) : Tensor();
      RnnLayerResult r = cfg.lstm() ? lstm_layer(layer_in, h0.select(0, k), c0.select(0, k), w(0), w(1), b_ih, b_hh,
                                                 d == 1, w_hr)
                                    : gru_layer(layer_in, h0.select(0, k), w(0), w(1), b_ih, b_hh, d == 1);
      hs.push_back(r.h);
      if (cfg.lstm()) cs.push_back(r.c);
      outs.push_back(r.output);
    }
    layer_in = dirs == 1 ? outs[0] : cat(outs, 2);
  }
  return {layer_in, stack(hs, 0), cfg.lstm() ? stack(cs, 0) : Tensor()};
}

}  // namespace tg
