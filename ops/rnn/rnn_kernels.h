// What the stacked recurrent op shares between its shape rule (ops/rnn/rnn_fused.cpp), the composed
// path (ops/rnn/rnn.cpp), its CPU kernels (ops/rnn/cpu/rnn.cpp) and its cuDNN kernels (ops/rnn/cuda/rnn.cpp).
#pragma once

#include <string>
#include <vector>

#include "ops/rnn/rnn.h"

namespace tg {

// The geometry of one stacked recurrent call.
struct RnnConfig {
  RnnMode mode = RnnMode::LSTM;
  int64_t seq_len = 0;
  int64_t batch = 0;
  int64_t input_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 1;
  bool bidirectional = false;
  bool bias = true;
  DType dtype = kFloat32;
  int64_t proj_size = 0;  // LSTM projections: hidden states of proj_size features (0: none)

  bool lstm() const { return mode == RnnMode::LSTM; }
  // Gate blocks per weight matrix: 4 for LSTM, 3 for GRU.
  int64_t gates() const { return lstm() ? 4 : 3; }
  int64_t dirs() const { return bidirectional ? 2 : 1; }
  // Features of a hidden state h (and of each direction's output): proj_size when projecting.
  int64_t out_size() const { return proj_size > 0 ? proj_size : hidden_size; }
  // Weight tensors per layer and direction: w_ih, w_hh (+ b_ih, b_hh) (+ w_hr).
  int64_t tensors_per_layer() const { return (bias ? 4 : 2) + (proj_size > 0 ? 1 : 0); }
  // Input features of layer `layer`.
  int64_t layer_input(int64_t layer) const { return layer == 0 ? input_size : out_size() * dirs(); }
  // The expected shape of weight tensor `k` of rnn()'s list.
  Shape weight_shape(int64_t k) const;
  // "lstm" or "gru" (for messages).
  const char* name() const { return lstm() ? "lstm" : "gru"; }
  // "mode=lstm, hidden_size=64, num_layers=2, bidirectional=true, bias=true" for printing and cache keys.
  std::string str() const;
};

// Validates rnn()'s operands (with `op` naming the caller in messages) and returns their geometry.
RnnConfig check_rnn_operands(const char* op, RnnMode mode, const Tensor& x, const Tensor& h0, const Tensor& c0,
                             const TensorList& weights, int64_t num_layers, bool bidirectional,
                             int64_t proj_size = 0);

// Where each weight of rnn()'s list finds its gradient in the flat gradient tensor of the backward
// op: `offset[k]` (elements), and the flat tensor's length. On CUDA the flat tensor is cuDNN's weight
// space itself whenever every weight fills one contiguous range of it; otherwise (and on the CPU) the
// weights' gradients follow each other in list order.
struct RnnGradLayout {
  std::vector<int64_t> offset;
  int64_t numel = 0;
};
RnnGradLayout rnn_grad_layout(const RnnConfig& cfg, Device device);
// The list-order layout: each weight's gradient right after the previous one's.
RnnGradLayout rnn_list_grad_layout(const RnnConfig& cfg);
// The tensors of rnn()'s weight list as views of the flat gradient `flat` laid out by `layout` (plain
// views for kernels to write through; no autograd, no trace).
TensorList rnn_grad_views(const RnnConfig& cfg, const RnnGradLayout& layout, const Tensor& flat);

// Elements (of the compute config's dtype) of the packed weights a training forward keeps for its
// backward: cuDNN's weight space on CUDA, none on the CPU (its kernels read the weights where they are).
int64_t rnn_packed_weights_numel(const RnnConfig& cfg, Device device);

// rnn() composed from lstm_layer/gru_layer (any device, any length, projections).
RnnResult rnn_composed(const RnnConfig& cfg, const Tensor& x, const Tensor& h0, const Tensor& c0,
                       const TensorList& weights);

// The geometry the kernels of `device` run `cfg` in: float16/bfloat16 layers run on float32 copies
// (rounded back after) on the CPU, and on CUDA where cuDNN refuses their dtype for the geometry;
// cuDNN runs them in their dtype otherwise. Every size the ops derive (reserve, packed weights,
// gradient layout) comes from this geometry.
RnnConfig rnn_compute_config(const RnnConfig& cfg, Device device);

namespace cpu {
// Elements (of the config's dtype: float32 or float64) of the reserve the CPU kernels keep for the backward.
int64_t rnn_reserve_elements(const RnnConfig& cfg);
// The CPU kernels, with the same contracts as the CUDA ones below.
void rnn_forward(const RnnConfig& cfg, const Tensor& x, const Tensor& hx, const Tensor& cx, const TensorList& weights,
                 const Tensor& y, const Tensor& hy, const Tensor& cy, const Tensor& reserve);
void rnn_backward(const RnnConfig& cfg, const Tensor& x, const Tensor& hx, const Tensor& cx, const TensorList& weights,
                  const Tensor& y, const Tensor& reserve, const Tensor& dy, const Tensor& dhy, const Tensor& dcy,
                  const Tensor& dx, const Tensor& dhx, const Tensor& dcx, const TensorList& dweights);
}  // namespace cpu

namespace cuda {
// Whether cuDNN takes `cfg` in its dtype on `device` (always for float32/float64; asked once per
// geometry for 16-bit floats).
bool rnn_takes_dtype(const RnnConfig& cfg, int device);
// Bytes of cuDNN's reserve space for a training forward of `cfg` on `device` (cached per geometry).
int64_t rnn_reserve_bytes(const RnnConfig& cfg, int device);
// Bytes of cuDNN's weight space for `cfg` on `device`.
int64_t rnn_weight_space_bytes(const RnnConfig& cfg, int device);
// rnn_grad_layout() on CUDA device `device`.
RnnGradLayout rnn_grad_layout(const RnnConfig& cfg, int device);
// y, hy (and cy for LSTM) from x, hx (cx), the weights of rnn()'s list; a training forward when
// `reserve` is defined (it receives what the backward reads, and `packed` the weight space the
// backward reads). All tensors contiguous.
void rnn_forward(const RnnConfig& cfg, const Tensor& x, const Tensor& hx, const Tensor& cx, const TensorList& weights,
                 const Tensor& y, const Tensor& hy, const Tensor& cy, const Tensor& reserve, const Tensor& packed);
// dx, dhx (dcx) and the flat weight gradient (laid out as rnn_grad_layout says) from the forward's
// tensors, packed weights and reserve and the output gradients dy, dhy (dcy). The reserve is read,
// never written.
void rnn_backward(const RnnConfig& cfg, const Tensor& x, const Tensor& hx, const Tensor& cx, const Tensor& packed,
                  const Tensor& y, const Tensor& reserve, const Tensor& dy, const Tensor& dhy, const Tensor& dcy,
                  const Tensor& dx, const Tensor& dhx, const Tensor& dcx, const Tensor& dflat);
}  // namespace cuda

}  // namespace tg
