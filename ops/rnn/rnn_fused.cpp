// rnn(): a whole stack of LSTM/GRU layers as one op, rnn (every layer, direction and time step in
// one kernel call: cuDNN on CUDA, GEMMs and fused gate loops on the CPU), whose backward is one op
// too, rnn_backward (cuDNN's backward data and weights on CUDA); a traced graph holds one node for
// each. The forward's reserve (what the kernels keep for the backward) is an output of its own, an
// int64 blob that never takes a gradient. Meta tensors, empty sequences, batches or inputs, and LSTM
// projections take the composed path of ops/rnn/rnn.cpp.
#include <memory>
#include <sstream>

#include "ops/core/dispatch.h"
#include "ops/core/widen.h"
#include "ops/elementwise/copy.h"
#include "ops/factory/factory.h"
#include "ops/rnn/rnn_autocast.h"
#include "ops/rnn/rnn_kernels.h"
#include "tensor/grad_mode.h"
#include "tensor/shape.h"
#include "tensor/tensor_impl.h"

namespace tg {

Shape RnnConfig::weight_shape(int64_t k) const {
  const int64_t per = tensors_per_layer(), pos = k % per, layer = k / per / dirs();
  const int64_t rows = gates() * hidden_size;
  if (pos == 0) return {rows, layer_input(layer)};
  if (pos == 1) return {rows, out_size()};
  if (proj_size > 0 && pos == per - 1) return {proj_size, hidden_size};
  return {rows};
}

RnnGradLayout rnn_list_grad_layout(const RnnConfig& cfg) {
  RnnGradLayout layout;
  const int64_t count = cfg.num_layers * cfg.dirs() * cfg.tensors_per_layer();
  for (int64_t k = 0; k < count; ++k) {
    layout.offset.push_back(layout.numel);
    layout.numel += shape_numel(cfg.weight_shape(k));
  }
  return layout;
}

RnnConfig rnn_compute_config(const RnnConfig& cfg, Device device) {
  if (!is_low_precision(cfg.dtype)) return cfg;
#ifdef TG_WITH_CUDA
  if (device.is_cuda() && cuda::rnn_takes_dtype(cfg, device.index)) return cfg;
#else
  (void)device;
#endif
  RnnConfig wide = cfg;
  wide.dtype = kFloat32;
  return wide;
}

RnnGradLayout rnn_grad_layout(const RnnConfig& cfg, Device device) {
#ifdef TG_WITH_CUDA
  if (device.is_cuda()) return cuda::rnn_grad_layout(rnn_compute_config(cfg, device), device.index);
#else
  (void)device;
#endif
  return rnn_list_grad_layout(cfg);
}

int64_t rnn_packed_weights_numel(const RnnConfig& cfg, Device device) {
#ifdef TG_WITH_CUDA
  if (device.is_cuda()) {
    const RnnConfig cc = rnn_compute_config(cfg, device);
    const int64_t esize = dtype_size(cc.dtype);
    return (cuda::rnn_weight_space_bytes(cc, device.index) + esize - 1) / esize;
  }
#else
  (void)cfg;
  (void)device;
#endif
  return 0;
}

TensorList rnn_grad_views(const RnnConfig& cfg, const RnnGradLayout& layout, const Tensor& flat) {
  TensorList out;
  out.reserve(layout.offset.size());
  for (size_t k = 0; k < layout.offset.size(); ++k) {
    const Shape shape = cfg.weight_shape(static_cast<int64_t>(k));
    out.emplace_back(std::make_shared<TensorImpl>(flat.impl()->storage(), shape, contiguous_strides(shape),
                                                  flat.storage_offset() + layout.offset[k], cfg.dtype));
  }
  return out;
}

std::string RnnConfig::str() const {
  std::ostringstream s;
  s << "mode=" << name() << ", hidden_size=" << hidden_size << ", num_layers=" << num_layers
    << ", bidirectional=" << (bidirectional ? "true" : "false") << ", bias=" << (bias ? "true" : "false");
  if (proj_size > 0) s << ", proj_size=" << proj_size;
  return s.str();
}

namespace {

// PyTorch's name of weight `k` of rnn()'s list: weight_ih_l0, bias_hh_l1_reverse, ...
std::string weight_name(const RnnConfig& cfg, int64_t k) {
  static const char* const kNames[] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
  const int64_t per = cfg.tensors_per_layer(), ld = k / per, pos = k % per;
  const char* name = cfg.proj_size > 0 && pos == per - 1 ? "weight_hr" : kNames[pos];
  return std::string(name) + "_l" + std::to_string(ld / cfg.dirs()) + (ld % cfg.dirs() == 1 ? "_reverse" : "");
}

void check_same(const char* op, const Tensor& t, const char* what, const Tensor& x) {
  TG_CHECK(t.dtype() == x.dtype(), "[", op, "] ", what, " has dtype ", dtype_name(t.dtype()), " but input has ",
           dtype_name(x.dtype()));
  TG_CHECK(t.device() == x.device(), "[", op, "] ", what, " is on ", t.device().str(), " but input is on ",
           x.device().str());
}

}  // namespace

RnnConfig check_rnn_operands(const char* op, RnnMode mode, const Tensor& x, const Tensor& h0, const Tensor& c0,
                             const TensorList& weights, int64_t num_layers, bool bidirectional, int64_t proj_size) {
  RnnConfig cfg;
  cfg.mode = mode;
  cfg.num_layers = num_layers;
  cfg.bidirectional = bidirectional;
  cfg.proj_size = proj_size;
  TG_CHECK(num_layers > 0, "[", op, "] num_layers must be positive, got ", num_layers);
  TG_CHECK(proj_size >= 0, "[", op, "] proj_size should be a positive integer or zero to disable projections, got ",
           proj_size);
  TG_CHECK(proj_size == 0 || cfg.lstm(), "[", op, "] proj_size argument is only supported for LSTM, not GRU (got ",
           "proj_size ", proj_size, ")");
  TG_CHECK(x.defined() && h0.defined(), "[", op, "] got an undefined input or h0");
  TG_CHECK(x.dim() == 3, "[", op, "] expected input of shape [seq_len, batch, input_size], got ",
           shape_str(x.sizes()));
  check_floating(op, x);
  const int64_t layers = num_layers * cfg.dirs();
  if (proj_size == 0) {
    TG_CHECK(h0.dim() == 3 && h0.size(0) == layers && h0.size(1) == x.size(1) && h0.size(2) > 0, "[", op,
             "] expected h0 of shape [num_layers*num_directions, batch, hidden_size] = [", layers, ", ", x.size(1),
             ", hidden_size], got ", shape_str(h0.sizes()));
  } else {
    TG_CHECK(h0.dim() == 3 && h0.size(0) == layers && h0.size(1) == x.size(1) && h0.size(2) == proj_size, "[", op,
             "] expected h0 of shape [num_layers*num_directions, batch, proj_size] = [", layers, ", ", x.size(1), ", ",
             proj_size, "], got ", shape_str(h0.sizes()));
  }
  check_same(op, h0, "h0", x);
  cfg.seq_len = x.size(0);
  cfg.batch = x.size(1);
  cfg.input_size = x.size(2);
  cfg.hidden_size = h0.size(2);
  cfg.dtype = x.dtype();
  if (cfg.lstm() && proj_size > 0) {
    // The hidden size is c0's: h0 holds projected states.
    TG_CHECK(c0.defined() && c0.dim() == 3 && c0.size(0) == layers && c0.size(1) == x.size(1) &&
                 c0.size(2) > proj_size,
             "[", op, "] expected c0 of shape [num_layers*num_directions, batch, hidden_size] = [", layers, ", ",
             x.size(1), ", hidden_size] with hidden_size > proj_size (", proj_size, "), got ",
             c0.defined() ? shape_str(c0.sizes()) : std::string("an undefined tensor"));
    cfg.hidden_size = c0.size(2);
    check_same(op, c0, "c0", x);
  } else if (cfg.lstm()) {
    TG_CHECK(c0.defined() && c0.sizes() == h0.sizes(), "[", op, "] expected c0 of shape ", shape_str(h0.sizes()),
             " (as h0), got ", c0.defined() ? shape_str(c0.sizes()) : std::string("an undefined tensor"));
    check_same(op, c0, "c0", x);
  }
  const auto count = static_cast<int64_t>(weights.size());
  const int64_t proj = proj_size > 0 ? 1 : 0;
  TG_CHECK(count == layers * (4 + proj) || count == layers * (2 + proj), "[", op, "] expected ", layers * (4 + proj),
           " weights (w_ih, w_hh, b_ih, b_hh", proj ? ", w_hr" : "", " per layer and direction) or ",
           layers * (2 + proj), " without biases, got ", count);
  cfg.bias = count == layers * (4 + proj);
  for (int64_t k = 0; k < count; ++k) {
    const Tensor& w = weights[static_cast<size_t>(k)];
    const Shape want = cfg.weight_shape(k);
    TG_CHECK(w.defined() && w.sizes() == want, "[", op, "] expected ", weight_name(cfg, k), " of shape ",
             shape_str(want), " (input_size ", cfg.input_size, ", hidden_size ", cfg.hidden_size, "), got ",
             w.defined() ? shape_str(w.sizes()) : std::string("an undefined tensor"));
    check_same(op, w, weight_name(cfg, k).c_str(), x);
  }
  return cfg;
}

namespace {

// The operands of rnn: x, h0, (c0), weights.
struct RnnOperands {
  Tensor x, h0, c0;
  TensorList weights;
};

RnnOperands split_operands(RnnMode mode, const TensorList& in, size_t n_weights) {
  const size_t states = mode == RnnMode::LSTM ? 2 : 1;
  TG_CHECK(in.size() >= 1 + states + n_weights, "[rnn] expected ", 1 + states + n_weights, " operands, got ",
           in.size());
  RnnOperands o;
  o.x = in[0];
  o.h0 = in[1];
  if (states == 2) o.c0 = in[2];
  o.weights.assign(in.begin() + static_cast<std::ptrdiff_t>(1 + states),
                   in.begin() + static_cast<std::ptrdiff_t>(1 + states + n_weights));
  return o;
}

// Validates the operands of a fused op (CUDA, non-empty) and returns their geometry.
RnnConfig check_fused(const char* op, RnnMode mode, const RnnOperands& o, int64_t num_layers, bool bidirectional) {
  const RnnConfig cfg = check_rnn_operands(op, mode, o.x, o.h0, o.c0, o.weights, num_layers, bidirectional);
  TG_CHECK(o.x.device().is_cuda() || o.x.device().is_cpu(), "[", op, "] runs on CPU or CUDA tensors, got input on ",
           o.x.device().str());
  TG_CHECK(cfg.seq_len > 0 && cfg.batch > 0 && cfg.input_size > 0, "[", op, "] expected a non-empty sequence, batch ",
           "and input_size, got input of shape ", shape_str(o.x.sizes()));
  return cfg;
}

// Elements of the int64 blob that holds the reserve of `cfg` on `device`. It is sized for the
// compute config: widening (16-bit layers on float32 copies) leaves the int64 blob as it is, and the
// kernels then write float32 elements into it.
int64_t reserve_numel(const RnnConfig& cfg, Device device) {
  const RnnConfig cc = rnn_compute_config(cfg, device);
  int64_t bytes = cpu::rnn_reserve_elements(cc) * dtype_size(cc.dtype);
#ifdef TG_WITH_CUDA
  if (device.is_cuda()) bytes = cuda::rnn_reserve_bytes(cc, device.index);
#endif
  return (bytes + 7) / 8;
}

// Whether the kernels of `device` run `cfg` on float32 copies of its 16-bit operands.
bool runs_widened(const RnnConfig& cfg, Device device) {
  return rnn_compute_config(cfg, device).dtype != cfg.dtype;
}

class RnnOp final : public Op {
 public:
  RnnOp(RnnMode mode, int64_t num_layers, bool bidirectional, size_t n_weights, bool train)
      : mode_(mode), num_layers_(num_layers), bidirectional_(bidirectional), n_weights_(n_weights), train_(train) {}
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "rnn", .flags = kComputeIntensive};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const RnnOperands o = split_operands(mode_, in, n_weights_);
    TG_CHECK(in.size() == (mode_ == RnnMode::LSTM ? 3 : 2) + n_weights_, "[rnn] expected ",
             (mode_ == RnnMode::LSTM ? 3 : 2) + n_weights_, " operands, got ", in.size());
    const RnnConfig cfg = check_fused("rnn", mode_, o, num_layers_, bidirectional_);
    const Device dev = o.x.device();
    std::vector<TensorMeta> out;
    out.push_back(contiguous_meta({cfg.seq_len, cfg.batch, cfg.dirs() * cfg.hidden_size}, cfg.dtype, dev));
    out.push_back(contiguous_meta(o.h0.sizes(), cfg.dtype, dev));
    if (cfg.lstm()) out.push_back(contiguous_meta(o.h0.sizes(), cfg.dtype, dev));
    out.push_back(contiguous_meta({train_ ? reserve_numel(cfg, dev) : 0}, kInt64, dev));
    out.push_back(contiguous_meta({train_ ? rnn_packed_weights_numel(cfg, dev) : 0}, cfg.dtype, dev));
    return out;
  }
  void eval(const TensorList& in, TensorList& out) const override {
    const RnnOperands o = split_operands(mode_, in, n_weights_);
    const RnnConfig cfg = check_rnn_operands("rnn", mode_, o.x, o.h0, o.c0, o.weights, num_layers_,
                                             bidirectional_);
    // 16-bit floats compute in float32 on the CPU; cuDNN runs them in their dtype (float32 math).
    if (runs_widened(cfg, o.x.device()) && eval_widened(*this, in, out)) return;
    const bool lstm = cfg.lstm();
    const Tensor cy = lstm ? out[2] : Tensor(), reserve = train_ ? out[lstm ? 3 : 2] : Tensor();
#ifdef TG_WITH_CUDA
    if (out[0].is_cuda())
      return cuda::rnn_forward(cfg, o.x, o.h0, o.c0, o.weights, out[0], out[1], cy, reserve, out.back());
#endif
    cpu::rnn_forward(cfg, o.x, o.h0, o.c0, o.weights, out[0], out[1], cy, reserve);
  }
  SaveSpec saves() const override { return {.inputs = true, .outputs = true}; }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override;
  // Final states that received no gradient reach rnn_backward as empty tensors: the kernels read
  // them as zeros without a tensor of zeros being made.
  bool needs_zero_filled_grads() const override { return false; }
  std::string attrs() const override {
    return std::string("mode=") + (mode_ == RnnMode::LSTM ? "lstm" : "gru") + ", num_layers=" +
           std::to_string(num_layers_) + ", bidirectional=" + (bidirectional_ ? "true" : "false") +
           ", train=" + (train_ ? "true" : "false");
  }

 private:
  RnnMode mode_;
  int64_t num_layers_;
  bool bidirectional_;
  size_t n_weights_;
  bool train_;
};

// Inputs: x, h0, (c0), weights, y, reserve, packed weights, dy, dhy, (dcy); outputs: dx, dh0, (dc0) and
// the flat weight gradient laid out as rnn_grad_layout() says.
class RnnBackwardOp final : public Op {
 public:
  RnnBackwardOp(RnnMode mode, int64_t num_layers, bool bidirectional, size_t n_weights)
      : mode_(mode), num_layers_(num_layers), bidirectional_(bidirectional), n_weights_(n_weights) {}
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "rnn_backward", .flags = kComputeIntensive};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const size_t states = mode_ == RnnMode::LSTM ? 2 : 1, first = 1 + states + n_weights_;
    TG_CHECK(in.size() == first + 4 + states, "[rnn_backward] expected ", first + 4 + states, " operands, got ",
             in.size());
    const RnnOperands o = split_operands(mode_, in, n_weights_);
    const RnnConfig cfg = check_fused("rnn_backward", mode_, o, num_layers_, bidirectional_);
    const Device dev = o.x.device();
    const Tensor &y = in[first], &reserve = in[first + 1], &packed = in[first + 2];
    const Shape y_sizes{cfg.seq_len, cfg.batch, cfg.dirs() * cfg.hidden_size};
    TG_CHECK(y.sizes() == y_sizes && in[first + 3].sizes() == y_sizes, "[rnn_backward] expected output and ",
             "its gradient of shape ", shape_str(y_sizes), ", got ", shape_str(y.sizes()), " and ",
             shape_str(in[first + 3].sizes()));
    for (size_t i = 0; i < states; ++i)
      TG_CHECK(in[first + 4 + i].numel() == 0 || in[first + 4 + i].sizes() == o.h0.sizes(), "[rnn_backward] ",
               "expected state gradients of shape ", shape_str(o.h0.sizes()), " (or empty: none), got ",
               shape_str(in[first + 4 + i].sizes()));
    for (size_t i = first; i < in.size(); ++i)
      if (i != first + 1) check_same("rnn_backward", in[i], "an output or its gradient", o.x);
    const int64_t want = reserve_numel(cfg, dev);
    TG_CHECK(reserve.dtype() == kInt64 && reserve.numel() == want, "[rnn_backward] expected the forward's ",
             "reserve space (int64 [", want, "]), got ", dtype_name(reserve.dtype()), " ", shape_str(reserve.sizes()));
    const int64_t packed_want = rnn_packed_weights_numel(cfg, dev);
    TG_CHECK(packed.numel() == packed_want, "[rnn_backward] expected the forward's packed weights (",
             dtype_name(cfg.dtype), " [", packed_want, "]), got ", shape_str(packed.sizes()));
    std::vector<TensorMeta> out;
    for (size_t i = 0; i < 1 + states; ++i) out.push_back(contiguous_meta(in[i].sizes(), cfg.dtype, dev));
    out.push_back(contiguous_meta({rnn_grad_layout(cfg, dev).numel}, cfg.dtype, dev));
    return out;
  }
  void eval(const TensorList& in, TensorList& out) const override {
    const size_t states = mode_ == RnnMode::LSTM ? 2 : 1, first = 1 + states + n_weights_;
    const RnnOperands o = split_operands(mode_, in, n_weights_);
    const RnnConfig cfg = check_rnn_operands("rnn_backward", mode_, o.x, o.h0, o.c0, o.weights, num_layers_,
                                             bidirectional_);
    if (runs_widened(cfg, o.x.device()) && eval_widened(*this, in, out)) return;  // as the forward
    const bool lstm = states == 2;
    const Tensor dcy = lstm ? in[first + 5] : Tensor(), dcx = lstm ? out[2] : Tensor();
#ifdef TG_WITH_CUDA
    if (out[0].is_cuda())
      return cuda::rnn_backward(cfg, o.x, o.h0, o.c0, in[first + 2], in[first], in[first + 1], in[first + 3],
                                in[first + 4], dcy, out[0], out[1], dcx, out.back());
#endif
    const TensorList dweights = rnn_grad_views(cfg, rnn_list_grad_layout(cfg), out.back());
    // The CPU kernels read every state gradient: absent (empty) ones are zeros here.
    auto or_zeros = [&](const Tensor& g) {
      if (g.numel() > 0) return g;
      OpObserverGuard untraced(nullptr);
      return zeros(o.h0.sizes(), {.dtype = cfg.dtype, .device = o.x.device()});
    };
    cpu::rnn_backward(cfg, o.x, o.h0, o.c0, o.weights, in[first], in[first + 1], in[first + 3],
                      or_zeros(in[first + 4]), lstm ? or_zeros(dcy) : dcy, out[0], out[1], dcx, dweights);
  }
  SaveSpec saves() const override { return {false, false}; }
  std::string attrs() const override {
    return std::string("mode=") + (mode_ == RnnMode::LSTM ? "lstm" : "gru") + ", num_layers=" +
           std::to_string(num_layers_) + ", bidirectional=" + (bidirectional_ ? "true" : "false");
  }

 private:
  RnnMode mode_;
  int64_t num_layers_;
  bool bidirectional_;
  size_t n_weights_;
};

TensorList RnnOp::backward(const BackwardContext& ctx, const TensorList& grads) const {
  TG_CHECK(train_, "[rnn] internal error: a forward run without a reserve space was differentiated");
  const size_t states = mode_ == RnnMode::LSTM ? 2 : 1, first = 1 + states + n_weights_;
  TensorList in;
  in.reserve(first + 4 + states);
  for (size_t i = 0; i < first; ++i) in.push_back(ctx.input(i));
  in.push_back(ctx.output(0));
  in.push_back(ctx.output(states + 1));
  in.push_back(ctx.output(states + 2));
  // cuDNN reads dense gradients; a gradient may be a broadcast (sum's backward) or a view. The output's
  // gradient is zeros when only the final states received one; a final state without one goes as an
  // empty tensor (read as zeros).
  const Tensor& y = ctx.output(0);
  const TensorOptions like_y{.dtype = y.dtype(), .device = y.device()};
  in.push_back(grads[0].defined() ? grads[0].contiguous() : zeros(y.sizes(), like_y));
  for (size_t i = 1; i <= states; ++i) in.push_back(grads[i].defined() ? grads[i].contiguous() : empty({0}, like_y));
  const RnnConfig cfg = check_rnn_operands("rnn_backward", mode_, in[0], in[1], states == 2 ? in[2] : Tensor(),
                                           TensorList(in.begin() + static_cast<std::ptrdiff_t>(1 + states),
                                                      in.begin() + static_cast<std::ptrdiff_t>(first)),
                                           num_layers_, bidirectional_);
  TensorList g = dispatch(std::make_shared<const RnnBackwardOp>(mode_, num_layers_, bidirectional_, n_weights_),
                          std::move(in));
  // The weights' gradients are views of the flat one (on CUDA, of cuDNN's weight space itself).
  const Tensor flat = g.back();
  g.pop_back();
  const RnnGradLayout layout = rnn_grad_layout(cfg, flat.device());
  for (size_t k = 0; k < n_weights_; ++k) {
    const Shape shape = cfg.weight_shape(static_cast<int64_t>(k));
    g.push_back(flat.narrow(0, layout.offset[k], shape_numel(shape)).view(shape));
  }
  for (size_t i = 0; i < g.size(); ++i)
    if (!ctx.needs_input_grad(i)) g[i] = Tensor();
  return g;
}

bool any_requires_grad(const TensorList& ts) {
  for (const Tensor& t : ts)
    if (t.requires_grad()) return true;
  return false;
}

}  // namespace

RnnResult rnn(RnnMode mode, const Tensor& x_in, const Tensor& h0_in, const Tensor& c0_in, const TensorList& weights_in,
              int64_t num_layers, bool bidirectional, int64_t proj_size) {
  // Autocast (ops/rnn/rnn_autocast.h); tapegraph returns the autocast dtype on CUDA, where PyTorch's
  // cudnn_rnn wrapper returns float16 even under bfloat16.
  const TensorList weights = rnn_autocast_weights(weights_in);
  const Tensor x = rnn_autocast_state(x_in, weights), h0 = rnn_autocast_state(h0_in, weights),
               c0 = rnn_autocast_state(c0_in, weights);
  const RnnConfig cfg = check_rnn_operands(mode == RnnMode::LSTM ? "lstm" : "gru", mode, x, h0, c0, weights,
                                           num_layers, bidirectional, proj_size);
  if (proj_size == 0 && (x.is_cuda() || x.is_cpu()) && cfg.seq_len > 0 && cfg.batch > 0 && cfg.input_size > 0) {
    // The kernels read dense operands; contiguous() is an op, so a trace sees any copy.
    TensorList in{x.contiguous(), h0.contiguous()};
    if (cfg.lstm()) in.push_back(c0.contiguous());
    for (const Tensor& w : weights) in.push_back(w.contiguous());
    const bool train = is_grad_enabled() && any_requires_grad(in);
    TensorList out = dispatch(
        std::make_shared<const RnnOp>(mode, num_layers, bidirectional, weights.size(), train), std::move(in));
    return {out[0], out[1], cfg.lstm() ? out[2] : Tensor()};
  }
  return rnn_composed(cfg, x, h0, c0, weights);
}

}  // namespace tg
