// RowNormOp and RowNormBackwardOp: layer_norm's and group_norm's fused forward and backward.
//
// Note [Row normalization]
// Both norms normalize rows of a [outer, groups, channels, inner] view (RowNormGeometry). The
// statistics are accumulated in float32 for 16-bit inputs (double on the CPU): computing them in
// the input's 16 bits loses the mean's last bits and turns a small variance into 0, and a composed
// backward in 16 bits adds terms that cancel (NaN, or -2 where the truth is -1.078). The input
// gradient is the closed form
//     gx = rstd * (w*gy - mean(w*gy) - xhat * mean(w*gy*xhat)),   xhat = (x - mean) * rstd,
// evaluated in the accumulation type, so each element is rounded once. The parameters' gradients
// are column sums of gy*xhat and gy. Under create_graph the backward is written with tg ops
// instead (composed_backward), so it is differentiable again.
#include "ops/norm/row_norm.h"

#include <cmath>
#include <vector>

#include "ops/core/dispatch.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/copy.h"
#include "ops/elementwise/unary.h"
#include "ops/reduce/reduce.h"
#include "ops/shape/view.h"
#include "tensor/grad_mode.h"

namespace tg {
namespace {

// The dtype of the statistics: float64 for float64 inputs, float32 otherwise.
DType stat_dtype(DType x) { return x == kFloat64 ? kFloat64 : kFloat32; }

// Checks an affine parameter of a row norm over x.
void check_param(const char* op, const char* what, const Tensor& p, const Tensor& x, const RowNormGeometry& g) {
  TG_CHECK(p.numel() == g.params(), "[", op, "] ", what, " of shape ", shape_str(p.sizes()), " has ", p.numel(),
           " elements, expected ", g.params(), " for input of shape ", shape_str(x.sizes()));
  TG_CHECK(p.dtype() == x.dtype() || (is_low_precision(x.dtype()) && p.dtype() == kFloat32), "[", op, "] ", what,
           " has dtype ", dtype_name(p.dtype()), " but input has ", dtype_name(x.dtype()),
           ": expected the input's dtype, or float32 for a 16-bit input");
}

// Forward: inputs x[, weight][, bias] (contiguous); outputs y, mean, rstd.
class RowNormOp final : public Op {
 public:
  RowNormOp(const char* name, RowNormGeometry g, bool has_weight, bool has_bias)
      : schema_{.name = name}, g_(g), has_weight_(has_weight), has_bias_(has_bias) {}
  const OpSchema& schema() const override { return schema_; }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const char* op = schema_.name.data();
    const size_t expected = 1 + (has_weight_ ? 1 : 0) + (has_bias_ ? 1 : 0);
    TG_CHECK(in.size() == expected, "[", op, "] expected ", expected, " operands, got ", in.size());
    const Tensor& x = in[0];
    check_floating(op, x);
    TG_CHECK(x.numel() == g_.rows() * g_.cols(), "[", op, "] input of shape ", shape_str(x.sizes()),
             " does not hold ", g_.rows(), " rows of ", g_.cols());
    for (size_t i = 1; i < in.size(); ++i)
      check_param(op, (has_weight_ && i == 1) ? "weight" : "bias", in[i], x, g_);
    if (in.size() == 3)
      TG_CHECK(in[1].dtype() == in[2].dtype(), "[", op, "] weight has dtype ", dtype_name(in[1].dtype()),
               " but bias has ", dtype_name(in[2].dtype()));
    const Device device = common_device(op, in);
    const DType s = stat_dtype(x.dtype());
    return {contiguous_meta(x.sizes(), x.dtype(), device), contiguous_meta(Shape{g_.rows()}, s, device),
            contiguous_meta(Shape{g_.rows()}, s, device)};
  }
  void eval(const TensorList& in, TensorList& out) const override {
    if (out[0].numel() == 0) return;
    const Tensor w = has_weight_ ? in[1] : Tensor();
    const Tensor b = has_bias_ ? in[has_weight_ ? 2 : 1] : Tensor();
    row_norm_forward_kernels(in[0], w, b, g_, out[0], out[1], out[2]);
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override;
  // x and the parameters, and the statistics (not the normalized output).
  SaveSpec saves() const override { return {.inputs = true, .outputs = true, .output_mask = 0b110}; }
  bool needs_zero_filled_grads() const override { return false; }
  std::string attrs() const override {
    return "groups=" + std::to_string(g_.groups) + ", channels=" + std::to_string(g_.channels) +
           ", inner=" + std::to_string(g_.inner) + ", eps=" + std::to_string(g_.eps);
  }

 private:
  OpSchema schema_;
  RowNormGeometry g_;
  bool has_weight_, has_bias_;
  TensorList composed_backward(const BackwardContext& ctx, const Tensor& gy) const;
  friend std::optional<RowNormInfo> tg::row_norm_info(const Op& op);
};

// Backward: inputs gy, x[, weight], mean, rstd; outputs gx[, grad_weight][, grad_bias].
class RowNormBackwardOp final : public Op {
 public:
  RowNormBackwardOp(const char* name, RowNormGeometry g, bool has_weight, bool weight_grad, bool bias_grad,
                    DType param_dtype)
      : schema_{.name = name},
        g_(g),
        has_weight_(has_weight),
        weight_grad_(weight_grad),
        bias_grad_(bias_grad),
        param_dtype_(param_dtype) {}
  const OpSchema& schema() const override { return schema_; }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const char* op = schema_.name.data();
    const size_t expected = 4 + (has_weight_ ? 1 : 0);
    TG_CHECK(in.size() == expected, "[", op, "] expected ", expected, " operands, got ", in.size());
    const Tensor &gy = in[0], &x = in[1];
    TG_CHECK(gy.sizes() == x.sizes() && gy.dtype() == x.dtype(), "[", op, "] grad_output of shape ",
             shape_str(gy.sizes()), " and dtype ", dtype_name(gy.dtype()), " does not match input of shape ",
             shape_str(x.sizes()), " and dtype ", dtype_name(x.dtype()));
    const Device device = common_device(op, in);
    std::vector<TensorMeta> out{contiguous_meta(x.sizes(), x.dtype(), device)};
    const Shape p{g_.params()};
    if (weight_grad_) out.push_back(contiguous_meta(p, param_dtype_, device));
    if (bias_grad_) out.push_back(contiguous_meta(p, param_dtype_, device));
    return out;
  }
  void eval(const TensorList& in, TensorList& out) const override {
    // An empty input still writes its parameters' gradients (zeros).
    const size_t k = has_weight_ ? 3 : 2;
    const Tensor w = has_weight_ ? in[2] : Tensor();
    const Tensor gw = weight_grad_ ? out[1] : Tensor();
    const Tensor gb = bias_grad_ ? out[weight_grad_ ? 2 : 1] : Tensor();
    row_norm_backward_kernels(in[0], in[1], w, in[k], in[k + 1], g_, out[0], gw, gb);
  }
  // No backward of its own: under create_graph RowNormOp writes its gradient with tg ops instead.
  std::string attrs() const override { return "eps=" + std::to_string(g_.eps); }

 private:
  OpSchema schema_;
  RowNormGeometry g_;
  bool has_weight_, weight_grad_, bias_grad_;
  DType param_dtype_;
  friend std::optional<RowNormBackwardInfo> tg::row_norm_backward_info(const Op& op);
};

TensorList RowNormOp::backward(const BackwardContext& ctx, const TensorList& grads) const {
  const size_t n_in = 1 + (has_weight_ ? 1 : 0) + (has_bias_ ? 1 : 0);
  TensorList result(n_in);
  const Tensor& gy = grads[0];
  if (!gy.defined()) return result;  // only the statistics were used, and they carry no gradient
  if (is_grad_enabled()) return composed_backward(ctx, gy);
  const bool weight_grad = has_weight_ && ctx.needs_input_grad(1);
  const size_t bias_at = has_weight_ ? 2 : 1;
  const bool bias_grad = has_bias_ && ctx.needs_input_grad(bias_at);
  const DType param_dtype = has_weight_ ? ctx.input_meta(1).dtype
                                        : (has_bias_ ? ctx.input_meta(bias_at).dtype : ctx.input_meta(0).dtype);
  TensorList in{gy.contiguous(), ctx.input(0)};
  if (has_weight_) in.push_back(ctx.input(1));
  in.push_back(ctx.output(1));
  in.push_back(ctx.output(2));
  const TensorList g = dispatch(std::make_shared<const RowNormBackwardOp>(schema_.name.data(), g_, has_weight_,
                                                                          weight_grad, bias_grad, param_dtype),
                                std::move(in));
  if (ctx.needs_input_grad(0)) result[0] = g[0];
  if (weight_grad) result[1] = g[1].view(ctx.input_meta(1).sizes);
  if (bias_grad) result[bias_at] = g[weight_grad ? 2 : 1].view(ctx.input_meta(bias_at).sizes);
  return result;
}

// The same gradients with differentiable tg ops (create_graph), in the statistics' dtype.
TensorList RowNormOp::composed_backward(const BackwardContext& ctx, const Tensor& gy) const {
  const size_t n_in = 1 + (has_weight_ ? 1 : 0) + (has_bias_ ? 1 : 0);
  const size_t bias_at = has_weight_ ? 2 : 1;
  const bool weight_grad = has_weight_ && ctx.needs_input_grad(1);
  const bool bias_grad = has_bias_ && ctx.needs_input_grad(bias_at);
  const RowNormGrads g = row_norm_grads_composed(ctx.input(0), has_weight_ ? ctx.input(1) : Tensor(), gy, g_,
                                                 ctx.needs_input_grad(0), weight_grad, bias_grad);
  TensorList result(n_in);
  result[0] = g.input;
  if (weight_grad) result[1] = to(g.weight, g.weight.device(), ctx.input_meta(1).dtype).reshape(ctx.input_meta(1).sizes);
  if (bias_grad) {
    const TensorMeta& m = ctx.input_meta(bias_at);
    result[bias_at] = to(g.bias, g.bias.device(), m.dtype).reshape(m.sizes);
  }
  return result;
}

template <typename T, typename W>
void forward_cpu(const T* x, const W* w, const W* b, const RowNormGeometry& g, T* y, void* mean_out, void* rstd_out,
                 bool stats_double) {
  const int64_t cols = g.cols();
  for (int64_t r = 0; r < g.rows(); ++r) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    double s = 0;
    for (int64_t j = 0; j < cols; ++j) s += static_cast<double>(xr[j]);
    const double mu = s / static_cast<double>(cols);
    double q = 0;
    for (int64_t j = 0; j < cols; ++j) {
      const double d = static_cast<double>(xr[j]) - mu;
      q += d * d;
    }
    const double rstd = 1.0 / std::sqrt(q / static_cast<double>(cols) + g.eps);
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t p = g.param_of(r, j);
      double v = (static_cast<double>(xr[j]) - mu) * rstd;
      if (w) v *= static_cast<double>(w[p]);
      if (b) v += static_cast<double>(b[p]);
      yr[j] = static_cast<T>(v);
    }
    if (stats_double) {
      static_cast<double*>(mean_out)[r] = mu;
      static_cast<double*>(rstd_out)[r] = rstd;
    } else {
      static_cast<float*>(mean_out)[r] = static_cast<float>(mu);
      static_cast<float*>(rstd_out)[r] = static_cast<float>(rstd);
    }
  }
}

template <typename T, typename W, typename S>
void backward_cpu(const T* gy, const T* x, const W* w, const S* mean, const S* rstd_in, const RowNormGeometry& g,
                  T* gx, W* gw, W* gb) {
  const int64_t cols = g.cols();
  const double n = static_cast<double>(cols);
  std::vector<double> sum_gw(gw ? static_cast<size_t>(g.params()) : 0, 0.0);
  std::vector<double> sum_gb(gb ? static_cast<size_t>(g.params()) : 0, 0.0);
  for (int64_t r = 0; r < g.rows(); ++r) {
    const T* gr = gy + r * cols;
    const T* xr = x + r * cols;
    const double mu = static_cast<double>(mean[r]), rstd = static_cast<double>(rstd_in[r]);
    double a = 0, c = 0;  // sum(w*gy), sum(w*gy*xhat)
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t p = g.param_of(r, j);
      const double gv = static_cast<double>(gr[j]);
      const double xhat = (static_cast<double>(xr[j]) - mu) * rstd;
      const double wg = w ? gv * static_cast<double>(w[p]) : gv;
      a += wg;
      c += wg * xhat;
      if (gw) sum_gw[static_cast<size_t>(p)] += gv * xhat;
      if (gb) sum_gb[static_cast<size_t>(p)] += gv;
    }
    if (!gx) continue;
    T* out = gx + r * cols;
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t p = g.param_of(r, j);
      const double gv = static_cast<double>(gr[j]);
      const double xhat = (static_cast<double>(xr[j]) - mu) * rstd;
      const double wg = w ? gv * static_cast<double>(w[p]) : gv;
      out[j] = static_cast<T>(rstd * (wg - a / n - xhat * c / n));
    }
  }
  for (size_t p = 0; p < sum_gw.size(); ++p) gw[p] = static_cast<W>(sum_gw[p]);
  for (size_t p = 0; p < sum_gb.size(); ++p) gb[p] = static_cast<W>(sum_gb[p]);
}

}  // namespace

void cpu_row_norm_forward(const Tensor& x, const Tensor& w, const Tensor& b, const RowNormGeometry& g,
                          const Tensor& y, const Tensor& mean, const Tensor& rstd) {
  const DType params = row_norm_param_dtype(x, w, b);
  const bool stats_double = mean.dtype() == kFloat64;
  dispatch_row_norm("row_norm", x.dtype(), params, [&]<typename T, typename W>() {
    forward_cpu<T, W>(x.data_ptr<T>(), w.data_ptr_or_null<W>(), b.data_ptr_or_null<W>(), g, y.data_ptr<T>(),
                      mean.raw_data(), rstd.raw_data(), stats_double);
  });
}

void cpu_row_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& mean,
                           const Tensor& rstd, const RowNormGeometry& g, const Tensor& gx, const Tensor& gw,
                           const Tensor& gb) {
  const DType params = w.defined() ? w.dtype() : row_norm_param_dtype(x, gw, gb);
  dispatch_row_norm("row_norm_backward", x.dtype(), params, [&]<typename T, typename W>() {
    if (mean.dtype() == kFloat64)
      backward_cpu<T, W, double>(gy.data_ptr<T>(), x.data_ptr<T>(), w.data_ptr_or_null<W>(), mean.data_ptr<double>(),
                                 rstd.data_ptr<double>(), g, gx.data_ptr_or_null<T>(), gw.data_ptr_or_null<W>(),
                                 gb.data_ptr_or_null<W>());
    else
      backward_cpu<T, W, float>(gy.data_ptr<T>(), x.data_ptr<T>(), w.data_ptr_or_null<W>(), mean.data_ptr<float>(),
                                rstd.data_ptr<float>(), g, gx.data_ptr_or_null<T>(), gw.data_ptr_or_null<W>(),
                                gb.data_ptr_or_null<W>());
  });
}

void row_norm_forward_kernels(const Tensor& x, const Tensor& w, const Tensor& b, const RowNormGeometry& g,
                              const Tensor& y, const Tensor& mean, const Tensor& rstd) {
#ifdef TG_WITH_CUDA
  if (x.is_cuda()) return cuda::row_norm_forward(x, w, b, g, y, mean, rstd);
#endif
  cpu_row_norm_forward(x, w, b, g, y, mean, rstd);
}

void row_norm_backward_kernels(const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& mean,
                               const Tensor& rstd, const RowNormGeometry& g, const Tensor& gx, const Tensor& gw,
                               const Tensor& gb) {
#ifdef TG_WITH_CUDA
  if (x.is_cuda()) return cuda::row_norm_backward(gy, x, w, mean, rstd, g, gx, gw, gb);
#endif
  cpu_row_norm_backward(gy, x, w, mean, rstd, g, gx, gw, gb);
}

std::optional<RowNormInfo> row_norm_info(const Op& op) {
  const auto* norm = dynamic_cast<const RowNormOp*>(&op);
  if (norm == nullptr) return std::nullopt;
  return RowNormInfo{std::string(norm->schema_.name), norm->g_, norm->has_weight_, norm->has_bias_};
}

std::optional<RowNormBackwardInfo> row_norm_backward_info(const Op& op) {
  const auto* norm = dynamic_cast<const RowNormBackwardOp*>(&op);
  if (norm == nullptr) return std::nullopt;
  return RowNormBackwardInfo{std::string(norm->schema_.name), norm->g_, norm->has_weight_, norm->weight_grad_,
                             norm->bias_grad_, norm->param_dtype_};
}

RowNormGrads row_norm_grads_composed(const Tensor& x_in, const Tensor& w, const Tensor& gy_in,
                                     const RowNormGeometry& geometry, bool input_grad, bool weight_grad,
                                     bool bias_grad) {
  RowNormGrads result;
  const RowNormGeometry& g = geometry;
  const DType acc = stat_dtype(x_in.dtype());
  const Shape view4{g.outer, g.groups, g.channels, g.inner};
  const Shape param4{1, g.groups, g.channels, 1};
  const Tensor x = to(x_in, x_in.device(), acc).reshape(view4);
  const Tensor gy = to(gy_in, gy_in.device(), acc).reshape(view4);
  const double n = static_cast<double>(g.cols());
  const Tensor centered = sub(x, mean(x, {2, 3}, true));
  const Tensor rstd = rsqrt(add(mean(mul(centered, centered), {2, 3}, true), g.eps));
  const Tensor xhat = mul(centered, rstd);
  Tensor wg = gy;
  if (w.defined()) wg = mul(gy, to(w, x_in.device(), acc).reshape(param4));
  if (input_grad) {
    const Tensor inner = sub(sub(wg, div(sum(wg, {2, 3}, true), n)), mul(xhat, div(sum(mul(wg, xhat), {2, 3}, true), n)));
    result.input = to(mul(rstd, inner), x_in.device(), x_in.dtype()).reshape(x_in.sizes());
  }
  if (weight_grad) result.weight = sum(mul(gy, xhat), {0, 3}).reshape({g.params()});
  if (bias_grad) result.bias = sum(gy, {0, 3}).reshape({g.params()});
  return result;
}

RowNormResult row_norm(const char* op, const Tensor& input, const Tensor& weight, const Tensor& bias,
                       const RowNormGeometry& geometry) {
  TG_CHECK(geometry.eps >= 0, "[", op, "] expected a non-negative eps, got ", geometry.eps);
  // The kernels read contiguous operands; contiguous() is an op, so traces see any copy.
  TensorList in{input.contiguous()};
  if (weight.defined()) in.push_back(weight.contiguous());
  if (bias.defined()) in.push_back(bias.contiguous());
  TensorList out =
      dispatch(std::make_shared<const RowNormOp>(op, geometry, weight.defined(), bias.defined()), std::move(in));
  return {out[0], out[1], out[2]};
}

}  // namespace tg
