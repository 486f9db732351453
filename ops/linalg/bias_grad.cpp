// ActivationBackwardBiasGradOp: an activation's backward with the bias gradient below it (see the
// header).
#include "ops/linalg/bias_grad.h"

#include "ops/core/dispatch.h"
#include "ops/core/widen.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/elementwise.h"
#include "ops/reduce/reduce.h"
#include "ops/shape/view.h"
#include "tensor/grad_mode.h"

#ifdef TG_WITH_CUDA
#include "ops/linalg/cuda/bias_grad.h"
#endif

namespace tg {
namespace {

// The activations whose backward the op fuses with a bias gradient.
enum class Activation { Relu, GeluTanh };

// Inputs {g, y}: the output gradient and the ReLU's output, or the GELU's input. Outputs {h, db}.
class ActivationBackwardBiasGradOp final : public Op {
 public:
  explicit ActivationBackwardBiasGradOp(Activation act) : act_(act) {}
  const OpSchema& schema() const override {
    static const OpSchema relu{.name = "relu_backward_bias_grad"};
    static const OpSchema gelu{.name = "gelu_tanh_backward_bias_grad"};
    return act_ == Activation::Relu ? relu : gelu;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const char* op = schema().name.data();
    const char* what = act_ == Activation::Relu ? "ReLU output" : "GELU input";
    const Tensor& g = in[0];
    const Tensor& y = in[1];
    TG_CHECK(g.dim() >= 1, "[", op, "] expected a gradient with at least 1 dim, got a 0-dim tensor");
    TG_CHECK(g.sizes() == y.sizes(), "[", op, "] gradient of shape ", shape_str(g.sizes()), " and ", what,
             " of shape ", shape_str(y.sizes()), ": expected equal shapes");
    TG_CHECK(is_floating(g.dtype()) && g.dtype() == y.dtype(), "[", op, "] expected one floating dtype, got ",
             dtype_name(g.dtype()), " and ", dtype_name(y.dtype()));
    const Device d = common_device(op, {g, y});
    return {contiguous_meta(g.sizes(), g.dtype(), d), contiguous_meta({g.size(-1)}, g.dtype(), d)};
  }
  void eval(const TensorList& in, TensorList& out) const override {
    const Tensor g = in[0].contiguous(), y = in[1].contiguous();
#ifdef TG_WITH_CUDA
    if (g.is_cuda()) {
      if (act_ == Activation::Relu) cuda::relu_backward_bias_grad(g, y, out[0], out[1]);
      else cuda::gelu_tanh_backward_bias_grad(g, y, out[0], out[1]);
      return;
    }
#endif
    if (act_ == Activation::GeluTanh) {
      // The two ops on the CPU: the gradient's kernel, then its sum in the accumulation dtype.
      GradModeGuard no_grad(false);
      out[0].copy_(gelu_backward(g, y, true));
      out[1].copy_(sum_to(out[0], out[1].sizes()));
      return;
    }
    if (eval_widened(*this, in, out)) return;  // the CPU kernel sums 16-bit floats in float32
    const int64_t cols = out[1].numel();
    const int64_t rows = cols == 0 ? 0 : g.numel() / cols;
    TG_DISPATCH_FLOATING(g.dtype(), "relu_backward_bias_grad", [&] {
      // Distinct buffers, and a select rather than a branch: the row loop vectorizes, and a ReLU mask
      // (half its entries zero, at random) costs no branch mispredictions.
      const scalar_t* __restrict gp = g.data_ptr<scalar_t>();
      const scalar_t* __restrict yp = y.data_ptr<scalar_t>();
      scalar_t* __restrict hp = out[0].data_ptr<scalar_t>();
      scalar_t* __restrict db = out[1].data_ptr<scalar_t>();
      for (int64_t j = 0; j < cols; ++j) db[j] = 0;
      for (int64_t i = 0; i < rows; ++i) {
        const scalar_t* __restrict gr = gp + i * cols;
        const scalar_t* __restrict yr = yp + i * cols;
        scalar_t* __restrict hr = hp + i * cols;
        for (int64_t j = 0; j < cols; ++j) {
          const scalar_t gj = gr[j];  // loaded unconditionally, so the select needs no branch
          const scalar_t v = yr[j] > scalar_t(0) ? gj : scalar_t(0);
          hr[j] = v;
          db[j] += v;
        }
      }
    });
  }
  // Both results are linear in g through the activation's derivative: h's gradient plus db's spread
  // over the rows goes back through it. The ReLU's y gets none (as in threshold_backward); the GELU's
  // x gets g times the second derivative (as gelu_backward's).
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    Tensor total = grads[0].defined() ? grads[0] : Tensor();
    if (grads[1].defined()) {
      const Tensor spread = grads[1].expand(ctx.input_meta(0).sizes);
      total = total.defined() ? total + spread : spread;
    }
    if (!total.defined()) return {Tensor(), Tensor()};
    if (act_ == Activation::Relu)
      return {ctx.needs_input_grad(0) ? threshold_backward(total, ctx.input(1)) : Tensor(), Tensor()};
    const Tensor& x = ctx.input(1);
    return {ctx.needs_input_grad(0) ? gelu_backward(total, x, true) : Tensor(),
            ctx.needs_input_grad(1) ? mul(mul(total, ctx.input(0)), gelu_second_derivative(x, true)) : Tensor()};
  }
  bool needs_zero_filled_grads() const override { return false; }

 private:
  Activation act_;
};

}  // namespace

std::pair<Tensor, Tensor> relu_backward_bias_grad(const Tensor& g, const Tensor& y) {
  TensorList out = dispatch(relu_backward_bias_grad_op(), {g, y});
  return {out[0], out[1]};
}

OpPtr relu_backward_bias_grad_op() {
  static const OpPtr op = std::make_shared<const ActivationBackwardBiasGradOp>(Activation::Relu);
  return op;
}

std::pair<Tensor, Tensor> gelu_tanh_backward_bias_grad(const Tensor& g, const Tensor& x) {
  TensorList out = dispatch(gelu_tanh_backward_bias_grad_op(), {g, x});
  return {out[0], out[1]};
}

OpPtr gelu_tanh_backward_bias_grad_op() {
  static const OpPtr op = std::make_shared<const ActivationBackwardBiasGradOp>(Activation::GeluTanh);
  return op;
}

}  // namespace tg
