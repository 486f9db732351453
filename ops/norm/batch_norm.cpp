// batch_norm_training and batch_norm_backward: one op for the forward (batch statistics,
// normalization, affine and the running-statistics blend) and one for its gradient.
// Under create_graph the gradient is written with tg ops instead, so it is differentiable again.
#include "ops/norm/batch_norm.h"

#include <algorithm>
#include <cmath>

#include "ops/core/dispatch.h"
#include "ops/core/widen.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/unary.h"
#include "ops/reduce/reduce.h"
#include "ops/shape/view.h"
#include "tensor/grad_mode.h"

namespace tg {
namespace {

// Channel count and the [N, C, S] view of an input of sizes [N, C, *].
BatchNormKernelArgs kernel_args(const Shape& sizes, double momentum, double eps) {
  BatchNormKernelArgs a;
  a.N = sizes[0];
  a.C = sizes[1];
  a.S = 1;
  for (size_t d = 2; d < sizes.size(); ++d) a.S *= sizes[d];
  a.momentum = momentum;
  a.eps = eps;
  return a;
}

// The dtype of the saved batch statistics: float32 for 16-bit input, as PyTorch's. Rounded to 16
// bits, the mean of a nearly constant channel would swamp x - mean in the backward.
DType stats_dtype(DType x) { return is_low_precision(x) ? kFloat32 : x; }

// Checks a [C] operand of `op` against input x; `dtype` is the one it must have.
void check_channel_operand(const char* op, const char* what, const Tensor& t, const Tensor& x, DType dtype) {
  const int64_t C = x.sizes()[1];
  TG_CHECK(t.dim() == 1 && t.sizes()[0] == C, "[", op, "] ", what, " of shape ", shape_str(t.sizes()),
           " does not match [", C, "] expected for input of shape ", shape_str(x.sizes()));
  if (dtype == x.dtype())
    TG_CHECK(t.dtype() == dtype, "[", op, "] ", what, " has dtype ", dtype_name(t.dtype()), " but input has ",
             dtype_name(x.dtype()));
  else
    TG_CHECK(t.dtype() == dtype, "[", op, "] ", what, " has dtype ", dtype_name(t.dtype()), " but ",
             dtype_name(dtype), " was expected for input of dtype ", dtype_name(x.dtype()));
}
void check_channel_operand(const char* op, const char* what, const Tensor& t, const Tensor& x) {
  check_channel_operand(op, what, t, x, x.dtype());
}

// Checks input x [N, C, *] (float32/float64, more than one value per channel).
void check_input(const char* op, const Tensor& x) {
  TG_CHECK(x.dim() >= 2, "[", op, "] input of shape ", shape_str(x.sizes()),
           " has the wrong rank: expected [N, C, *] with at least 2 dims");
  TG_CHECK(is_floating(x.dtype()), "[", op, "] expected a floating input, got ", dtype_name(x.dtype()));
  const int64_t C = x.sizes()[1];
  TG_CHECK(x.numel() / (C == 0 ? 1 : C) > 1, "[", op,
           "] expected more than 1 value per channel when training, got input of shape ", shape_str(x.sizes()));
}

// Forward: inputs x, weight, bias[, running_mean, running_var]; outputs y, save_mean, save_invstd
// (float32 for 16-bit x) [, new_running_mean, new_running_var].
class BatchNormOp final : public Op {
 public:
  BatchNormOp(double momentum, double eps, bool running) : momentum_(momentum), eps_(eps), running_(running) {}
  const OpSchema& schema() const override {
    // Compute-intensive for the partitioner: recomputing it in the backward would repeat the batch
    // statistics (a full reduction, the running-stat update included), not just the normalization.
    static const OpSchema s{.name = "batch_norm", .flags = kComputeIntensive};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    TG_CHECK(in.size() == (running_ ? 5u : 3u), "[batch_norm] expected ", running_ ? 5 : 3, " operands, got ",
             in.size());
    const Tensor& x = in[0];
    check_input("batch_norm", x);
    const char* names[] = {"input", "weight", "bias", "running_mean", "running_var"};
    for (size_t i = 1; i < in.size(); ++i) check_channel_operand("batch_norm", names[i], in[i], x);
    const Device device = common_device("batch_norm", in);
    const Shape ch{x.sizes()[1]};
    std::vector<TensorMeta> out{contiguous_meta(x.sizes(), x.dtype(), device)};
    for (int k = 0; k < 2; ++k) out.push_back(contiguous_meta(ch, stats_dtype(x.dtype()), device));
    for (int k = 0; k < (running_ ? 2 : 0); ++k) out.push_back(contiguous_meta(ch, x.dtype(), device));
    return out;
  }
  void eval(const TensorList& in, TensorList& out) const override {
    if (eval_widened(*this, in, out)) return;  // 16-bit floats compute in float32
    if (out[0].numel() == 0) return;
    const BatchNormKernelArgs a = kernel_args(in[0].sizes(), momentum_, eps_);
    const Tensor rm = running_ ? in[3] : Tensor(), rv = running_ ? in[4] : Tensor();
    const Tensor nm = running_ ? out[3] : Tensor(), nv = running_ ? out[4] : Tensor();
#ifdef TG_WITH_CUDA
    if (out[0].is_cuda()) return cuda::batch_norm_forward(in[0], in[1], in[2], rm, rv, out[0], out[1], out[2], nm, nv, a);
#endif
    cpu_batch_norm_forward(in[0], in[1], in[2], rm, rv, out[0], out[1], out[2], nm, nv, a);
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override;
  // x and weight, and the batch statistics (not the normalized output).
  SaveSpec saves() const override { return {.inputs = true, .outputs = true, .output_mask = 0b110}; }
  bool needs_zero_filled_grads() const override { return false; }
  std::string attrs() const override {
    return "momentum=" + std::to_string(momentum_) + ", eps=" + std::to_string(eps_) +
           ", running_stats=" + (running_ ? "true" : "false");
  }

 private:
  double momentum_, eps_;
  bool running_;
};

// Backward: inputs grad_output, x, weight, save_mean, save_invstd; outputs grad_input, grad_weight, grad_bias.
class BatchNormBackwardOp final : public Op {
 public:
  explicit BatchNormBackwardOp(double eps) : eps_(eps) {}
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "batch_norm_backward"};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    TG_CHECK(in.size() == 5u, "[batch_norm_backward] expected 5 operands, got ", in.size());
    const Tensor& x = in[1];
    check_input("batch_norm_backward", x);
    TG_CHECK(in[0].sizes() == x.sizes() && in[0].dtype() == x.dtype(), "[batch_norm_backward] grad_output of shape ",
             shape_str(in[0].sizes()), " and dtype ", dtype_name(in[0].dtype()), " does not match input of shape ",
             shape_str(x.sizes()), " and dtype ", dtype_name(x.dtype()));
    check_channel_operand("batch_norm_backward", "weight", in[2], x);
    check_channel_operand("batch_norm_backward", "save_mean", in[3], x, stats_dtype(x.dtype()));
    check_channel_operand("batch_norm_backward", "save_invstd", in[4], x, stats_dtype(x.dtype()));
    const Device device = common_device("batch_norm_backward", in);
    const Shape ch{x.sizes()[1]};
    return {contiguous_meta(x.sizes(), x.dtype(), device), contiguous_meta(ch, x.dtype(), device),
            contiguous_meta(ch, x.dtype(), device)};
  }
  void eval(const TensorList& in, TensorList& out) const override {
    if (eval_widened(*this, in, out)) return;  // 16-bit floats compute in float32
    if (out[0].numel() == 0) return;
    const BatchNormKernelArgs a = kernel_args(in[1].sizes(), 0.0, eps_);
#ifdef TG_WITH_CUDA
    if (out[0].is_cuda()) return cuda::batch_norm_backward(in[0], in[1], in[2], in[3], in[4], out[0], out[1], out[2], a);
#endif
    cpu_batch_norm_backward(in[0], in[1], in[2], in[3], in[4], out[0], out[1], out[2], a);
  }
  // No backward of its own: batch_norm's gradient is built from tg ops whenever it must be
  // differentiable again (create_graph), so this op only runs where grad mode is off.
  std::string attrs() const override { return "eps=" + std::to_string(eps_); }

 private:
  double eps_;
};

TensorList BatchNormOp::backward(const BackwardContext& ctx, const TensorList& grads) const {
  TensorList result(running_ ? 5 : 3);
  const Tensor& gy = grads[0];
  if (!gy.defined()) return result;  // only the statistics outputs were used, and those carry no gradient
  const Tensor x = ctx.input(0), w = ctx.input(1);
  if (!is_grad_enabled()) {
    const TensorList g = dispatch(std::make_shared<const BatchNormBackwardOp>(eps_),
                                  {gy.contiguous(), x, w, ctx.output(1), ctx.output(2)});
    for (size_t i = 0; i < 3; ++i)
      if (ctx.needs_input_grad(i)) result[i] = g[i];
    return result;
  }
  // Differentiable form (create_graph): the statistics are recomputed from x with tg ops.
  Shape dims{0}, view_sizes(static_cast<size_t>(x.dim()), 1);
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  view_sizes[1] = x.sizes()[1];
  const double n = static_cast<double>(x.numel() / std::max<int64_t>(x.sizes()[1], 1));
  const Tensor centered = sub(x, mean(x, dims, true));
  const Tensor invstd = rsqrt(add(mean(mul(centered, centered), dims, true), eps_));
  const Tensor xhat = mul(centered, invstd);
  const Tensor gb = sum(gy, dims), gw = sum(mul(gy, xhat), dims);
  if (ctx.needs_input_grad(0)) {
    const Tensor inner = sub(sub(gy, div(gb.view(view_sizes), n)), mul(xhat, div(gw.view(view_sizes), n)));
    result[0] = mul(mul(w.view(view_sizes), invstd), inner);
  }
  if (ctx.needs_input_grad(1)) result[1] = gw;
  if (ctx.needs_input_grad(2)) result[2] = gb;
  return result;
}

template <typename T>
void forward_cpu(const T* x, const T* w, const T* b, const T* rm, const T* rv, T* y, T* save_mean, T* save_invstd,
                 T* new_mean, T* new_var, const BatchNormKernelArgs& a) {
  const int64_t count = a.N * a.S;
  for (int64_t c = 0; c < a.C; ++c) {
    double total = 0;
    for (int64_t n = 0; n < a.N; ++n) {
      const T* p = x + (n * a.C + c) * a.S;
      for (int64_t s = 0; s < a.S; ++s) total += static_cast<double>(p[s]);
    }
    const double mu = total / static_cast<double>(count);
    double sq = 0;
    for (int64_t n = 0; n < a.N; ++n) {
      const T* p = x + (n * a.C + c) * a.S;
      for (int64_t s = 0; s < a.S; ++s) {
        const double d = static_cast<double>(p[s]) - mu;
        sq += d * d;
      }
    }
    const double var = sq / static_cast<double>(count);
    const double invstd = 1.0 / std::sqrt(var + a.eps);
    const double scale = static_cast<double>(w[c]) * invstd;
    const double shift = static_cast<double>(b[c]) - mu * scale;
    for (int64_t n = 0; n < a.N; ++n) {
      const T* p = x + (n * a.C + c) * a.S;
      T* q = y + (n * a.C + c) * a.S;
      for (int64_t s = 0; s < a.S; ++s) q[s] = static_cast<T>(static_cast<double>(p[s]) * scale + shift);
    }
    save_mean[c] = static_cast<T>(mu);
    save_invstd[c] = static_cast<T>(invstd);
    if (new_mean) {
      const double unbiased = sq / static_cast<double>(count - 1);
      new_mean[c] = static_cast<T>((1.0 - a.momentum) * static_cast<double>(rm[c]) + a.momentum * mu);
      new_var[c] = static_cast<T>((1.0 - a.momentum) * static_cast<double>(rv[c]) + a.momentum * unbiased);
    }
  }
}

template <typename T>
void backward_cpu(const T* gy, const T* x, const T* w, const T* save_mean, const T* save_invstd, T* gx, T* gw, T* gb,
                  const BatchNormKernelArgs& a) {
  const double count = static_cast<double>(a.N * a.S);
  for (int64_t c = 0; c < a.C; ++c) {
    const double mu = static_cast<double>(save_mean[c]), invstd = static_cast<double>(save_invstd[c]);
    double sum_gy = 0, sum_gy_xhat = 0;
    for (int64_t n = 0; n < a.N; ++n) {
      const int64_t base = (n * a.C + c) * a.S;
      for (int64_t s = 0; s < a.S; ++s) {
        const double g = static_cast<double>(gy[base + s]);
        sum_gy += g;
        sum_gy_xhat += g * (static_cast<double>(x[base + s]) - mu) * invstd;
      }
    }
    gb[c] = static_cast<T>(sum_gy);
    gw[c] = static_cast<T>(sum_gy_xhat);
    const double k = static_cast<double>(w[c]) * invstd;
    for (int64_t n = 0; n < a.N; ++n) {
      const int64_t base = (n * a.C + c) * a.S;
      for (int64_t s = 0; s < a.S; ++s) {
        const double xhat = (static_cast<double>(x[base + s]) - mu) * invstd;
        gx[base + s] =
            static_cast<T>(k * (static_cast<double>(gy[base + s]) - sum_gy / count - xhat * sum_gy_xhat / count));
      }
    }
  }
}

}  // namespace

void cpu_batch_norm_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& running_mean,
                            const Tensor& running_var, const Tensor& y, const Tensor& save_mean,
                            const Tensor& save_invstd, const Tensor& new_mean, const Tensor& new_var,
                            const BatchNormKernelArgs& a) {
  TG_DISPATCH_FLOATING(x.dtype(), "batch_norm", [&] {
    forward_cpu<scalar_t>(x.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), b.data_ptr<scalar_t>(),
                          running_mean.data_ptr_or_null<scalar_t>(), running_var.data_ptr_or_null<scalar_t>(),
                          y.data_ptr<scalar_t>(), save_mean.data_ptr<scalar_t>(), save_invstd.data_ptr<scalar_t>(),
                          new_mean.data_ptr_or_null<scalar_t>(), new_var.data_ptr_or_null<scalar_t>(), a);
  });
}

void cpu_batch_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& save_mean,
                             const Tensor& save_invstd, const Tensor& gx, const Tensor& gw, const Tensor& gb,
                             const BatchNormKernelArgs& a) {
  TG_DISPATCH_FLOATING(x.dtype(), "batch_norm_backward", [&] {
    backward_cpu<scalar_t>(gy.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(),
                           save_mean.data_ptr<scalar_t>(), save_invstd.data_ptr<scalar_t>(), gx.data_ptr<scalar_t>(),
                           gw.data_ptr<scalar_t>(), gb.data_ptr<scalar_t>(), a);
  });
}

BatchNormTrainingResult batch_norm_training(const Tensor& input, const Tensor& weight, const Tensor& bias,
                                            const Tensor& running_mean, const Tensor& running_var, double momentum,
                                            double eps) {
  TG_CHECK(input.defined() && weight.defined() && bias.defined(),
           "[batch_norm] batch_norm_training needs input, weight and bias");
  TG_CHECK(running_mean.defined() == running_var.defined(),
           "[batch_norm] running_mean and running_var must both be given or both be undefined");
  TG_CHECK(eps >= 0, "[batch_norm] expected a non-negative eps, got ", eps);
  const bool running = running_mean.defined();
  // The kernels read contiguous operands; contiguous() is an op, so traces see any copy.
  TensorList in{input.contiguous(), weight.contiguous(), bias.contiguous()};
  if (running) {
    in.push_back(running_mean.contiguous());
    in.push_back(running_var.contiguous());
  }
  TensorList out = dispatch(std::make_shared<const BatchNormOp>(momentum, eps, running), std::move(in));
  BatchNormTrainingResult r;
  r.output = out[0];
  if (running) {
    r.running_mean = out[3].detach();
    r.running_var = out[4].detach();
  }
  return r;
}

}  // namespace tg
