// Losses: mse_loss and l1_loss from elementwise ops, nll_loss as a fused op, cross_entropy from both.
#include "ops/loss.h"

#include <algorithm>

#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/reduce.h"
#include "ops/softmax.h"
#include "ops/unary.h"

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
    return {contiguous_meta(out, in[0].dtype(), common_device("nll_loss", in))};
  }
  void eval(const TensorList& in, TensorList& out) const override {
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
    return {contiguous_meta(input_sizes_, in[0].dtype(), common_device("nll_loss_backward", in))};
  }
  void eval(const TensorList& in, TensorList& out) const override {
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
      const scalar_t scale = reduction_ == Reduction::Mean ? scalar_t(1) / static_cast<scalar_t>(g.rows) : scalar_t(1);
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

}  // namespace

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  check_floating("mse_loss", input);
  const Tensor d = sub(input, target);
  return reduce_loss(mul(d, d), reduction);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  check_floating("l1_loss", input);
  return reduce_loss(abs(sub(input, target)), reduction);
}

Tensor nll_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  return call_op<NllLossOp>({input, target}, reduction);
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, Reduction reduction) {
  TG_CHECK(input.dim() == 1 || input.dim() == 2, "[cross_entropy] expected input of shape [N, C] or [C], got ",
           shape_str(input.sizes()));
  const int64_t class_dim = input.dim() == 2 ? 1 : 0;
  const Tensor logp = log_softmax(input, class_dim);
  if (is_floating(target.dtype())) {
    // Class probabilities instead of indices: -sum(p * log_softmax(x)) per sample.
    TG_CHECK(target.sizes() == input.sizes(), "[cross_entropy] probability targets must match the input shape ",
             shape_str(input.sizes()), ", got ", shape_str(target.sizes()));
    const Tensor per_sample = neg(sum(mul(target, logp), {class_dim}));
    return reduce_loss(per_sample, reduction);
  }
  return nll_loss(logp, target, reduction);
}

}  // namespace tg
