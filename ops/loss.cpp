// Losses: mse_loss and l1_loss from elementwise ops, nll_loss as a fused op, cross_entropy with class
// indices as one fused op (log-softmax and nll in one kernel, its backward in one more), with
// probability targets composed.
#include "ops/loss.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/autocast.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/reduce.h"
#include "ops/softmax.h"
#include "ops/unary.h"
#include "ops/widen.h"

#ifdef TG_WITH_CUDA
#include "ops/cuda/loss.h"
#endif

namespace tg {
namespace {

const char* reduction_name(Reduction r) {
  switch (r) {
    case Reduction::None: return "none";
    case Reduction::Mean: return "mean";
    case Reduction::Sum: return "sum";
  }
  return "?";
}

Tensor reduce_loss(const Tensor& per_element, Reduction r) {
  switch (r) {
    case Reduction::None: return per_element;
    case Reduction::Mean: return mean(per_element);
    case Reduction::Sum: return sum(per_element);
  }
  return per_element;
}

// Validates an (input, target) pair for nll_loss and returns the number of classes.
int64_t check_nll_args(const char* op, const Tensor& input, const Tensor& target) {
  TG_CHECK(input.dim() == 1 || input.dim() == 2, "[", op, "] expected input of shape [N, C] or [C], got ",
           shape_str(input.sizes()));
  TG_CHECK(target.dtype() == kInt64, "[", op, "] expected target of dtype int64 (class indices), got ",
           dtype_name(target.dtype()));
  const Shape expected = input.dim() == 2 ? Shape{input.sizes()[0]} : Shape{};
  TG_CHECK(target.sizes() == expected, "[", op, "] expected target of shape ", shape_str(expected), " for input ",
           shape_str(input.sizes()), ", got ", shape_str(target.sizes()));
  return input.sizes().back();
}

// The class index of row n, checked against the number of classes.
int64_t checked_target(const int64_t* target, int64_t stride, int64_t n, int64_t classes) {
  const int64_t t = target[n * stride];
  TG_CHECK(t >= 0 && t < classes, "[nll_loss] target ", t, " is out of bounds: expected a class index in [0, ",
           classes - 1, "] (at batch index ", n, ")");
  return t;
}

// The per-sample batch geometry of an nll_loss input: rows, and row/class/target strides.
struct NllGeometry {
  int64_t rows, classes, row_stride, class_stride, target_stride;
};

NllGeometry nll_geometry(const Tensor& input, const Tensor& target) {
  const bool batched = input.dim() == 2;
  return {batched ? input.sizes()[0] : 1, input.sizes().back(), batched ? input.strides()[0] : 0,
          input.strides().back(), batched ? target.strides()[0] : 0};
}

// -input[n, target[n]], averaged or summed over n.
class NllLossOp final : public Op {
 public:
  explicit NllLossOp(Reduction r) : reduction_(r) {}
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "nll_loss"};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    check_floating("nll_loss", in[0]);
    check_nll_args("nll_loss", in[0], in[1]);
    const Shape out = reduction_ == Reduction::None ? in[1].sizes() : Shape{};
    return single_output(contiguous_meta(out, in[0].dtype(), common_device("nll_loss", in)));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    if (eval_widened(*this, in, out)) return;  // 16-bit floats compute in float32
#ifdef TG_WITH_CUDA
    if (out[0].is_cuda()) {
      cuda::nll_loss_forward(in[0], in[1], reduction_, out[0]);
      return;
    }
#endif
    const NllGeometry g = nll_geometry(in[0], in[1]);
    const int64_t* target = in[1].data_ptr<int64_t>();
    TG_DISPATCH_FLOATING(in[0].dtype(), "nll_loss", [&] {
      const scalar_t* x = in[0].data_ptr<scalar_t>();
      scalar_t* dst = out[0].data_ptr<scalar_t>();
      scalar_t total = 0;
      for (int64_t n = 0; n < g.rows; ++n) {
        const int64_t t = checked_target(target, g.target_stride, n, g.classes);
        const scalar_t v = -x[n * g.row_stride + t * g.class_stride];
        if (reduction_ == Reduction::None) dst[n] = v;
        else total += v;
      }
      if (reduction_ == Reduction::Sum) dst[0] = total;
      if (reduction_ == Reduction::Mean) dst[0] = total / static_cast<scalar_t>(g.rows);
    });
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override;
  std::string attrs() const override { return std::string("reduction=") + reduction_name(reduction_); }

 private:
  Reduction reduction_;
};

// The gradient of nll_loss w.r.t. its input: zeros with -grad (scaled for Mean) at each target.
// It is linear in grad and its adjoint is nll_loss itself, so every order of derivative exists.
class NllLossBackwardOp final : public Op {
 public:
  NllLossBackwardOp(Reduction r, Shape input_sizes) : reduction_(r), input_sizes_(std::move(input_sizes)) {}
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "nll_loss_backward"};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    check_floating("nll_loss_backward", in[0]);
    const Shape expected = reduction_ == Reduction::None ? in[1].sizes() : Shape{};
    TG_CHECK(in[0].sizes() == expected, "[nll_loss_backward] expected grad_output of shape ", shape_str(expected),
             ", got ", shape_str(in[0].sizes()));
    return single_output(contiguous_meta(input_sizes_, in[0].dtype(), common_device("nll_loss_backward", in)));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    if (eval_widened(*this, in, out)) return;  // 16-bit floats compute in float32
#ifdef TG_WITH_CUDA
    if (out[0].is_cuda()) {
      cuda::nll_loss_backward(in[0], in[1], reduction_, out[0]);
      return;
    }
#endif
    const Tensor& grad = in[0];
    const NllGeometry g = nll_geometry(out[0], in[1]);
    const int64_t* target = in[1].data_ptr<int64_t>();
    TG_DISPATCH_FLOATING(grad.dtype(), "nll_loss_backward", [&] {
      const scalar_t* gp = grad.data_ptr<scalar_t>();
      scalar_t* dst = out[0].data_ptr<scalar_t>();
      std::fill(dst, dst + out[0].numel(), scalar_t(0));
      const int64_t grad_stride = reduction_ == Reduction::None && grad.dim() == 1 ? grad.strides()[0] : 0;
      const acc_type<scalar_t> scale = reduction_ == Reduction::Mean ? 1.0 / static_cast<double>(g.rows) : 1.0;
      for (int64_t n = 0; n < g.rows; ++n) {
        const int64_t t = checked_target(target, g.target_stride, n, g.classes);
        dst[n * g.row_stride + t * g.class_stride] = -gp[n * grad_stride] * scale;
      }
    });
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    return {call_op<NllLossOp>({grads[0], ctx.input(1)}, reduction_), Tensor()};
  }
  std::string attrs() const override { return std::string("reduction=") + reduction_name(reduction_); }

 private:
  Reduction reduction_;
  Shape input_sizes_;
};

TensorList NllLossOp::backward(const BackwardContext& ctx, const TensorList& grads) const {
  return {call_op<NllLossBackwardOp>({grads[0], ctx.input(1)}, reduction_, ctx.input_meta(0).sizes), Tensor()};
}

// The gradient of cross_entropy w.r.t. its input from the loss's gradient, the log-probabilities
// and the targets: (exp(log_probs) - onehot(target)) * grad, scaled by 1/N for Mean.
class CrossEntropyBackwardOp final : public Op {
 public:
  explicit CrossEntropyBackwardOp(Reduction r) : reduction_(r) {}
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "cross_entropy_backward"};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    check_floating("cross_entropy_backward", in[1]);
    check_nll_args("cross_entropy_backward", in[1], in[2]);
    const Shape expected = reduction_ == Reduction::None ? in[2].sizes() : Shape{};
    TG_CHECK(in[0].sizes() == expected, "[cross_entropy_backward] expected grad_output of shape ",
             shape_str(expected), ", got ", shape_str(in[0].sizes()));
    return single_output(contiguous_meta(in[1].sizes(), in[1].dtype(), common_device("cross_entropy_backward", in)));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    if (eval_widened(*this, in, out)) return;  // 16-bit floats compute in float32
#ifdef TG_WITH_CUDA
    if (out[0].is_cuda()) {
      cuda::cross_entropy_backward(in[0], in[1], in[2], reduction_, out[0]);
      return;
    }
#endif
    const Tensor& grad = in[0];
    const NllGeometry g = nll_geometry(in[1], in[2]);
    const int64_t* target = in[2].data_ptr<int64_t>();
    TG_DISPATCH_FLOATING(grad.dtype(), "cross_entropy_backward", [&] {
      const scalar_t* gp = grad.data_ptr<scalar_t>();
      const scalar_t* logp = in[1].data_ptr<scalar_t>();
      scalar_t* dst = out[0].data_ptr<scalar_t>();
      const int64_t grad_stride = reduction_ == Reduction::None && grad.dim() == 1 ? grad.strides()[0] : 0;
      const acc_type<scalar_t> scale = reduction_ == Reduction::Mean ? 1.0 / static_cast<double>(g.rows) : 1.0;
      for (int64_t n = 0; n < g.rows; ++n) {
        const int64_t t = checked_target(target, g.target_stride, n, g.classes);
        const scalar_t gn = gp[n * grad_stride] * scale;
        for (int64_t c = 0; c < g.classes; ++c) {
          const int64_t i = n * g.row_stride + c * g.class_stride;
          dst[n * g.classes + c] = (std::exp(logp[i]) - (c == t ? scalar_t(1) : scalar_t(0))) * gn;
        }
      }
    });
  }
  // Linear in grad, and through exp in log_probs: composed from tapegraph ops (this op with a unit
  // gradient gives exp(log_probs) - onehot), so every order of derivative exists.
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    const Tensor& gg = grads[0];
    const Tensor grad = ctx.input(0), logp = ctx.input(1), target = ctx.input(2);
    const bool batched = logp.dim() == 2;
    const double scale = reduction_ == Reduction::Mean ? 1.0 / static_cast<double>(batched ? logp.size(0) : 1) : 1.0;
    const Tensor unit = ones(target.sizes(), {.dtype = grad.dtype(), .device = grad.device()});
    const Tensor diff = call_op<CrossEntropyBackwardOp>({unit, logp, target}, Reduction::None);
    Tensor d_grad = mul(gg, diff);
    if (reduction_ == Reduction::None) {
      d_grad = batched ? sum(d_grad, {1}) : sum(d_grad);
    } else {
      d_grad = mul(sum(d_grad), scale);
    }
    const Tensor g_rows = reduction_ == Reduction::None && batched ? grad.unsqueeze(1) : grad;
    const Tensor d_logp = mul(mul(mul(gg, exp(logp)), g_rows), scale);
    return {d_grad, d_logp, Tensor()};
  }
  std::string attrs() const override { return std::string("reduction=") + reduction_name(reduction_); }

 private:
  Reduction reduction_;
};

// nll_loss(log_softmax(input), target) as one op: outputs the loss and the log-probabilities (kept
// for the backward, never a user's tensor).
class CrossEntropyOp final : public Op {
 public:
  explicit CrossEntropyOp(Reduction r) : reduction_(r) {}
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "cross_entropy"};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    check_floating("cross_entropy", in[0]);
    check_nll_args("cross_entropy", in[0], in[1]);
    const Device device = common_device("cross_entropy", in);
    const Shape out = reduction_ == Reduction::None ? in[1].sizes() : Shape{};
    return {contiguous_meta(out, in[0].dtype(), device), contiguous_meta(in[0].sizes(), in[0].dtype(), device)};
  }
  void eval(const TensorList& in, TensorList& out) const override {
    if (eval_widened(*this, in, out)) return;  // 16-bit floats compute in float32
#ifdef TG_WITH_CUDA
    if (out[0].is_cuda()) {
      cuda::cross_entropy_forward(in[0], in[1], reduction_, out[0], out[1]);
      return;
    }
#endif
    const NllGeometry g = nll_geometry(in[0], in[1]);
    const int64_t* target = in[1].data_ptr<int64_t>();
    TG_DISPATCH_FLOATING(in[0].dtype(), "cross_entropy", [&] {
      const scalar_t* x = in[0].data_ptr<scalar_t>();
      scalar_t* loss = out[0].data_ptr<scalar_t>();
      scalar_t* logp = out[1].data_ptr<scalar_t>();
      scalar_t total = 0;
      for (int64_t n = 0; n < g.rows; ++n) {
        const scalar_t* row = x + n * g.row_stride;
        scalar_t m = -std::numeric_limits<scalar_t>::infinity();
        for (int64_t c = 0; c < g.classes; ++c) m = std::max(m, row[c * g.class_stride]);
        scalar_t s = 0;
        for (int64_t c = 0; c < g.classes; ++c) s += std::exp(row[c * g.class_stride] - m);
        const scalar_t lse = m + std::log(s);
        for (int64_t c = 0; c < g.classes; ++c) logp[n * g.classes + c] = row[c * g.class_stride] - lse;
        const scalar_t v = -logp[n * g.classes + checked_target(target, g.target_stride, n, g.classes)];
        if (reduction_ == Reduction::None) loss[n] = v;
        else total += v;
      }
      if (reduction_ == Reduction::Sum) loss[0] = total;
      if (reduction_ == Reduction::Mean) loss[0] = total / static_cast<scalar_t>(g.rows);
    });
  }
  SaveSpec saves() const override { return {.inputs = true, .outputs = true, .output_mask = 0b10}; }
  // Outputs without a gradient stay undefined (no zeros are made for the log-probabilities).
  bool needs_zero_filled_grads() const override { return false; }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    const Tensor logp = ctx.output(1);
    Tensor g;
    if (grads[0].defined()) g = call_op<CrossEntropyBackwardOp>({grads[0], logp, ctx.input(1)}, reduction_);
    if (grads[1].defined()) {
      // The log-probabilities take a gradient only in higher-order derivatives (through the
      // backward op's use of them): log_softmax's backward, g - softmax * sum(g) over the classes.
      const Tensor& gl = grads[1];
      const Tensor through = sub(gl, mul(exp(logp), sum(gl, {logp.dim() - 1}, true)));
      g = g.defined() ? add(g, through) : through;
    }
    return {g, Tensor()};
  }
  std::string attrs() const override { return std::string("reduction=") + reduction_name(reduction_); }

 private:
  Reduction reduction_;
};

}  // namespace

Tensor mse_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction) {
  const Tensor input = autocast::to_float(input_in);
  const Tensor target = autocast::to_float(target_in);
  check_floating("mse_loss", input);
  const Tensor d = sub(input, target);
  return reduce_loss(mul(d, d), reduction);
}

Tensor l1_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction) {
  const Tensor input = autocast::to_float(input_in);
  const Tensor target = autocast::to_float(target_in);
  check_floating("l1_loss", input);
  return reduce_loss(abs(sub(input, target)), reduction);
}

Tensor nll_loss(const Tensor& input_in, const Tensor& target, Reduction reduction) {
  const Tensor input = autocast::to_float(input_in);
  return call_op<NllLossOp>({input, target}, reduction);
}

Tensor cross_entropy(const Tensor& input_in, const Tensor& target_in, Reduction reduction) {
  const Tensor input = autocast::to_float(input_in);
  const Tensor target = autocast::to_float(target_in);
  TG_CHECK(input.dim() == 1 || input.dim() == 2, "[cross_entropy] expected input of shape [N, C] or [C], got ",
           shape_str(input.sizes()));
  const int64_t class_dim = input.dim() == 2 ? 1 : 0;
  if (is_floating(target.dtype())) {
    const Tensor logp = log_softmax(input, class_dim);
    // Class probabilities instead of indices: -sum(p * log_softmax(x)) per sample.
    TG_CHECK(target.sizes() == input.sizes(), "[cross_entropy] probability targets must match the input shape ",
             shape_str(input.sizes()), ", got ", shape_str(target.sizes()));
    const Tensor per_sample = neg(sum(mul(target, logp), {class_dim}));
    return reduce_loss(per_sample, reduction);
  }
  return dispatch(std::make_shared<const CrossEntropyOp>(reduction), {input, target})[0];
}

}  // namespace tg
