// Losses: mse_loss and l1_loss from elementwise ops, nll_loss as a fused op, cross_entropy with class
// indices as one fused op (log-softmax and nll in one kernel, its backward in one more). The fused ops
// skip targets equal to ignore_index (Mean divides by the number of the others); class weights, label
// smoothing and probability targets take the composed path of ops/loss/loss_composed.cpp.
#include "ops/loss/loss.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/core/autocast.h"
#include "ops/core/dispatch.h"
#include "ops/core/widen.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/elementwise/unary.h"
#include "ops/factory/factory.h"
#include "ops/loss/loss_composed.h"
#include "ops/norm/softmax.h"
#include "ops/reduce/reduce.h"

#ifdef TG_WITH_CUDA
#include "ops/loss/cuda/loss.h"
#endif

namespace tg {
namespace {


std::string loss_attrs(Reduction r, int64_t ignore_index) {
  std::string s = std::string("reduction=") + reduction_name(r);
  if (ignore_index != kDefaultIgnoreIndex) s += ", ignore_index=" + std::to_string(ignore_index);
  return s;
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

// The class index of row n, checked against the number of classes, or -1 for an ignored row.
int64_t checked_target(const int64_t* target, int64_t stride, int64_t n, int64_t classes, int64_t ignore_index) {
  const int64_t t = target[n * stride];
  if (t == ignore_index) return -1;
  TG_CHECK(t >= 0 && t < classes, "[nll_loss] target ", t, " is out of bounds: expected a class index in [0, ",
           classes - 1, "] (at batch index ", n, ")");
  return t;
}

// The number of rows whose target is not ignored: Mean's divisor.
int64_t counted_rows(const int64_t* target, int64_t stride, int64_t rows, int64_t ignore_index) {
  int64_t count = 0;
  for (int64_t n = 0; n < rows; ++n) count += target[n * stride] != ignore_index;
  return count;
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
  NllLossOp(Reduction r, int64_t ignore_index) : reduction_(r), ignore_index_(ignore_index) {}
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
      cuda::nll_loss_forward(in[0], in[1], reduction_, ignore_index_, out[0]);
      return;
    }
#endif
    const NllGeometry g = nll_geometry(in[0], in[1]);
    const int64_t* target = in[1].data_ptr<int64_t>();
    TG_DISPATCH_FLOATING(in[0].dtype(), "nll_loss", [&] {
      const scalar_t* x = in[0].data_ptr<scalar_t>();
      scalar_t* dst = out[0].data_ptr<scalar_t>();
      scalar_t total = 0;
      int64_t count = 0;
      for (int64_t n = 0; n < g.rows; ++n) {
        const int64_t t = checked_target(target, g.target_stride, n, g.classes, ignore_index_);
        const scalar_t v = t < 0 ? scalar_t(0) : scalar_t(-x[n * g.row_stride + t * g.class_stride]);
        count += t >= 0;
        if (reduction_ == Reduction::None) dst[n] = v;
        else total += v;
      }
      if (reduction_ == Reduction::Sum) dst[0] = total;
      if (reduction_ == Reduction::Mean) dst[0] = total / static_cast<scalar_t>(count);
    });
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override;
  std::string attrs() const override { return loss_attrs(reduction_, ignore_index_); }

 private:
  Reduction reduction_;
  int64_t ignore_index_;
};

// The gradient of nll_loss w.r.t. its input: zeros with -grad (scaled for Mean) at each target.
// It is linear in grad and its adjoint is nll_loss itself, so every order of derivative exists.
class NllLossBackwardOp final : public Op {
 public:
  NllLossBackwardOp(Reduction r, int64_t ignore_index, Shape input_sizes)
      : reduction_(r), ignore_index_(ignore_index), input_sizes_(std::move(input_sizes)) {}
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
      cuda::nll_loss_backward(in[0], in[1], reduction_, ignore_index_, out[0]);
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
      const acc_type<scalar_t> scale =
          reduction_ == Reduction::Mean
              ? 1.0 / static_cast<double>(counted_rows(target, g.target_stride, g.rows, ignore_index_))
              : 1.0;
      for (int64_t n = 0; n < g.rows; ++n) {
        const int64_t t = checked_target(target, g.target_stride, n, g.classes, ignore_index_);
        if (t >= 0) dst[n * g.row_stride + t * g.class_stride] = -gp[n * grad_stride] * scale;
      }
    });
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    return {call_op<NllLossOp>({grads[0], ctx.input(1)}, reduction_, ignore_index_), Tensor()};
  }
  std::string attrs() const override { return loss_attrs(reduction_, ignore_index_); }

 private:
  Reduction reduction_;
  int64_t ignore_index_;
  Shape input_sizes_;
};

TensorList NllLossOp::backward(const BackwardContext& ctx, const TensorList& grads) const {
  return {call_op<NllLossBackwardOp>({grads[0], ctx.input(1)}, reduction_, ignore_index_, ctx.input_meta(0).sizes),
          Tensor()};
}

// The gradient of cross_entropy w.r.t. its input from the loss's gradient, the log-probabilities
// and the targets: (exp(log_probs) - onehot(target)) * grad, scaled by 1/N for Mean.
class CrossEntropyBackwardOp final : public Op {
 public:
  CrossEntropyBackwardOp(Reduction r, int64_t ignore_index) : reduction_(r), ignore_index_(ignore_index) {}
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
      cuda::cross_entropy_backward(in[0], in[1], in[2], reduction_, ignore_index_, out[0]);
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
      const acc_type<scalar_t> scale =
          reduction_ == Reduction::Mean
              ? 1.0 / static_cast<double>(counted_rows(target, g.target_stride, g.rows, ignore_index_))
              : 1.0;
      for (int64_t n = 0; n < g.rows; ++n) {
        const int64_t t = checked_target(target, g.target_stride, n, g.classes, ignore_index_);
        if (t < 0) {  // an ignored row takes no gradient
          std::fill(dst + n * g.classes, dst + (n + 1) * g.classes, scalar_t(0));
          continue;
        }
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
    const Tensor unit = ones(target.sizes(), {.dtype = grad.dtype(), .device = grad.device()});
    // Zero on ignored rows.
    const Tensor diff = call_op<CrossEntropyBackwardOp>({unit, logp, target}, Reduction::None, ignore_index_);
    // Each row's factor: 0 where ignored, else 1 (divided by the number of counted rows for Mean).
    Tensor row_scale = ne(target, ignore_index_).to(grad.dtype());
    Tensor d_grad = mul(gg, diff);
    if (reduction_ == Reduction::None) {
      d_grad = batched ? sum(d_grad, {1}) : sum(d_grad);
    } else {
      d_grad = sum(d_grad);
    }
    if (reduction_ == Reduction::Mean) {
      const Tensor count = sum(row_scale);
      d_grad = div(d_grad, count);
      row_scale = div(row_scale, count);
    }
    const Tensor w = mul(grad, row_scale);
    const Tensor d_logp = mul(mul(gg, exp(logp)), batched ? w.unsqueeze(1) : w);
    return {d_grad, d_logp, Tensor()};
  }
  std::string attrs() const override { return loss_attrs(reduction_, ignore_index_); }

 private:
  Reduction reduction_;
  int64_t ignore_index_;
};

// nll_loss(log_softmax(input), target) as one op: outputs the loss and the log-probabilities (kept
// for the backward, never a user's tensor).
class CrossEntropyOp final : public Op {
 public:
  CrossEntropyOp(Reduction r, int64_t ignore_index) : reduction_(r), ignore_index_(ignore_index) {}
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
      cuda::cross_entropy_forward(in[0], in[1], reduction_, ignore_index_, out[0], out[1]);
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
      int64_t count = 0;
      for (int64_t n = 0; n < g.rows; ++n) {
        const scalar_t* row = x + n * g.row_stride;
        scalar_t m = -std::numeric_limits<scalar_t>::infinity();
        for (int64_t c = 0; c < g.classes; ++c) m = std::max(m, row[c * g.class_stride]);
        scalar_t s = 0;
        for (int64_t c = 0; c < g.classes; ++c) s += std::exp(row[c * g.class_stride] - m);
        const scalar_t lse = m + std::log(s);
        for (int64_t c = 0; c < g.classes; ++c) logp[n * g.classes + c] = row[c * g.class_stride] - lse;
        const int64_t t = checked_target(target, g.target_stride, n, g.classes, ignore_index_);
        const scalar_t v = t < 0 ? scalar_t(0) : scalar_t(-logp[n * g.classes + t]);
        count += t >= 0;
        if (reduction_ == Reduction::None) loss[n] = v;
        else total += v;
      }
      if (reduction_ == Reduction::Sum) loss[0] = total;
      if (reduction_ == Reduction::Mean) loss[0] = total / static_cast<scalar_t>(count);
    });
  }
  SaveSpec saves() const override { return {.inputs = true, .outputs = true, .output_mask = 0b10}; }
  // Outputs without a gradient stay undefined (no zeros are made for the log-probabilities).
  bool needs_zero_filled_grads() const override { return false; }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    const Tensor logp = ctx.output(1);
    Tensor g;
    if (grads[0].defined())
      g = call_op<CrossEntropyBackwardOp>({grads[0], logp, ctx.input(1)}, reduction_, ignore_index_);
    if (grads[1].defined()) {
      // The log-probabilities take a gradient only in higher-order derivatives (through the
      // backward op's use of them): log_softmax's backward, g - softmax * sum(g) over the classes.
      const Tensor& gl = grads[1];
      const Tensor through = sub(gl, mul(exp(logp), sum(gl, {logp.dim() - 1}, true)));
      g = g.defined() ? add(g, through) : through;
    }
    return {g, Tensor()};
  }
  std::string attrs() const override { return loss_attrs(reduction_, ignore_index_); }
  CrossEntropyInfo info() const { return {reduction_, ignore_index_}; }

 private:
  Reduction reduction_;
  int64_t ignore_index_;
};

}  // namespace

std::optional<CrossEntropyInfo> cross_entropy_info(const Op& op) {
  const auto* ce = dynamic_cast<const CrossEntropyOp*>(&op);
  if (ce == nullptr) return std::nullopt;
  return ce->info();
}

const char* reduction_name(Reduction r) {
  switch (r) {
    case Reduction::None: return "none";
    case Reduction::Mean: return "mean";
    case Reduction::Sum: return "sum";
  }
  return "?";
}

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

namespace {

// Checks a [C] weight of `op` for `classes` classes; returns it detached (weights take no gradient).
Tensor checked_weight(const char* op, const Tensor& weight, int64_t classes, const Tensor& input) {
  if (!weight.defined()) return weight;
  TG_CHECK(weight.dim() == 1 && weight.numel() == classes, "[", op, "] weight tensor should be defined either for all ",
           classes, " classes or no classes but got weight tensor of shape: ", shape_str(weight.sizes()));
  TG_CHECK(is_floating(weight.dtype()), "[", op, "] expected a floating weight, got ", dtype_name(weight.dtype()));
  TG_CHECK(weight.device() == input.device(), "[", op, "] expected weight on ", input.device().str(), ", got ",
           weight.device().str());
  return weight.detach();
}

// Class-index targets of an input [C], [N, C] or [N, C, d1, ..., dk]: checks them and returns the
// input as rows [M, C] (classes last) with the targets as [M], M = N * d1 * ... * dk (1 for [C]).
struct ClassRows {
  Tensor input, target;
};

ClassRows class_rows(const char* op, const Tensor& input, const Tensor& target) {
  TG_CHECK(input.dim() >= 1, "[", op, "] expected input of shape [C], [N, C] or [N, C, d1, ...], got ",
           shape_str(input.sizes()));
  TG_CHECK(target.dtype() == kInt64, "[", op, "] expected target of dtype int64 (class indices), got ",
           dtype_name(target.dtype()));
  Shape expected = input.sizes();
  expected.erase(expected.begin() + (input.dim() == 1 ? 0 : 1));
  TG_CHECK(target.sizes() == expected, "[", op, "] expected target of shape ", shape_str(expected), " for input ",
           shape_str(input.sizes()), ", got ", shape_str(target.sizes()));
  if (input.dim() <= 2) return {input, target};
  // Classes last, then one row per position.
  Shape order{0};
  for (int64_t d = 2; d < input.dim(); ++d) order.push_back(d);
  order.push_back(1);
  return {input.permute(order).reshape({-1, input.size(1)}), target.reshape({-1})};
}

// A per-row loss [M] back in the target's shape (Reduction::None), or the reduced loss as it is.
Tensor in_target_shape(const Tensor& loss, const Tensor& target, Reduction r) {
  return r == Reduction::None && loss.sizes() != target.sizes() ? loss.reshape(target.sizes()) : loss;
}

}  // namespace

Tensor nll_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  return nll_loss(input, target, NllLossOptions{.reduction = reduction});
}

Tensor nll_loss(const Tensor& input_in, const Tensor& target, const NllLossOptions& o) {
  const Tensor input = autocast::to_float(input_in);
  check_floating("nll_loss", input);
  const ClassRows rows = class_rows("nll_loss", input, target);
  const Tensor weight = checked_weight("nll_loss", o.weight, input.size(input.dim() == 1 ? 0 : 1), input);
  Tensor loss;
  if (weight.defined()) {
    const bool flat = rows.input.dim() == 1;
    loss = class_index_loss(flat ? rows.input.unsqueeze(0) : rows.input, flat ? rows.target.reshape({1}) : rows.target,
                            weight.to(input.dtype()), o.ignore_index, o.reduction, 0.0);
  } else {
    loss = call_op<NllLossOp>({rows.input, rows.target}, o.reduction, o.ignore_index);
  }
  return in_target_shape(loss, target, o.reduction);
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, Reduction reduction) {
  return cross_entropy(input, target, CrossEntropyOptions{.reduction = reduction});
}

Tensor cross_entropy(const Tensor& input_in, const Tensor& target_in, const CrossEntropyOptions& o) {
  const Tensor input = autocast::to_float(input_in);
  const Tensor target = autocast::to_float(target_in);
  check_floating("cross_entropy", input);
  TG_CHECK(input.dim() >= 1, "[cross_entropy] expected input of shape [C], [N, C] or [N, C, d1, ...], got ",
           shape_str(input.sizes()));
  TG_CHECK(o.label_smoothing >= 0.0 && o.label_smoothing <= 1.0,
           "[cross_entropy] label_smoothing must be between 0.0 and 1.0. Got: ", o.label_smoothing);
  const int64_t class_dim = input.dim() == 1 ? 0 : 1;
  const Tensor weight = checked_weight("cross_entropy", o.weight, input.size(class_dim), input);
  if (target.sizes() == input.sizes()) {
    // Class probabilities instead of indices (PyTorch decides by shape too).
    TG_CHECK(is_floating(target.dtype()), "[cross_entropy] expected a floating target of class probabilities for a ",
             "target of the input's shape ", shape_str(input.sizes()), ", got ", dtype_name(target.dtype()));
    TG_CHECK(o.ignore_index < 0, "[cross_entropy] ignore_index is not supported for class-probability targets (got ",
             o.ignore_index, ")");
    return class_probability_loss(log_softmax(input, class_dim), target, weight.defined() ? weight.to(input.dtype()) : weight,
                                  class_dim, o.reduction, o.label_smoothing);
  }
  const ClassRows rows = class_rows("cross_entropy", input, target);
  Tensor loss;
  if (!weight.defined() && o.label_smoothing == 0.0) {
    loss = dispatch(std::make_shared<const CrossEntropyOp>(o.reduction, o.ignore_index), {rows.input, rows.target})[0];
  } else {
    const bool flat = rows.input.dim() == 1;
    const Tensor x = flat ? rows.input.unsqueeze(0) : rows.input;
    loss = class_index_loss(log_softmax(x, 1), flat ? rows.target.reshape({1}) : rows.target,
                            weight.defined() ? weight.to(input.dtype()) : weight, o.ignore_index, o.reduction,
                            o.label_smoothing);
  }
  return in_target_shape(loss, target, o.reduction);
}

}  // namespace tg
