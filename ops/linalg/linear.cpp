// linear and its fused activation forms: one op (not addmm over a transposed view), so the forward
// is one BLAS call reading the weight in place and the backward needs no transposed copies.
#include "ops/linalg/linear.h"

#include "ops/core/autocast.h"
#include "ops/core/dispatch.h"
#include "ops/elementwise/elementwise.h"
#include "ops/elementwise/unary.h"
#include "ops/factory/factory.h"
#include "ops/linalg/matmul.h"
#include "ops/linalg/matmul_kernels.h"
#include "ops/reduce/reduce.h"
#include "ops/shape/view.h"
#include "tensor/grad_mode.h"

#ifdef TG_WITH_CUDA
#include "ops/linalg/cuda/blas.h"
#include "ops/linalg/cuda/relu_mask.h"
#endif

namespace tg {
namespace {

// Sets the mask bits of y's positive elements (see relu_mask_of), on y's device.
void fill_relu_mask(const Tensor& y, const Tensor& mask) {
  const int64_t cols = y.size(-1);
  const int64_t rows = cols == 0 ? 0 : y.numel() / cols;
  const int64_t words = relu_mask_row_bits(cols) / 32;
#ifdef TG_WITH_CUDA
  if (y.is_cuda()) {
    cuda::relu_mask(y, mask, rows, cols, words);
    return;
  }
#endif
  const Tensor yc = y.contiguous();
  int32_t* bits = mask.data_ptr<int32_t>();
  TG_DISPATCH_FLOATING(yc.dtype(), "relu_mask", [&] {
    const scalar_t* p = yc.data_ptr<scalar_t>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t w = 0; w < words; ++w) {
        uint32_t word = 0;
        for (int64_t b = 0; b < 32 && w * 32 + b < cols; ++b)
          if (p[r * cols + w * 32 + b] > scalar_t(0)) word |= uint32_t{1} << b;
        bits[r * words + w] = static_cast<int32_t>(word);
      }
  });
}

// x @ weight^T (+ bias) for x of any leading dims, then the activation; inputs are {x, weight} or
// {x, weight, bias}. ReluMask and GeluTanh have a second output (the mask, the pre-activation).
class LinearOp final : public Op {
 public:
  LinearOp(bool has_bias, LinearActivation act) : has_bias_(has_bias), act_(act) {}
  const OpSchema& schema() const override {
    static const OpSchema plain{.name = "linear", .flags = kComputeIntensive};
    static const OpSchema relu{.name = "linear_relu", .flags = kComputeIntensive};
    static const OpSchema relu_mask{.name = "linear_relu_mask", .flags = kComputeIntensive};
    static const OpSchema gelu{.name = "linear_gelu_tanh", .flags = kComputeIntensive};
    switch (act_) {
      case LinearActivation::None: return plain;
      case LinearActivation::Relu: return relu;
      case LinearActivation::ReluMask: return relu_mask;
      case LinearActivation::GeluTanh: return gelu;
    }
    return plain;
  }
  // The backward reads the ReLU's output (or its mask's source) or the GELU's pre-activation.
  SaveSpec saves() const override {
    switch (act_) {
      case LinearActivation::None: return {};
      case LinearActivation::Relu:
      case LinearActivation::ReluMask: return {.inputs = true, .outputs = true, .output_mask = 1u};
      case LinearActivation::GeluTanh: return {.inputs = true, .outputs = true, .output_mask = 2u};
    }
    return {};
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const Tensor& x = in[0];
    const Tensor& w = in[1];
    TG_CHECK(x.dim() >= 1, "[linear] expected input with at least 1 dim, got a 0-dim tensor");
    TG_CHECK(is_floating(x.dtype()), "[linear] expected a floating dtype for input, got ", dtype_name(x.dtype()));
    check_float_matrix("linear", "weight", w, 2);
    check_same_dtype("linear", "input", x, "weight", w);
    const Device dev = common_device("linear", {x, w});
    const int64_t in_features = x.size(-1);
    if (in_features != w.size(1)) {
      const int64_t rows = shape_numel(Shape(x.sizes().begin(), x.sizes().end() - 1));
      TG_FAIL("[linear] mat1 and mat2 shapes cannot be multiplied (", rows, "x", in_features, " and ", w.size(1), "x",
              w.size(0), ")");
    }
    Shape out_sizes(x.sizes().begin(), x.sizes().end() - 1);
    out_sizes.push_back(w.size(0));
    TG_CHECK(in.size() == (has_bias_ ? 3u : 2u), "[linear] expected ", has_bias_ ? 3 : 2, " inputs, got ", in.size());
    if (has_bias_) {
      const Tensor& b = in[2];
      check_same_dtype("linear", "bias", b, "weight", w);
      check_bias_device("linear", b, dev);
      TG_CHECK(b.dim() <= 1 && (b.numel() == 1 || b.numel() == w.size(0)), "[linear] expected bias of shape [",
               w.size(0), "] (out_features), got ", shape_str(b.sizes()));
    }
    std::vector<TensorMeta> metas;
    metas.push_back(contiguous_meta(out_sizes, x.dtype(), dev));
    if (act_ == LinearActivation::ReluMask) {
      const int64_t rows = shape_numel(Shape(out_sizes.begin(), out_sizes.end() - 1));
      metas.push_back(contiguous_meta({rows, relu_mask_row_bits(w.size(0)) / 32}, kInt32, dev));
    } else if (act_ == LinearActivation::GeluTanh) {
      metas.push_back(contiguous_meta(std::move(out_sizes), x.dtype(), dev));
    }
    return metas;
  }
  void eval(const TensorList& in, TensorList& out) const override {
    const Tensor& x = in[0];
    const Tensor& w = in[1];
    const int64_t k = w.size(1), m = w.size(0);
    const int64_t n = out[0].numel() / m;
    BiasRef br;
    if (has_bias_) br = BiasRef{in[2].raw_data(), 0, in[2].numel() == 1 ? 0 : in[2].stride(0)};
    const BiasRef* bias = has_bias_ ? &br : nullptr;
    const double beta = has_bias_ ? 1.0 : 0.0;
    switch (act_) {
      case LinearActivation::None:
      case LinearActivation::Relu:
        gemm_2d(out[0], n, m, k, x, false, w, true, 1.0, bias, beta, act_ == LinearActivation::Relu);
        return;
      case LinearActivation::ReluMask:
        if (run_relu_epilogue(x, w, bias, out, n, m, k)) return;
        break;
      case LinearActivation::GeluTanh:
        // Never cuBLASLt's GELU epilogue: its tanh loses the tail (gelu(-5.1) more than 1% off, and
        // flushed to 0 further out, where the unfused kernel and PyTorch keep the tiny value).
        break;
    }
    // Separate kernels: the product, then the activation and its auxiliary output.
    if (act_ == LinearActivation::ReluMask) {
      gemm_2d(out[0], n, m, k, x, false, w, true, 1.0, bias, beta, true);
      fill_relu_mask(out[0], out[1]);
    } else {
      gemm_2d(out[1], n, m, k, x, false, w, true, 1.0, bias, beta, false);
      gelu_into(out[1], "tanh", out[0]);
    }
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    Tensor g = grads[0];
    if (act_ == LinearActivation::Relu || act_ == LinearActivation::ReluMask) g = threshold_backward(g, ctx.output(0));
    if (act_ == LinearActivation::GeluTanh) {
      g = gelu_backward(g, ctx.output(1), true);
      if (grads[1].defined()) g = g + grads[1];  // the pre-activation output's own gradient
    }
    TensorList r(has_bias_ ? 3 : 2);
    if (ctx.needs_input_grad(0)) r[0] = matmul(g, ctx.input(1));
    if (ctx.needs_input_grad(1)) r[1] = weight_grad(g, ctx.input(0), ctx.input_meta(1));
    if (has_bias_ && ctx.needs_input_grad(2)) r[2] = sum_to(g, ctx.input_meta(2).sizes);
    return r;
  }
  bool needs_zero_filled_grads() const override { return act_ == LinearActivation::None || act_ == LinearActivation::Relu; }
  bool has_bias() const { return has_bias_; }
  LinearActivation activation() const { return act_; }

 private:
  // The product and ReLU as one cuBLASLt kernel writing the mask too; false when cuBLASLt cannot
  // (another device, a strided bias, an unsupported shape).
  bool run_relu_epilogue(const Tensor& x, const Tensor& w, const BiasRef* bias, TensorList& out, int64_t n, int64_t m,
                         int64_t k) const {
#ifdef TG_WITH_CUDA
    if (!out[0].is_cuda() || k == 0 || (bias != nullptr && bias->s1 != 1)) return false;
    Tensor keep_a, keep_b;
    const Gemm g = gemm_2d_plan(out[0], n, m, k, x, false, w, true, 1.0, keep_a, keep_b);
    cuda::LtArgs args{.epilogue = cuda::LtEpilogue::ReluMask,
                      .bias = bias != nullptr ? bias->data : nullptr,
                      .aux = out[1].raw_data(),
                      .aux_ld = relu_mask_row_bits(m)};
    return cuda::gemm_lt(g, args);
#else
    (void)x, (void)w, (void)bias, (void)out, (void)n, (void)m, (void)k;
    return false;
#endif
  }

  // d(x @ w^T)/dw = g^T @ x over the flattened rows, laid out like w.
  static Tensor weight_grad(const Tensor& g, const Tensor& x, const TensorMeta& w_meta) {
    if (x.dim() == 1) return mm(unsqueeze(g, 1), unsqueeze(x, 0));
    const int64_t rows = shape_numel(Shape(x.sizes().begin(), x.sizes().end() - 1));
    const Tensor g2 = g.dim() == 2 ? g : reshape(g, {rows, w_meta.sizes[0]});
    const Tensor x2 = x.dim() == 2 ? x : reshape(x, {rows, w_meta.sizes[1]});
    if (column_major(w_meta)) return t(mm(t(x2), g2));
    return mm(t(g2), x2);
  }

  bool has_bias_;
  LinearActivation act_;
};

TensorList call_linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in, LinearActivation act) {
  const Tensor x = autocast::to_low(x_in), weight = autocast::to_low(weight_in), bias = autocast::to_low(bias_in);
  const bool has_bias = bias.defined();
  auto op = std::make_shared<const LinearOp>(has_bias, act);
  return has_bias ? dispatch(op, {x, weight, bias}) : dispatch(op, {x, weight});
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return call_linear(x, weight, bias, LinearActivation::None)[0];
}

Tensor linear_relu(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return call_linear(x, weight, bias, LinearActivation::Relu)[0];
}

std::pair<Tensor, Tensor> linear_relu_mask(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  TensorList out = call_linear(x, weight, bias, LinearActivation::ReluMask);
  return {out[0], out[1]};
}

std::pair<Tensor, Tensor> linear_gelu_tanh(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  TensorList out = call_linear(x, weight, bias, LinearActivation::GeluTanh);
  return {out[0], out[1]};
}

int64_t relu_mask_row_bits(int64_t cols) { return (cols + 127) / 128 * 128; }

Tensor relu_mask_of(const Tensor& y) {
  TG_CHECK(y.dim() >= 1 && is_floating(y.dtype()), "[relu_mask] expected a floating tensor with at least 1 dim, got ",
           dtype_name(y.dtype()), " of shape ", shape_str(y.sizes()));
  const int64_t cols = y.size(-1);
  const int64_t rows = cols == 0 ? 0 : y.numel() / cols;
  Tensor mask = empty({rows, relu_mask_row_bits(cols) / 32}, {.dtype = kInt32, .device = y.device()});
  if (mask.numel() > 0) fill_relu_mask(y, mask);
  return mask;
}

std::optional<LinearActivation> linear_activation(const Op& op) {
  const auto* l = dynamic_cast<const LinearOp*>(&op);
  if (l == nullptr) return std::nullopt;
  return l->activation();
}

OpPtr linear_op_with(const Op& linear, LinearActivation activation) {
  const auto* l = dynamic_cast<const LinearOp*>(&linear);
  if (l == nullptr) return nullptr;
  return std::make_shared<const LinearOp>(l->has_bias(), activation);
}

OpPtr fused_linear_relu_op(const Op& linear) {
  const std::optional<LinearActivation> act = linear_activation(linear);
  if (act != LinearActivation::None) return nullptr;
  return linear_op_with(linear, LinearActivation::Relu);
}

}  // namespace tg
