#include "nn/rnn.h"

#include <cmath>

#include "nn/init.h"
#include "ops/factory/factory.h"
#include "ops/random/dropout.h"
#include "ops/rnn/rnn.h"
#include "ops/shape/join.h"
#include "ops/shape/view.h"
#include "tensor/shape.h"

namespace tg::nn {

RnnBase::RnnBase(bool lstm, int64_t input_size, int64_t hidden_size, RnnOptions opts, TensorOptions options)
    : lstm_(lstm), input_size_(input_size), hidden_size_(hidden_size), opts_(opts) {
  const char* name = lstm ? "[LSTM]" : "[GRU]";
  TG_CHECK(input_size > 0 && hidden_size > 0, name, " input_size and hidden_size must be positive, got ", input_size,
           " and ", hidden_size);
  TG_CHECK(opts.num_layers > 0, name, " num_layers must be positive, got ", opts.num_layers);
  TG_CHECK(opts.dropout >= 0.0 && opts.dropout <= 1.0, name,
           " dropout should be a number in range [0, 1] representing the probability of an element being zeroed, got ",
           opts.dropout);
  TG_CHECK(opts.proj_size >= 0, name, " proj_size should be a positive integer or zero to disable projections, got ",
           opts.proj_size);
  TG_CHECK(opts.proj_size == 0 || lstm, name, " proj_size argument is only supported for LSTM, not RNN or GRU, got ",
           opts.proj_size);
  TG_CHECK(opts.proj_size < hidden_size, name, " proj_size has to be smaller than hidden_size, got proj_size ",
           opts.proj_size, " and hidden_size ", hidden_size);
  options.dtype = options.dtype_or(kFloat32);
  TG_CHECK(is_floating(*options.dtype), name, " parameters need a floating dtype, got ", dtype_name(*options.dtype));
  options.requires_grad = false;
  const int64_t gates = (lstm ? 4 : 3) * hidden_size;
  const int64_t dirs = opts.bidirectional ? 2 : 1;
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  auto param = [&](const std::string& pname, const Shape& shape) {
    Tensor t = empty(shape, options);
    init::uniform_(t, -bound, bound);
    return register_parameter(pname, t);
  };
  const int64_t out = output_size();
  for (int64_t layer = 0; layer < opts.num_layers; ++layer) {
    const int64_t in = layer == 0 ? input_size : out * dirs;
    for (int64_t d = 0; d < dirs; ++d) {
      const std::string sfx = "_l" + std::to_string(layer) + (d == 1 ? "_reverse" : "");
      LayerParams p;
      p.w_ih = param("weight_ih" + sfx, {gates, in});
      p.w_hh = param("weight_hh" + sfx, {gates, out});
      if (opts.bias) {
        p.b_ih = param("bias_ih" + sfx, {gates});
        p.b_hh = param("bias_hh" + sfx, {gates});
      }
      if (opts.proj_size > 0) p.w_hr = param("weight_hr" + sfx, {opts.proj_size, hidden_size});
      layers_.push_back(p);
    }
  }
}

RnnOutput RnnBase::forward_with_state(const Tensor& input, const Tensor& h0_in, const Tensor& c0_in) {
  const char* name = lstm_ ? "[LSTM]" : "[GRU]";
  TG_CHECK(input.dim() == 2 || input.dim() == 3, name, " Expected input to be 2D or 3D, got ", input.dim(),
           "D instead (shape ", shape_str(input.sizes()), ")");
  TG_CHECK(input.size(-1) == input_size_, name, " input.size(-1) must be equal to input_size. Expected ", input_size_,
           ", got ", input.size(-1));
  // Unbatched input [T, I] runs as a batch of one (PyTorch's rule: the states are 2-D then too).
  const bool batched = input.dim() == 3;
  const int64_t batch_dim = opts_.batch_first ? 0 : 1;
  const char* state_names = lstm_ ? "hx and cx" : "hx";
  for (const Tensor* s : {&h0_in, &c0_in})
    TG_CHECK(!s->defined() || s->dim() == (batched ? 3 : 2), name, " For ", batched ? "batched 3-D" : "unbatched 2-D",
             " input, ", state_names, " should also be ", batched ? "3-D" : "2-D", " but got a ", s->dim(),
             "-D tensor (shape ", shape_str(s->sizes()), ")");
  const Tensor h0 = batched || !h0_in.defined() ? h0_in : unsqueeze(h0_in, 1);
  const Tensor c0 = batched || !c0_in.defined() ? c0_in : unsqueeze(c0_in, 1);
  const Tensor in3 = batched ? input : unsqueeze(input, batch_dim);
  const Tensor x = opts_.batch_first ? transpose(in3, 0, 1) : in3;
  const int64_t dirs = opts_.bidirectional ? 2 : 1;
  const int64_t B = x.size(1), H = hidden_size_, L = opts_.num_layers, P = opts_.proj_size;
  const Shape h_shape{L * dirs, B, output_size()}, c_shape{L * dirs, B, H};
  // Messages give the shapes as the caller passed them (without the batch of one when unbatched).
  auto shown = [&](const Shape& s) { return shape_str(batched ? s : Shape{s[0], s[2]}); };
  TG_CHECK(!h0.defined() || h0.sizes() == h_shape, name, " Expected hidden size ", shown(h_shape), ", got ",
           shape_str(h0_in.sizes()));
  TG_CHECK(!lstm_ || !c0.defined() || c0.sizes() == c_shape, name, " Expected hidden size ", shown(c_shape),
           " (the cell state), got ", shape_str(c0_in.sizes()));
  const Tensor h_init = h0.defined() ? h0 : zeros(h_shape, {.dtype = x.dtype(), .device = x.device()});
  const Tensor c_init = !lstm_ ? Tensor() : c0.defined() ? c0 : zeros(c_shape, {.dtype = x.dtype(), .device = x.device()});
  TensorList weights;
  for (const LayerParams& p : layers_) {
    weights.push_back(p.w_ih);
    weights.push_back(p.w_hh);
    if (opts_.bias) {
      weights.push_back(p.b_ih);
      weights.push_back(p.b_hh);
    }
    if (P > 0) weights.push_back(p.w_hr);
  }
  const RnnMode mode = lstm_ ? RnnMode::LSTM : RnnMode::GRU;
  Tensor layer_in;
  RnnOutput out;
  if (opts_.dropout > 0.0 && is_training() && L > 1) {
    // Dropout between layers: one call per layer, the dropout ops between them.
    const auto per = static_cast<std::ptrdiff_t>(weights.size() / static_cast<size_t>(L));
    TensorList hs, cs;
    layer_in = x;
    for (int64_t layer = 0; layer < L; ++layer) {
      const TensorList w(weights.begin() + layer * per, weights.begin() + (layer + 1) * per);
      const RnnResult r = rnn(mode, layer_in, h_init.narrow(0, layer * dirs, dirs),
                              lstm_ ? c_init.narrow(0, layer * dirs, dirs) : Tensor(), w, 1, opts_.bidirectional, P);
      hs.push_back(r.h);
      if (lstm_) cs.push_back(r.c);
      layer_in = layer + 1 < L ? dropout(r.output, opts_.dropout, true) : r.output;
    }
    out.h_n = cat(hs, 0);
    if (lstm_) out.c_n = cat(cs, 0);
  } else {
    const RnnResult r = rnn(mode, x, h_init, c_init, weights, L, opts_.bidirectional, P);
    layer_in = r.output;
    out.h_n = r.h;
    out.c_n = r.c;
  }
  out.output = opts_.batch_first ? transpose(layer_in, 0, 1) : layer_in;
  if (!batched) {
    out.output = squeeze(out.output, batch_dim);
    out.h_n = squeeze(out.h_n, 1);
    if (lstm_) out.c_n = squeeze(out.c_n, 1);
  }
  return out;
}

std::string RnnBase::extra_repr() const {
  std::string s = std::to_string(input_size_) + ", " + std::to_string(hidden_size_);
  if (opts_.proj_size != 0) s += ", proj_size=" + std::to_string(opts_.proj_size);
  if (opts_.num_layers != 1) s += ", num_layers=" + std::to_string(opts_.num_layers);
  if (!opts_.bias) s += ", bias=False";
  if (opts_.batch_first) s += ", batch_first=True";
  if (opts_.dropout != 0.0) s += ", dropout=" + std::to_string(opts_.dropout);
  if (opts_.bidirectional) s += ", bidirectional=True";
  return s;
}

}  // namespace tg::nn
