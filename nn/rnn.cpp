#include "nn/rnn.h"

#include <cmath>

#include "nn/init.h"
#include "ops/dropout.h"
#include "ops/factory.h"
#include "ops/join.h"
#include "ops/rnn.h"
#include "ops/view.h"
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
  for (int64_t layer = 0; layer < opts.num_layers; ++layer) {
    const int64_t in = layer == 0 ? input_size : hidden_size * dirs;
    for (int64_t d = 0; d < dirs; ++d) {
      const std::string sfx = "_l" + std::to_string(layer) + (d == 1 ? "_reverse" : "");
      LayerParams p;
      p.w_ih = param("weight_ih" + sfx, {gates, in});
      p.w_hh = param("weight_hh" + sfx, {gates, hidden_size});
      if (opts.bias) {
        p.b_ih = param("bias_ih" + sfx, {gates});
        p.b_hh = param("bias_hh" + sfx, {gates});
      }
      layers_.push_back(p);
    }
  }
}

RnnOutput RnnBase::forward_with_state(const Tensor& input, const Tensor& h0, const Tensor& c0) {
  const char* name = lstm_ ? "[LSTM]" : "[GRU]";
  TG_CHECK(input.dim() == 3, name, " expected a 3-D input (", opts_.batch_first ? "batch, seq, feature" : "seq, batch, feature",
           "), got shape ", shape_str(input.sizes()));
  TG_CHECK(input.size(2) == input_size_, name, " input.size(-1) must be equal to input_size. Expected ", input_size_,
           ", got ", input.size(2));
  const Tensor x = opts_.batch_first ? transpose(input, 0, 1) : input;
  const int64_t dirs = opts_.bidirectional ? 2 : 1;
  const int64_t B = x.size(1), H = hidden_size_, L = opts_.num_layers;
  const Shape state_shape{L * dirs, B, H};
  for (const Tensor* s : {&h0, &c0})
    TG_CHECK(!s->defined() || s->sizes() == state_shape, name, " Expected hidden size ", shape_str(state_shape),
             ", got ", shape_str(s->sizes()));
  const Tensor zero_state = zeros(state_shape, {.dtype = x.dtype(), .device = x.device()});
  const Tensor h_init = h0.defined() ? h0 : zero_state;
  const Tensor c_init = !lstm_ ? Tensor() : c0.defined() ? c0 : zero_state;
  TensorList weights;
  for (const LayerParams& p : layers_) {
    weights.push_back(p.w_ih);
    weights.push_back(p.w_hh);
    if (opts_.bias) {
      weights.push_back(p.b_ih);
      weights.push_back(p.b_hh);
    }
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
                              lstm_ ? c_init.narrow(0, layer * dirs, dirs) : Tensor(), w, 1, opts_.bidirectional);
      hs.push_back(r.h);
      if (lstm_) cs.push_back(r.c);
      layer_in = layer + 1 < L ? dropout(r.output, opts_.dropout, true) : r.output;
    }
    out.h_n = cat(hs, 0);
    if (lstm_) out.c_n = cat(cs, 0);
  } else {
    const RnnResult r = rnn(mode, x, h_init, c_init, weights, L, opts_.bidirectional);
    layer_in = r.output;
    out.h_n = r.h;
    out.c_n = r.c;
  }
  out.output = opts_.batch_first ? transpose(layer_in, 0, 1) : layer_in;
  return out;
}

std::string RnnBase::extra_repr() const {
  std::string s = std::to_string(input_size_) + ", " + std::to_string(hidden_size_);
  if (opts_.num_layers != 1) s += ", num_layers=" + std::to_string(opts_.num_layers);
  if (!opts_.bias) s += ", bias=False";
  if (opts_.batch_first) s += ", batch_first=True";
  if (opts_.dropout != 0.0) s += ", dropout=" + std::to_string(opts_.dropout);
  if (opts_.bidirectional) s += ", bidirectional=True";
  return s;
}

}  // namespace tg::nn
