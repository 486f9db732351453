// Convolution ops: the 2-D/3-D forward and its two backward products, each an op with a shape rule,
// CPU and CUDA kernels and a VJP written with the other two (all three are bilinear), plus conv1d and
// the "same"/"valid" padding rules as compositions. Transposed convolutions: ops/conv/conv_transpose.cpp.
#include "ops/conv/conv.h"

#include "ops/conv/conv_kernels.h"
#include "ops/core/autocast.h"
#include "ops/core/dispatch.h"
#include "ops/core/widen.h"
#include "ops/reduce/reduce.h"
#include "ops/shape/pad.h"
#include "ops/shape/view.h"

namespace tg {
namespace {

std::string list_str(const std::array<int64_t, 3>& a, int n) {
  return shape_str(Shape(a.begin(), a.begin() + n));
}

// Output extent of spatial dim d.
int64_t out_extent(int64_t in, int64_t k, const ConvParams& p, int d) {
  return (in + 2 * p.padding[d] - p.dilation[d] * (k - 1) - 1) / p.stride[d] + 1;
}

void check_params(const char* op, const ConvParams& p) {
  for (int d = 0; d < p.spatial; ++d) {
    TG_CHECK(p.stride[d] > 0, "[", op, "] expected positive stride, got ", list_str(p.stride, p.spatial));
    TG_CHECK(p.padding[d] >= 0, "[", op, "] expected non-negative padding, got ", list_str(p.padding, p.spatial));
    TG_CHECK(p.dilation[d] > 0, "[", op, "] expected positive dilation, got ", list_str(p.dilation, p.spatial));
  }
  TG_CHECK(p.groups > 0, "[", op, "] expected positive groups, got ", p.groups);
}

void check_same_dtype(const char* op, const Tensor& a, const char* wa, const Tensor& b, const char* wb) {
  TG_CHECK(a.dtype() == b.dtype(), "[", op, "] expected ", wa, " and ", wb, " to have the same dtype, got ",
           dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
}

// Validates input [N, C, *spatial] against weight [O, C/groups, *kernel]; returns the output sizes.
Shape conv_output_sizes(const char* op, const Shape& x, const Shape& w, const ConvParams& p) {
  check_params(op, p);
  const size_t rank = static_cast<size_t>(p.spatial) + 2;
  const bool three = p.spatial == 3;
  TG_CHECK(x.size() == rank, "[", op, "] expected a ", rank, "-D input ", three ? "[N, C, D, H, W]" : "[N, C, H, W]",
           ", got shape ", shape_str(x));
  TG_CHECK(w.size() == rank, "[", op, "] expected a ", rank, "-D weight ",
           three ? "[C_out, C_in/groups, kD, kH, kW]" : "[C_out, C_in/groups, kH, kW]", ", got shape ", shape_str(w));
  bool nonzero = true;
  for (int64_t v : w) nonzero = nonzero && v > 0;
  TG_CHECK(nonzero, "[", op, "] expected a weight with non-zero channel and kernel sizes, got shape ", shape_str(w));
  TG_CHECK(x[1] == w[1] * p.groups, "[", op, "] expected input of shape ", shape_str(x), " to have ", w[1] * p.groups,
           " channels (weight ", shape_str(w), " times groups=", p.groups, "), but got ", x[1], " channels");
  TG_CHECK(w[0] % p.groups == 0, "[", op, "] expected out_channels (", w[0], ") to be divisible by groups (", p.groups,
           ")");
  Shape out{x[0], w[0]};
  std::string span_str;
  bool fits = true;
  for (int d = 0; d < p.spatial; ++d) {
    const size_t at = static_cast<size_t>(2 + d);
    TG_CHECK(x[at] > 0, "[", op, "] expected an input with non-zero spatial sizes, got shape ", shape_str(x));
    const int64_t span = p.dilation[d] * (w[at] - 1) + 1;
    if (d > 0) span_str += 'x';
    span_str += std::to_string(span);
    fits = fits && x[at] + 2 * p.padding[d] >= span;
    out.push_back(out_extent(x[at], w[at], p, d));
  }
  TG_CHECK(fits, "[", op, "] input of shape ", shape_str(x), " with padding ", list_str(p.padding, p.spatial),
           " is smaller than the dilated kernel (", span_str, ")");
  return out;
}

void check_operands(const char* op, const TensorList& in) {
  for (const Tensor& t : in) check_floating(op, t);
  for (size_t i = 1; i < in.size(); ++i) check_same_dtype(op, in[0], "the first operand", in[i], "the others");
}

class ConvOp final : public Op {
 public:
  ConvOp(ConvParams p, bool has_bias) : p_(p), has_bias_(has_bias) {}
  const OpSchema& schema() const override {
    static const OpSchema s2{.name = "conv2d", .flags = kComputeIntensive},
        s3{.name = "conv3d", .flags = kComputeIntensive};
    return p_.spatial == 3 ? s3 : s2;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const char* op = schema().name.data();
    check_operands(op, in);
    const Shape out = conv_output_sizes(op, in[0].sizes(), in[1].sizes(), p_);
    TG_CHECK(in.size() == (has_bias_ ? 3u : 2u), "[", op, "] expected ", has_bias_ ? 3 : 2, " operands, got ", in.size());
    if (has_bias_)
      TG_CHECK(in[2].sizes() == Shape{in[1].size(0)}, "[", op, "] expected bias of shape [", in[1].size(0),
               "] (out_channels), got ", shape_str(in[2].sizes()));
    return single_output(contiguous_meta(out, in[0].dtype(), common_device(op, in)));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    if (out[0].numel() == 0) return;
    const Tensor bias = in.size() == 3 ? in[2] : Tensor();
#ifdef TG_WITH_CUDA
    if (out[0].is_cuda()) return cuda::conv_forward(in[0], in[1], bias, out[0], p_);
#endif
    if (eval_widened(*this, in, out)) return;  // the CPU convolutions compute 16-bit floats in float32
    cpu_conv_forward(in[0], in[1], bias, out[0], p_);
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override;
  std::string attrs() const override { return p_.str(); }

 private:
  ConvParams p_;
  bool has_bias_;
};

// grad_input = conv2d_backward_input(grad_output, weight): linear in each argument.
class ConvBackwardInputOp final : public Op {
 public:
  ConvBackwardInputOp(Shape input_sizes, ConvParams p) : input_sizes_(std::move(input_sizes)), p_(p) {}
  const OpSchema& schema() const override {
    static const OpSchema s2{.name = "conv2d_backward_input", .flags = kComputeIntensive},
        s3{.name = "conv3d_backward_input", .flags = kComputeIntensive};
    return p_.spatial == 3 ? s3 : s2;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const char* op = schema().name.data();
    check_operands(op, in);
    const Shape out = conv_output_sizes(op, input_sizes_, in[1].sizes(), p_);
    TG_CHECK(in[0].sizes() == out, "[", op, "] expected grad_output of shape ", shape_str(out), ", got ",
             shape_str(in[0].sizes()));
    return single_output(contiguous_meta(input_sizes_, in[0].dtype(), common_device(op, in)));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    if (out[0].numel() == 0) return;
#ifdef TG_WITH_CUDA
    if (out[0].is_cuda()) return cuda::conv_backward_input(in[0], in[1], out[0], p_);
#endif
    if (eval_widened(*this, in, out)) return;  // the CPU convolutions compute 16-bit floats in float32
    cpu_conv_backward_input(in[0], in[1], out[0], p_);
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override;
  std::string attrs() const override { return p_.str() + ", input_sizes=" + shape_str(input_sizes_); }

 private:
  Shape input_sizes_;
  ConvParams p_;
};

// grad_weight = conv2d_backward_weight(grad_output, input): linear in each argument.
class ConvBackwardWeightOp final : public Op {
 public:
  ConvBackwardWeightOp(Shape weight_sizes, ConvParams p) : weight_sizes_(std::move(weight_sizes)), p_(p) {}
  const OpSchema& schema() const override {
    static const OpSchema s2{.name = "conv2d_backward_weight", .flags = kComputeIntensive},
        s3{.name = "conv3d_backward_weight", .flags = kComputeIntensive};
    return p_.spatial == 3 ? s3 : s2;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const char* op = schema().name.data();
    check_operands(op, in);
    const Shape out = conv_output_sizes(op, in[1].sizes(), weight_sizes_, p_);
    TG_CHECK(in[0].sizes() == out, "[", op, "] expected grad_output of shape ", shape_str(out), ", got ",
             shape_str(in[0].sizes()));
    return single_output(contiguous_meta(weight_sizes_, in[0].dtype(), common_device(op, in)));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    if (out[0].numel() == 0) return;
#ifdef TG_WITH_CUDA
    if (out[0].is_cuda()) return cuda::conv_backward_weight(in[0], in[1], out[0], p_);
#endif
    if (eval_widened(*this, in, out)) return;  // the CPU convolutions compute 16-bit floats in float32
    cpu_conv_backward_weight(in[0], in[1], out[0], p_);
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override;
  std::string attrs() const override { return p_.str() + ", weight_sizes=" + shape_str(weight_sizes_); }

 private:
  Shape weight_sizes_;
  ConvParams p_;
};

// The kernels read contiguous operands; contiguous() is an op, so traces see the copy.
Tensor packed(const Tensor& t) { return t.contiguous(); }

Tensor forward_op(const Tensor& x, const Tensor& w, const Tensor& b, const ConvParams& p) {
  if (b.defined()) return call_op<ConvOp>({packed(x), packed(w), packed(b)}, p, true);
  return call_op<ConvOp>({packed(x), packed(w)}, p, false);
}

TensorList ConvOp::backward(const BackwardContext& ctx, const TensorList& grads) const {
  const Tensor& g = grads[0];
  TensorList out;
  out.push_back(ctx.needs_input_grad(0) ? conv2d_backward_input(g, ctx.input(1), ctx.input_meta(0).sizes, p_)
                                        : Tensor());
  out.push_back(ctx.needs_input_grad(1) ? conv2d_backward_weight(g, ctx.input(0), ctx.input_meta(1).sizes, p_)
                                        : Tensor());
  if (has_bias_) {
    Shape dims{0};
    for (int64_t d = 2; d < g.dim(); ++d) dims.push_back(d);
    out.push_back(ctx.needs_input_grad(2) ? sum(g, dims) : Tensor());
  }
  return out;
}

TensorList ConvBackwardInputOp::backward(const BackwardContext& ctx, const TensorList& grads) const {
  // gx = A_w^T gy: d/d gy of <ggx, gx> is conv(ggx, w); d/dw is conv2d_backward_weight(gy, ggx).
  const Tensor& gg = grads[0];
  Tensor d_gy, d_w;
  if (ctx.needs_input_grad(0)) d_gy = forward_op(gg, ctx.input(1), Tensor(), p_);
  if (ctx.needs_input_grad(1)) d_w = conv2d_backward_weight(ctx.input(0), gg, ctx.input_meta(1).sizes, p_);
  return {d_gy, d_w};
}

TensorList ConvBackwardWeightOp::backward(const BackwardContext& ctx, const TensorList& grads) const {
  // gw = B(gy, x) with <ggw, gw> = <conv(x, ggw), gy>.
  const Tensor& gg = grads[0];
  Tensor d_gy, d_x;
  if (ctx.needs_input_grad(0)) d_gy = forward_op(ctx.input(1), gg, Tensor(), p_);
  if (ctx.needs_input_grad(1)) d_x = conv2d_backward_input(ctx.input(0), gg, ctx.input_meta(1).sizes, p_);
  return {d_gy, d_x};
}

// conv over the last `spatial` (1, 2 or 3) dims of a batched or unbatched input, with PyTorch's
// padding modes; a 1-D convolution runs as a 2-D one over a height of 1.
Tensor conv_nd(const char* op, int spatial, Tensor input, Tensor weight, const Tensor& bias, const Shape& stride,
               const ConvPadding& padding, const Shape& dilation, int64_t groups) {
  TG_CHECK(input.defined() && weight.defined(), "[", op, "] got an undefined input or weight");
  const int64_t batched_dim = spatial + 2;
  TG_CHECK(input.dim() == batched_dim || input.dim() == batched_dim - 1, "[", op, "] expected ", batched_dim - 1,
           "-D (unbatched) or ", batched_dim, "-D (batched) input, got input of shape ", shape_str(input.sizes()));
  TG_CHECK(weight.dim() == batched_dim, "[", op, "] expected a ", batched_dim, "-D weight, got shape ",
           shape_str(weight.sizes()));
  if (bias.defined())
    TG_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), "[", op, "] expected bias of shape [", weight.size(0),
             "] (out_channels), got ", shape_str(bias.sizes()));
  const bool unbatched = input.dim() == batched_dim - 1;
  if (unbatched) input = unsqueeze(input, 0);
  ConvParams p;
  p.spatial = spatial == 3 ? 3 : 2;
  p.stride = conv_detail::per_dim(op, "stride", stride, spatial, 1);
  p.dilation = conv_detail::per_dim(op, "dilation", dilation, spatial, 1);
  p.groups = groups;
  if (spatial == 1) {
    input = unsqueeze(input, 2);
    weight = unsqueeze(weight, 2);
  }
  if (const auto* mode = std::get_if<std::string>(&padding.value)) {
    TG_CHECK(*mode == "same" || *mode == "valid", "[", op, "] padding must be \"same\", \"valid\" or amounts, got \"",
             *mode, "\"");
    if (*mode == "same") {
      for (int d = 0; d < p.spatial; ++d)
        TG_CHECK(p.stride[d] == 1, "[", op, "] padding='same' is not supported for strided convolutions (stride ",
                 shape_str(stride), ")");
      Shape extra(static_cast<size_t>(2 * p.spatial), 0);  // pad() order: last dim first
      bool asymmetric = false;
      for (int d = 0; d < p.spatial; ++d) {
        const int64_t total = p.dilation[d] * (weight.size(2 + d) - 1);
        p.padding[d] = total / 2;
        const int64_t rest = total - 2 * (total / 2);
        extra[static_cast<size_t>((p.spatial - 1 - d) * 2 + 1)] = rest;
        asymmetric = asymmetric || rest != 0;
      }
      if (asymmetric) input = pad(input, extra);
    }
  } else {
    p.padding = conv_detail::per_dim(op, "padding", std::get<Shape>(padding.value), spatial, 0);
  }
  check_params(op, p);
  Tensor out = forward_op(input, weight, bias, p);
  if (spatial == 1) out = squeeze(out, 2);
  if (unbatched) out = squeeze(out, 0);
  return out;
}

}  // namespace

namespace conv_detail {

std::array<int64_t, 3> per_dim(const char* op, const char* what, const Shape& v, int spatial, int64_t height_value) {
  static const char* counts[] = {"one value", "one or two values", "one or three values"};
  TG_CHECK(v.size() == 1 || static_cast<int>(v.size()) == spatial, "[", op, "] expected ", what, " as ",
           counts[spatial - 1], ", got ", shape_str(v));
  std::array<int64_t, 3> out{height_value, height_value, height_value};
  const int first = spatial == 1 ? 1 : 0;  // a 1-D list fills the width of a 2-D convolution
  for (int i = 0; i < spatial; ++i) out[static_cast<size_t>(first + i)] = v.size() == 1 ? v[0] : v[static_cast<size_t>(i)];
  return out;
}

}  // namespace conv_detail

std::string ConvParams::str() const {
  return "stride=" + list_str(stride, spatial) + ", padding=" + list_str(padding, spatial) +
         ", dilation=" + list_str(dilation, spatial) + ", groups=" + std::to_string(groups);
}

Tensor conv1d(const Tensor& input_in, const Tensor& weight_in, const Tensor& bias_in, Shape stride, ConvPadding padding,
              Shape dilation, int64_t groups) {
  const Tensor input = autocast::to_low(input_in);
  const Tensor weight = autocast::to_low(weight_in);
  const Tensor bias = autocast::to_low(bias_in);
  return conv_nd("conv1d", 1, input, weight, bias, stride, padding, dilation, groups);
}

Tensor conv2d(const Tensor& input_in, const Tensor& weight_in, const Tensor& bias_in, Shape stride, ConvPadding padding,
              Shape dilation, int64_t groups) {
  const Tensor input = autocast::to_low(input_in);
  const Tensor weight = autocast::to_low(weight_in);
  const Tensor bias = autocast::to_low(bias_in);
  return conv_nd("conv2d", 2, input, weight, bias, stride, padding, dilation, groups);
}

Tensor conv3d(const Tensor& input_in, const Tensor& weight_in, const Tensor& bias_in, Shape stride, ConvPadding padding,
              Shape dilation, int64_t groups) {
  const Tensor input = autocast::to_low(input_in);
  const Tensor weight = autocast::to_low(weight_in);
  const Tensor bias = autocast::to_low(bias_in);
  return conv_nd("conv3d", 3, input, weight, bias, stride, padding, dilation, groups);
}

Tensor conv2d_backward_input(const Tensor& grad_output, const Tensor& weight, const Shape& input_sizes,
                             const ConvParams& params) {
  return call_op<ConvBackwardInputOp>({packed(grad_output), packed(weight)}, input_sizes, params);
}

Tensor conv2d_backward_weight(const Tensor& grad_output, const Tensor& input, const Shape& weight_sizes,
                              const ConvParams& params) {
  return call_op<ConvBackwardWeightOp>({packed(grad_output), packed(input)}, weight_sizes, params);
}

}  // namespace tg
