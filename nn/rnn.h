// LSTM and GRU: stacked, optionally bidirectional recurrent layers with PyTorch's parameter names.
#pragma once

#include "nn/module.h"

namespace tg::nn {

// Constructor options shared by LSTM and GRU (torch.nn.LSTM's keyword arguments).
struct RnnOptions {
  int64_t num_layers = 1;
  bool bias = true;
  bool batch_first = false;
  double dropout = 0.0;  // on every layer's output but the last, in training mode
  bool bidirectional = false;
  int64_t proj_size = 0;  // LSTM only: project hidden states to proj_size (< hidden_size) features
};

// What a recurrent module returns: output [T, B, D*H_out] (or [B, T, D*H_out] when batch_first), and
// the final states h_n [num_layers*D, B, H_out] (and c_n [num_layers*D, B, H] for LSTM), H_out being
// proj_size when projecting, H otherwise. Unbatched input gives outputs without the batch dimension.
struct RnnOutput {
  Tensor output;
  Tensor h_n;
  Tensor c_n;  // undefined for GRU
};

// The shared body of LSTM and GRU: parameters weight_ih_l{k}[_reverse], weight_hh_l{k}[_reverse],
// bias_ih_l{k}[_reverse], bias_hh_l{k}[_reverse] (and weight_hr_l{k}[_reverse] [proj_size, H] with
// projections), all ~ U(-1/sqrt(H), 1/sqrt(H)).
class RnnBase : public Module {
 public:
  // Runs the layers on input [T, B, I] ([B, T, I] when batch_first) or unbatched [T, I]; h0
  // [num_layers*D, B, H_out] and c0 [num_layers*D, B, H] ([.., H_out] and [.., H] when unbatched)
  // default to zeros (c0 is ignored by GRU).
  RnnOutput forward_with_state(const Tensor& input, const Tensor& h0 = Tensor(), const Tensor& c0 = Tensor());
  // The output sequence only (so the module chains in Sequential).
  Tensor forward(const Tensor& input) override { return forward_with_state(input).output; }
  std::string extra_repr() const override;

  int64_t input_size() const { return input_size_; }
  int64_t hidden_size() const { return hidden_size_; }
  // Features of h_n and of each direction's output: proj_size when projecting, hidden_size otherwise.
  int64_t output_size() const { return opts_.proj_size > 0 ? opts_.proj_size : hidden_size_; }
  const RnnOptions& options() const { return opts_; }

 protected:
  RnnBase(bool lstm, int64_t input_size, int64_t hidden_size, RnnOptions opts, TensorOptions options);

 private:
  struct LayerParams {
    Tensor w_ih, w_hh, b_ih, b_hh, w_hr;
  };
  bool lstm_;
  int64_t input_size_;
  int64_t hidden_size_;
  RnnOptions opts_;
  std::vector<LayerParams> layers_;  // layer-major, then direction
};

// torch.nn.LSTM: gates (i, f, g, o), optional projections (proj_size); forward_with_state returns
// output, h_n and c_n.
class LSTM : public RnnBase {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, RnnOptions opts = {}, TensorOptions options = {})
      : RnnBase(true, input_size, hidden_size, opts, options) {}
  std::string type_name() const override { return "LSTM"; }
};

// torch.nn.GRU: gates (r, z, n); forward_with_state returns output and h_n (proj_size must be 0).
class GRU : public RnnBase {
 public:
  GRU(int64_t input_size, int64_t hidden_size, RnnOptions opts = {}, TensorOptions options = {})
      : RnnBase(false, input_size, hidden_size, opts, options) {}
  std::string type_name() const override { return "GRU"; }
};

}  // namespace tg::nn
