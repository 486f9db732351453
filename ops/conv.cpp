// Convolution ops: conv2d forward and its two backward products, each an op with a shape rule, CPU
// and CUDA kernels and a VJP written with the other two (all three are bilinear), plus conv1d and
// the "same"/"valid" padding rules as compositions.
#include "ops/conv.h"

#include "ops/autocast.h"
#include "ops/conv_kernels.h"
#include "ops/dispatch.h"
#include "ops/pad.h"
#include "ops/reduce.h"
#include "ops/view.h"
#include "ops/widen.h"

namespace tg {
namespace {

std::string pair_str(const std::array<int64_t, 2>& a) {
  return "[" + std::to_string(a[0]) + ", " + std::to_string(a[1]) + "]";
}

// Output extent of one spatial dim.
int64_t out_extent(int64_t in, int64_t k, const Conv2dParams& p, int d) {
  return (in + 2 * p.padding[d] - p.dilation[d] * (k - 1) - 1) / p.stride[d] + 1;
}

void check_params(const char* op, const Conv2dParams& p) {
  for (int d = 0; d < 2; ++d) {
    TG_CHECK(p.stride[d] > 0, "[", op, "] expected positive stride, got ", pair_str(p.stride));
    TG_CHECK(p.padding[d] >= 0, "[", op, "] expected non-negative padding, got ", pair_str(p.padding));
    TG_CHECK(p.dilation[d] > 0, "[", op, "] expected positive dilation, got ", pair_str(p.dilation));
  }
  TG_CHECK(p.groups > 0, "[", op, "] expected positive groups, got ", p.groups);
}

void check_same_dtype(const char* op, const Tensor& a, const char* wa, const Tensor& b, const char* wb) {
  TG_CHECK(a.dtype() == b.dtype(), "[", op, "] expected ", wa, " and ", wb, " to have the same dtype, got ",
           dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
}

// Validates input [N, C, H, W] against weight [O, C/groups, kH, kW]; returns the output sizes.
Shape conv_output_sizes(const char* op, const Shape& x, const Shape& w, const Conv2dParams& p) {
  check_params(op, p);
  TG_CHECK(x.size() == 4, "[", op, "] expected a 4-D input [N, C, H, W], got shape ", shape_str(x));
  TG_CHECK(w.size() == 4, "[", op, "] expected a 4-D weight [C_out, C_in/groups, kH, kW], got shape ", shape_str(w));
  TG_CHECK(w[0] > 0 && w[1] > 0 && w[2] > 0 && w[3] > 0, "[", op, "] expected a weight with non-zero channel and kernel sizes, "
           "got shape ", shape_str(w));
  TG_CHECK(x[1] == w[1] * p.groups, "[", op, "] expected input of shape ", shape_str(x), " to have ", w[1] * p.groups,
           " channels (weight ", shape_str(w), " times groups=", p.groups, "), but got ", x[1], " channels");
  TG_CHECK(w[0] % p.groups == 0, "[", op, "] expected out_channels (", w[0], ") to be divisible by groups (", p.groups,
           ")");
  TG_CHECK(x[2] > 0 && x[3] > 0, "[", op, "] expected an input with non-zero spatial sizes, got shape ", shape_str(x));
  Shape out{x[0], w[0], 0, 0};
  for (int d = 0; d < 2; ++d) {
    const int64_t padded = x[2 + d] + 2 * p.padding[d];
    const int64_t span = p.dilation[d] * (w[2 + d] - 1) + 1;
    TG_CHECK(padded >= span, "[", op, "] input of shape ", shape_str(x), " with padding ", pair_str(p.padding),
             " is smaller than the dilated kernel (", p.dilation[0] * (w[2] - 1) + 1, "x",
             p.dilation[1] * (w[3] - 1) + 1, ")");
    out[2 + d] = out_extent(x[2 + d], w[2 + d], p, d);
  }
  return out;
}

void check_operands(const char* op, const TensorList& in) {
  for (const Tensor& t : in) check_floating(op, t);
  for (size_t i = 1; i < in.size(); ++i) check_same_dtype(op, in[0], "the first operand", in[i], "the others");
}

class Conv2dOp final : public Op {
 public:
  Conv2dOp(Conv2dParams p, bool has_bias) : p_(p), has_bias_(has_bias) {}
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "conv2d"};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    check_operands("conv2d", in);
    const Shape out = conv_output_sizes("conv2d", in[0].sizes(), in[1].sizes(), p_);
    TG_CHECK(in.size() == (has_bias_ ? 3u : 2u), "[conv2d] expected ", has_bias_ ? 3 : 2, " operands, got ", in.size());
    if (has_bias_)
      TG_CHECK(in[2].sizes() == Shape{in[1].size(0)}, "[conv2d] expected bias of shape [", in[1].size(0),
               "] (out_channels), got ", shape_str(in[2].sizes()));
    return single_output(contiguous_meta(out, in[0].dtype(), common_device("conv2d", in)));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    if (out[0].numel() == 0) return;
    const Tensor bias = in.size() == 3 ? in[2] : Tensor();
#ifdef TG_WITH_CUDA
    if (out[0].is_cuda()) return cuda::conv2d_forward(in[0], in[1], bias, out[0], p_);
#endif
    if (eval_widened(*this, in, out)) return;  // the CPU convolutions compute 16-bit floats in float32
    cpu_conv2d_forward(in[0], in[1], bias, out[0], p_);
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override;
  std::string attrs() const override { return p_.str(); }

 private:
  Conv2dParams p_;
  bool has_bias_;
};

// grad_input = conv2d_backward_input(grad_output, weight): linear in each argument.
class Conv2dBackwardInputOp final : public Op {
 public:
  Conv2dBackwardInputOp(Shape input_sizes, Conv2dParams p) : input_sizes_(std::move(input_sizes)), p_(p) {}
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "conv2d_backward_input"};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    check_operands("conv2d_backward_input", in);
    const Shape out = conv_output_sizes("conv2d_backward_input", input_sizes_, in[1].sizes(), p_);
    TG_CHECK(in[0].sizes() == out, "[conv2d_backward_input] expected grad_output of shape ", shape_str(out),
             ", got ", shape_str(in[0].sizes()));
    return single_output(contiguous_meta(input_sizes_, in[0].dtype(), common_device("conv2d_backward_input", in)));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    if (out[0].numel() == 0) return;
#ifdef TG_WITH_CUDA
    if (out[0].is_cuda()) return cuda::conv2d_backward_input(in[0], in[1], out[0], p_);
#endif
    if (eval_widened(*this, in, out)) return;  // the CPU convolutions compute 16-bit floats in float32
    cpu_conv2d_backward_input(in[0], in[1], out[0], p_);
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override;
  std::string attrs() const override { return p_.str() + ", input_sizes=" + shape_str(input_sizes_); }

 private:
  Shape input_sizes_;
  Conv2dParams p_;
};

// grad_weight = conv2d_backward_weight(grad_output, input): linear in each argument.
class Conv2dBackwardWeightOp final : public Op {
 public:
  Conv2dBackwardWeightOp(Shape weight_sizes, Conv2dParams p) : weight_sizes_(std::move(weight_sizes)), p_(p) {}
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "conv2d_backward_weight"};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    check_operands("conv2d_backward_weight", in);
    const Shape out = conv_output_sizes("conv2d_backward_weight", in[1].sizes(), weight_sizes_, p_);
    TG_CHECK(in[0].sizes() == out, "[conv2d_backward_weight] expected grad_output of shape ", shape_str(out),
             ", got ", shape_str(in[0].sizes()));
    return single_output(contiguous_meta(weight_sizes_, in[0].dtype(), common_device("conv2d_backward_weight", in)));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    if (out[0].numel() == 0) return;
#ifdef TG_WITH_CUDA
    if (out[0].is_cuda()) return cuda::conv2d_backward_weight(in[0], in[1], out[0], p_);
#endif
    if (eval_widened(*this, in, out)) return;  // the CPU convolutions compute 16-bit floats in float32
    cpu_conv2d_backward_weight(in[0], in[1], out[0], p_);
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override;
  std::string attrs() const override { return p_.str() + ", weight_sizes=" + shape_str(weight_sizes_); }

 private:
  Shape weight_sizes_;
  Conv2dParams p_;
};

// The kernels read contiguous operands; contiguous() is an op, so traces see the copy.
Tensor packed(const Tensor& t) { return t.contiguous(); }

Tensor forward_op(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p) {
  if (b.defined()) return call_op<Conv2dOp>({packed(x), packed(w), packed(b)}, p, true);
  return call_op<Conv2dOp>({packed(x), packed(w)}, p, false);
}

TensorList Conv2dOp::backward(const BackwardContext& ctx, const TensorList& grads) const {
  const Tensor& g = grads[0];
  TensorList out;
  out.push_back(ctx.needs_input_grad(0) ? conv2d_backward_input(g, ctx.input(1), ctx.input_meta(0).sizes, p_)
                                        : Tensor());
  out.push_back(ctx.needs_input_grad(1) ? conv2d_backward_weight(g, ctx.input(0), ctx.input_meta(1).sizes, p_)
                                        : Tensor());
  if (has_bias_) out.push_back(ctx.needs_input_grad(2) ? sum(g, {0, 2, 3}) : Tensor());
  return out;
}

TensorList Conv2dBackwardInputOp::backward(const BackwardContext& ctx, const TensorList& grads) const {
  // gx = A_w^T gy: d/d gy of <ggx, gx> is conv(ggx, w); d/dw is conv2d_backward_weight(gy, ggx).
  const Tensor& gg = grads[0];
  Tensor d_gy, d_w;
  if (ctx.needs_input_grad(0)) d_gy = forward_op(gg, ctx.input(1), Tensor(), p_);
  if (ctx.needs_input_grad(1)) d_w = conv2d_backward_weight(ctx.input(0), gg, ctx.input_meta(1).sizes, p_);
  return {d_gy, d_w};
}

TensorList Conv2dBackwardWeightOp::backward(const BackwardContext& ctx, const TensorList& grads) const {
  // gw = B(gy, x) with <ggw, gw> = <conv(x, ggw), gy>.
  const Tensor& gg = grads[0];
  Tensor d_gy, d_x;
  if (ctx.needs_input_grad(0)) d_gy = forward_op(ctx.input(1), gg, Tensor(), p_);
  if (ctx.needs_input_grad(1)) d_x = conv2d_backward_input(ctx.input(0), gg, ctx.input_meta(1).sizes, p_);
  return {d_gy, d_x};
}

// One or two values for the two spatial dims.
std::array<int64_t, 2> two(const char* op, const char* what, const Shape& v) {
  TG_CHECK(v.size() == 1 || v.size() == 2, "[", op, "] expected ", what, " as one or two values, got ",
           shape_str(v));
  return v.size() == 1 ? std::array<int64_t, 2>{v[0], v[0]} : std::array<int64_t, 2>{v[0], v[1]};
}

// conv over the last `spatial` (1 or 2) dims of a batched input, with PyTorch's padding modes.
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
  // A 1-D convolution runs over a height of 1: stride/dilation 1 and padding 0 along it.
  auto widen = [&](const char* what, const Shape& v, int64_t height_value = 1) {
    TG_CHECK(v.size() == 1 || static_cast<int>(v.size()) == spatial, "[", op, "] expected ", what, " as ",
             spatial == 1 ? "one value" : "one or two values", ", got ", shape_str(v));
    Shape w = spatial == 1 ? Shape{height_value} : Shape{};
    w.insert(w.end(), v.begin(), v.end());
    return two(op, what, w);
  };
  Conv2dParams p;
  p.stride = widen("stride", stride);
  p.dilation = widen("dilation", dilation);
  p.groups = groups;
  if (spatial == 1) {
    input = unsqueeze(input, 2);
    weight = unsqueeze(weight, 2);
  }
  if (const auto* mode = std::get_if<std::string>(&padding.value)) {
    TG_CHECK(*mode == "same" || *mode == "valid", "[", op, "] padding must be \"same\", \"valid\" or amounts, got \"",
             *mode, "\"");
    if (*mode == "same") {
      TG_CHECK(p.stride[0] == 1 && p.stride[1] == 1, "[", op,
               "] padding='same' is not supported for strided convolutions (stride ", shape_str(stride), ")");
      Shape extra(4, 0);  // pad() order: last dim first
      for (int d = 0; d < 2; ++d) {
        const int64_t total = p.dilation[d] * (weight.size(2 + d) - 1);
        p.padding[d] = total / 2;
        extra[static_cast<size_t>((1 - d) * 2 + 1)] = total - 2 * (total / 2);
      }
      if (extra[1] != 0 || extra[3] != 0) input = pad(input, extra);
    }
  } else {
    const Shape& amounts = std::get<Shape>(padding.value);
    p.padding = widen("padding", amounts, 0);
  }
  check_params(op, p);
  Tensor out = forward_op(input, weight, bias, p);
  if (spatial == 1) out = squeeze(out, 2);
  if (unbatched) out = squeeze(out, 0);
  return out;
}

}  // namespace

std::string Conv2dParams::str() const {
  return "stride=" + pair_str(stride) + ", padding=" + pair_str(padding) + ", dilation=" + pair_str(dilation) +
         ", groups=" + std::to_string(groups);
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

Tensor conv2d_backward_input(const Tensor& grad_output, const Tensor& weight, const Shape& input_sizes,
                             const Conv2dParams& params) {
  return call_op<Conv2dBackwardInputOp>({packed(grad_output), packed(weight)}, input_sizes, params);
}

Tensor conv2d_backward_weight(const Tensor& grad_output, const Tensor& input, const Shape& weight_sizes,
                              const Conv2dParams& params) {
  return call_op<Conv2dBackwardWeightOp>({packed(grad_output), packed(input)}, weight_sizes, params);
}

}  // namespace tg
