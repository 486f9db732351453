// AddRowNormOp and AddRowNormBackwardOp: add_layer_norm's forward and backward (see the header).
// On CUDA the register-resident kernels take the common dtype sets (ops/norm/cuda/add_row_norm.h);
// everything else runs the separate kernels one after the other, with the same roundings.
#include "ops/norm/add_layer_norm.h"

#include "ops/core/autocast.h"
#include "ops/core/dispatch.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/copy.h"
#include "ops/factory/factory.h"
#include "ops/norm/norm.h"
#include "tensor/grad_mode.h"

#ifdef TG_WITH_CUDA
#include "ops/norm/cuda/add_row_norm.h"
#endif

namespace tg {
namespace {

constexpr const char* kOp = "add_layer_norm";

// The dtype of the statistics: float64 for a float64 sum, float32 otherwise.
DType stat_dtype(DType t) { return t == kFloat64 ? kFloat64 : kFloat32; }

// Runs tg ops inside a kernel: no tape, no tracing, no autocast.
struct InnerOps {
  NoGradGuard no_grad;
  OpObserverGuard no_observer{nullptr};
  AutocastOffGuard no_autocast;
};

// Checks an affine parameter against the sum (its dtype T): T's dtype, or float32 for 16-bit T.
void check_param(const char* what, const Tensor& p, DType t, const RowNormGeometry& g) {
  TG_CHECK(p.numel() == g.params(), "[", kOp, "] ", what, " of shape ", shape_str(p.sizes()), " has ", p.numel(),
           " elements, expected ", g.params());
  TG_CHECK(p.dtype() == t || (is_low_precision(t) && p.dtype() == kFloat32), "[", kOp, "] ", what, " has dtype ",
           dtype_name(p.dtype()), " but the sum has ", dtype_name(t),
           ": expected the sum's dtype, or float32 for a 16-bit sum");
}

// Forward: inputs residual, update[, weight][, bias]; outputs sum, normed, mean, rstd.
class AddRowNormOp final : public Op {
 public:
  AddRowNormOp(RowNormGeometry g, bool has_weight, bool has_bias, DType out_dtype)
      : g_(g), has_weight_(has_weight), has_bias_(has_bias), out_dtype_(out_dtype) {}
  const OpSchema& schema() const override {
    static const OpSchema s{.name = kOp};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const size_t expected = 2 + (has_weight_ ? 1 : 0) + (has_bias_ ? 1 : 0);
    TG_CHECK(in.size() == expected, "[", kOp, "] expected ", expected, " operands, got ", in.size());
    const Tensor &r = in[0], &u = in[1];
    check_floating(kOp, r);
    check_floating(kOp, u);
    TG_CHECK(r.sizes() == u.sizes(), "[", kOp, "] residual of shape ", shape_str(r.sizes()), " and update of shape ",
             shape_str(u.sizes()), ": expected one shape (add_layer_norm does not broadcast)");
    TG_CHECK(r.numel() == g_.rows() * g_.cols(), "[", kOp, "] input of shape ", shape_str(r.sizes()),
             " does not hold ", g_.rows(), " rows of ", g_.cols());
    TG_CHECK(is_floating(out_dtype_), "[", kOp, "] expected a floating output dtype, got ", dtype_name(out_dtype_));
    const DType t = promote_types(r.dtype(), u.dtype());
    for (size_t i = 2; i < in.size(); ++i) check_param(has_weight_ && i == 2 ? "weight" : "bias", in[i], t, g_);
    if (in.size() == 4)
      TG_CHECK(in[2].dtype() == in[3].dtype(), "[", kOp, "] weight has dtype ", dtype_name(in[2].dtype()),
               " but bias has ", dtype_name(in[3].dtype()));
    const Device device = common_device(kOp, in);
    const Shape stats{g_.rows()};
    return {contiguous_meta(r.sizes(), t, device), contiguous_meta(r.sizes(), out_dtype_, device),
            contiguous_meta(stats, stat_dtype(t), device), contiguous_meta(stats, stat_dtype(t), device)};
  }
  void eval(const TensorList& in, TensorList& out) const override {
    if (out[0].numel() == 0) return;
    const Tensor w = has_weight_ ? in[2] : Tensor();
    const Tensor b = has_bias_ ? in[has_weight_ ? 3 : 2] : Tensor();
#ifdef TG_WITH_CUDA
    if (out[0].is_cuda() && cuda::add_row_norm_forward(in[0], in[1], w, b, g_, out[0], out[1], out[2], out[3])) return;
#endif
    // The separate kernels: the sum, layer_norm in the sum's dtype, the cast.
    {
      InnerOps inner;
      copy_(out[0], add(in[0], in[1]));
    }
    const bool cast = out[1].dtype() != out[0].dtype();
    const Tensor y = cast ? empty(out[0].sizes(), {.dtype = out[0].dtype(), .device = out[0].device()}) : out[1];
    row_norm_forward_kernels(out[0], w, b, g_, y, out[2], out[3]);
    if (cast) {
      InnerOps inner;
      copy_(out[1], y);
    }
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override;
  // The weight, and the sum and statistics: neither the operands of the add nor the normed output.
  SaveSpec saves() const override {
    return {.inputs = has_weight_, .outputs = true, .output_mask = 0b1101, .input_mask = 0b100};
  }
  bool needs_zero_filled_grads() const override { return false; }
  std::string attrs() const override {
    return "channels=" + std::to_string(g_.channels) + ", eps=" + std::to_string(g_.eps) +
           ", out=" + std::string(dtype_name(out_dtype_));
  }

 private:
  RowNormGeometry g_;
  bool has_weight_, has_bias_;
  DType out_dtype_;
};

// Backward: inputs grad_normed, sum[, weight], mean, rstd[, grad_sum]; outputs the sum's gradient[,
// the same in low_dtype][, grad_weight][, grad_bias].
class AddRowNormBackwardOp final : public Op {
 public:
  AddRowNormBackwardOp(RowNormGeometry g, bool has_weight, bool has_grad_sum, std::optional<DType> low,
                       bool weight_grad, bool bias_grad, DType param_dtype)
      : g_(g),
        has_weight_(has_weight),
        has_grad_sum_(has_grad_sum),
        low_(low),
        weight_grad_(weight_grad),
        bias_grad_(bias_grad),
        param_dtype_(param_dtype) {}
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "add_layer_norm_backward"};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const char* op = "add_layer_norm_backward";
    const size_t expected = 4 + (has_weight_ ? 1 : 0) + (has_grad_sum_ ? 1 : 0);
    TG_CHECK(in.size() == expected, "[", op, "] expected ", expected, " operands, got ", in.size());
    const Tensor &gy = in[0], &x = in[1];
    check_floating(op, gy);
    TG_CHECK(gy.sizes() == x.sizes(), "[", op, "] grad_output of shape ", shape_str(gy.sizes()),
             " does not match the sum of shape ", shape_str(x.sizes()));
    if (has_grad_sum_) {
      const Tensor& acc = in.back();
      TG_CHECK(acc.sizes() == x.sizes() && acc.dtype() == x.dtype(), "[", op, "] the sum's gradient of shape ",
               shape_str(acc.sizes()), " and dtype ", dtype_name(acc.dtype()), " does not match the sum of shape ",
               shape_str(x.sizes()), " and dtype ", dtype_name(x.dtype()));
    }
    const Device device = common_device(op, in);
    std::vector<TensorMeta> out{contiguous_meta(x.sizes(), x.dtype(), device)};
    if (low_) out.push_back(contiguous_meta(x.sizes(), *low_, device));
    const Shape p{g_.params()};
    if (weight_grad_) out.push_back(contiguous_meta(p, param_dtype_, device));
    if (bias_grad_) out.push_back(contiguous_meta(p, param_dtype_, device));
    return out;
  }
  void eval(const TensorList& in, TensorList& out) const override {
    const Tensor &gy = in[0], &x = in[1];
    const Tensor w = has_weight_ ? in[2] : Tensor();
    const size_t stats = has_weight_ ? 3 : 2;
    const Tensor acc = has_grad_sum_ ? in.back() : Tensor();
    const size_t first_param = low_ ? 2 : 1;
    const Tensor low = low_ ? out[1] : Tensor();
    const Tensor gw = weight_grad_ ? out[first_param] : Tensor();
    const Tensor gb = bias_grad_ ? out[first_param + (weight_grad_ ? 1 : 0)] : Tensor();
#ifdef TG_WITH_CUDA
    if (x.is_cuda() &&
        cuda::add_row_norm_backward(gy, x, w, in[stats], in[stats + 1], g_, acc, out[0], low, gw, gb))
      return;
#endif
    // The separate kernels: the cast of gy, layer_norm's backward, the sum, its cast.
    Tensor g = gy;
    if (gy.dtype() != x.dtype()) {
      InnerOps inner;
      g = to(gy, gy.device(), x.dtype());
    }
    row_norm_backward_kernels(g, x, w, in[stats], in[stats + 1], g_, out[0], gw, gb);
    InnerOps inner;
    if (acc.defined()) copy_(out[0], add(out[0], acc));
    if (low.defined()) copy_(out[1], out[0]);
  }
  std::string attrs() const override { return "eps=" + std::to_string(g_.eps); }

 private:
  RowNormGeometry g_;
  bool has_weight_, has_grad_sum_;
  std::optional<DType> low_;
  bool weight_grad_, bias_grad_;
  DType param_dtype_;
};

TensorList AddRowNormOp::backward(const BackwardContext& ctx, const TensorList& grads) const {
  const size_t n_in = 2 + (has_weight_ ? 1 : 0) + (has_bias_ ? 1 : 0);
  TensorList result(n_in);
  const Tensor &grad_sum = grads[0], &grad_normed = grads[1];
  if (!grad_sum.defined() && !grad_normed.defined()) return result;
  const TensorMeta &rm = ctx.input_meta(0), &um = ctx.input_meta(1);
  const DType t = promote_types(rm.dtype, um.dtype);
  const bool weight_grad = has_weight_ && ctx.needs_input_grad(2);
  const size_t bias_at = has_weight_ ? 3 : 2;
  const bool bias_grad = has_bias_ && ctx.needs_input_grad(bias_at);
  const bool update_low = ctx.needs_input_grad(1) && um.dtype != t;
  Tensor total, low, gw, gb;
  if (!grad_normed.defined()) {
    total = grad_sum;
  } else if (is_grad_enabled()) {
    // create_graph: differentiable ops, so the gradient can be differentiated again.
    const RowNormGrads g = row_norm_grads_composed(ctx.output(0), has_weight_ ? ctx.input(2) : Tensor(),
                                                   grad_normed, g_, true, weight_grad, bias_grad);
    total = grad_sum.defined() ? add(g.input, grad_sum) : g.input;
    gw = g.weight;
    gb = g.bias;
  } else {
    const DType param_dtype = has_weight_ ? ctx.input_meta(2).dtype : (has_bias_ ? ctx.input_meta(2).dtype : t);
    TensorList in{grad_normed.contiguous(), ctx.output(0)};
    if (has_weight_) in.push_back(ctx.input(2));
    in.push_back(ctx.output(2));
    in.push_back(ctx.output(3));
    if (grad_sum.defined()) in.push_back(grad_sum.contiguous());
    const std::optional<DType> low_dtype = update_low ? std::optional<DType>(um.dtype) : std::nullopt;
    const TensorList g = dispatch(add_layer_norm_backward_op(g_, has_weight_, grad_sum.defined(), low_dtype,
                                                             weight_grad, bias_grad, param_dtype),
                                  std::move(in));
    total = g[0];
    size_t k = 1;
    if (update_low) low = g[k++];
    if (weight_grad) gw = g[k++];
    if (bias_grad) gb = g[k++];
  }
  if (ctx.needs_input_grad(0)) result[0] = rm.dtype == t ? total : to(total, total.device(), rm.dtype);
  if (ctx.needs_input_grad(1)) {
    result[1] = low.defined() ? low : (update_low ? to(total, total.device(), um.dtype) : total);
  }
  // Without a gradient of the normed rows the parameters get none.
  if (weight_grad && gw.defined()) {
    result[2] = to(gw, gw.device(), ctx.input_meta(2).dtype).reshape(ctx.input_meta(2).sizes);
  }
  if (bias_grad && gb.defined()) {
    const TensorMeta& m = ctx.input_meta(bias_at);
    result[bias_at] = to(gb, gb.device(), m.dtype).reshape(m.sizes);
  }
  return result;
}

}  // namespace

OpPtr add_layer_norm_op(const RowNormGeometry& geometry, bool has_weight, bool has_bias, DType out_dtype) {
  return std::make_shared<const AddRowNormOp>(geometry, has_weight, has_bias, out_dtype);
}

OpPtr add_layer_norm_backward_op(const RowNormGeometry& geometry, bool has_weight, bool has_grad_sum,
                                 std::optional<DType> low_dtype, bool weight_grad, bool bias_grad, DType param_dtype) {
  return std::make_shared<const AddRowNormBackwardOp>(geometry, has_weight, has_grad_sum, low_dtype, weight_grad,
                                                      bias_grad, param_dtype);
}

AddLayerNormResult add_layer_norm(const Tensor& residual, const Tensor& update, const Shape& normalized_shape,
                                  const Tensor& weight_in, const Tensor& bias_in, double eps,
                                  std::optional<DType> out_dtype) {
  TG_CHECK(residual.defined() && update.defined(), "[", kOp, "] got an undefined ",
           residual.defined() ? "update" : "residual");
  TG_CHECK(!out_dtype || is_floating(*out_dtype), "[", kOp, "] expected a floating output dtype, got ",
           dtype_name(*out_dtype));
  TG_CHECK(eps >= 0, "[", kOp, "] expected a non-negative eps, got ", eps);
  const DType t = promote_types(residual.dtype(), update.dtype());
  if (is_low_precision(t) && autocast::active_for(residual, autocast::kCudaList)) {
    // Autocast runs layer_norm on a float32 copy of a 16-bit sum: the separate ops say it best.
    AddLayerNormResult r;
    r.sum = add(residual, update);
    r.normed = layer_norm(r.sum, normalized_shape, weight_in, bias_in, eps);
    if (out_dtype && *out_dtype != r.normed.dtype()) r.normed = to(r.normed, r.normed.device(), *out_dtype);
    return r;
  }
  const Tensor weight = autocast::to_float(weight_in, autocast::kCudaList);
  const Tensor bias = autocast::to_float(bias_in, autocast::kCudaList);
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  bool ok = k >= 1 && k <= residual.dim();
  for (int64_t i = 0; ok && i < k; ++i) ok = residual.sizes()[residual.dim() - k + i] == normalized_shape[i];
  TG_CHECK(ok, "[", kOp, "] normalized_shape ", shape_str(normalized_shape),
           " does not match the trailing dims of residual ", shape_str(residual.sizes()),
           ": expected residual of shape [*, ", shape_str(normalized_shape).substr(1));
  for (const auto& [what, p] : {std::pair{"weight", weight}, std::pair{"bias", bias}})
    TG_CHECK(!p.defined() || p.sizes() == normalized_shape, "[", kOp, "] ", what, " of shape ", shape_str(p.sizes()),
             ": expected normalized_shape ", shape_str(normalized_shape));
  RowNormGeometry g;
  g.channels = 1;
  for (int64_t d = residual.dim() - k; d < residual.dim(); ++d) g.channels *= residual.sizes()[d];
  g.outer = g.channels == 0 ? 0 : residual.numel() / g.channels;
  g.eps = eps;
  TensorList in{residual.contiguous(), update.contiguous()};
  if (weight.defined()) in.push_back(weight.contiguous());
  if (bias.defined()) in.push_back(bias.contiguous());
  const TensorList out = dispatch(add_layer_norm_op(g, weight.defined(), bias.defined(), out_dtype.value_or(t)),
                                  std::move(in));
  return {out[0], out[1]};
}

}  // namespace tg
