// Matrix products: mm, bmm, addmm and linear are ops (one BLAS call each, operands read in place
// whenever their strides allow); matmul is composed from them like PyTorch's, folding batch dims
// into one mm where it can.
#include "ops/matmul.h"

#include "ops/autocast.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/gemm.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "ops/view.h"

#ifdef TG_WITH_CUDA
#include "ops/cuda/blas.h"
#include "ops/cuda/matmul.h"
#endif

namespace tg {
namespace {

std::string mat_str(const Tensor& t) { return std::to_string(t.size(0)) + "x" + std::to_string(t.size(1)); }

void check_float_matrix(const char* op, const char* what, const Tensor& t, int64_t dims) {
  TG_CHECK(t.dim() == dims, "[", op, "] expected ", what, " to be a ", dims, "-D tensor, got a ", t.dim(),
           "-D tensor of shape ", shape_str(t.sizes()));
  TG_CHECK(is_floating(t.dtype()), "[", op, "] expected a floating dtype for ", what, ", got ",
           dtype_name(t.dtype()));
}

void check_same_dtype(const char* op, const char* wa, const Tensor& a, const char* wb, const Tensor& b) {
  TG_CHECK(a.dtype() == b.dtype(), "[", op, "] expected ", wa, " and ", wb, " to have the same dtype, but got ",
           dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
}

// A bias must sit on the operands' device exactly (a CPU scalar cannot feed a CUDA kernel).
void check_bias_device(const char* op, const Tensor& bias, Device device) {
  TG_CHECK(bias.device() == device, "[", op, "] expected all tensors to be on the same device, but found at least "
           "two devices, ", device.str(), " and ", bias.device().str(), "!");
}

// Validates mat1 [n, k] @ mat2 [k, m]; returns the common device.
Device check_mm(const char* op, const Tensor& a, const Tensor& b) {
  check_float_matrix(op, "mat1", a, 2);
  check_float_matrix(op, "mat2", b, 2);
  check_same_dtype(op, "mat1", a, "mat2", b);
  const Device dev = common_device(op, {a, b});
  TG_CHECK(a.size(1) == b.size(0), "[", op, "] mat1 and mat2 shapes cannot be multiplied (", mat_str(a), " and ",
           mat_str(b), ")");
  return dev;
}

// Writes beta * bias (zeros without one) into out on out's device.
void fill_bias(const Tensor& out, int64_t n, int64_t m, const BiasRef& bias, double beta) {
  if (out.is_cuda()) {
#ifdef TG_WITH_CUDA
    cuda::fill_bias(out.device().index, out.dtype(), out.raw_data(), n, m, bias, beta);
    return;
#endif
  }
  cpu_fill_bias(out.dtype(), out.raw_data(), n, m, bias, beta);
}

void run_gemm(const Gemm& g) {
  if (g.device.is_cuda()) {
#ifdef TG_WITH_CUDA
    cuda::gemm(g);
    return;
#endif
  }
  cpu_gemm(g);
}

// Clamps a contiguous output at 0 (the ReLU a fused linear applies when no epilogue did).
void relu_in_place(const Tensor& out) {
  if (out.is_cuda()) {
    Tensor handle = out;
    handle.copy_(relu(out));
    return;
  }
  TG_DISPATCH_FLOATING(out.dtype(), "linear_relu", [&] {
    scalar_t* p = out.data_ptr<scalar_t>();
    for (int64_t i = 0, n = out.numel(); i < n; ++i) p[i] = p[i] < scalar_t(0) ? scalar_t(0) : p[i];  // NaN stays NaN, as relu
  });
}

// out (contiguous [n, m]) = alpha * op(a) @ op(b) + beta * bias, op() transposing when asked, then
// clamped at 0 with `relu`. On CUDA a [m] bias and the ReLU ride in cuBLASLt's epilogue; otherwise
// the bias is written first and the product accumulates into it, so either way the product is a
// single BLAS call.
void gemm_2d(const Tensor& out, int64_t n, int64_t m, int64_t k, const Tensor& a, bool trans_a, const Tensor& b,
             bool trans_b, double alpha, const BiasRef* bias, double beta, bool relu = false) {
  const bool with_bias = bias != nullptr && beta != 0.0;
  if (k == 0) {
    fill_bias(out, n, m, with_bias ? *bias : BiasRef{}, beta);
    if (relu) relu_in_place(out);
    return;
  }
  Tensor keep_a, keep_b;
  Gemm g;
  g.dtype = out.dtype();
  g.device = out.device();
  g.n = n;
  g.m = m;
  g.k = k;
  g.a = gemm_operand(a, trans_a, keep_a);
  g.b = gemm_operand(b, trans_b, keep_b);
  g.out = out.raw_data();
  g.ldc = m;
  g.out_batch_stride = n * m;
  g.alpha = alpha;
#ifdef TG_WITH_CUDA
  if (g.device.is_cuda()) {
    if (with_bias && beta == 1.0 && bias->s0 == 0 && bias->s1 == 1 && cuda::gemm_lt(g, bias->data, relu)) return;
    if (!with_bias && cuda::gemm_lt(g, nullptr, relu)) return;
  }
#endif
  if (with_bias) fill_bias(out, n, m, *bias, beta);
  g.beta = with_bias ? 1.0 : 0.0;
  run_gemm(g);
  if (relu) relu_in_place(out);
}

// True when a 2-D tensor is stored column-major (the transpose of a row-major matrix).
bool column_major(const TensorMeta& m) {
  return m.sizes.size() == 2 && m.sizes[0] > 1 && m.sizes[1] > 1 && m.strides[0] == 1 && m.strides[1] >= m.sizes[0];
}

// d(a @ b)/da given the output gradient g, laid out like a so a transposed operand gets a
// transposed (hence contiguous after its view's backward) gradient.
Tensor mat1_grad(const Tensor& g, const Tensor& b, const TensorMeta& a_meta) {
  if (column_major(a_meta)) return t(mm(b, t(g)));
  return mm(g, t(b));
}

// d(a @ b)/db given the output gradient g, laid out like b (see mat1_grad).
Tensor mat2_grad(const Tensor& g, const Tensor& a, const TensorMeta& b_meta) {
  if (column_major(b_meta)) return t(mm(t(g), a));
  return mm(t(a), g);
}

Tensor scaled(const Tensor& x, const Scalar& s) { return s.to_double() == 1.0 ? x : mul(x, s); }

class MmOp final : public Op {
 public:
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "mm"};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const Device dev = check_mm("mm", in[0], in[1]);
    return single_output(contiguous_meta({in[0].size(0), in[1].size(1)}, in[0].dtype(), dev));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    gemm_2d(out[0], in[0].size(0), in[1].size(1), in[0].size(1), in[0], false, in[1], false, 1.0, nullptr, 0.0);
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    TensorList r(2);
    if (ctx.needs_input_grad(0)) r[0] = mat1_grad(grads[0], ctx.input(1), ctx.input_meta(0));
    if (ctx.needs_input_grad(1)) r[1] = mat2_grad(grads[0], ctx.input(0), ctx.input_meta(1));
    return r;
  }
};

class BmmOp final : public Op {
 public:
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "bmm"};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const Tensor& a = in[0];
    const Tensor& b = in[1];
    check_float_matrix("bmm", "batch1", a, 3);
    check_float_matrix("bmm", "batch2", b, 3);
    check_same_dtype("bmm", "batch1", a, "batch2", b);
    const Device dev = common_device("bmm", in);
    TG_CHECK(a.size(0) == b.size(0) && a.size(2) == b.size(1), "[bmm] expected size for first two dimensions of "
             "batch2 tensor to be: [", a.size(0), ", ", a.size(2), "] but got: [", b.size(0), ", ", b.size(1), "].");
    return single_output(contiguous_meta({a.size(0), a.size(1), b.size(2)}, a.dtype(), dev));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    Tensor keep_a, keep_b;
    Gemm g;
    g.dtype = out[0].dtype();
    g.device = out[0].device();
    g.batch = in[0].size(0);
    g.n = in[0].size(1);
    g.k = in[0].size(2);
    g.m = in[1].size(2);
    g.out = out[0].raw_data();
    g.ldc = g.m;
    g.out_batch_stride = g.n * g.m;
    if (g.k == 0) {
      fill_bias(out[0], g.batch * g.n, g.m, BiasRef{}, 0.0);
      return;
    }
    g.a = batched_gemm_operand(in[0], false, keep_a);
    g.b = batched_gemm_operand(in[1], false, keep_b);
    run_gemm(g);
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    TensorList r(2);
    if (ctx.needs_input_grad(0)) r[0] = bmm(grads[0], transpose(ctx.input(1), 1, 2));
    if (ctx.needs_input_grad(1)) r[1] = bmm(transpose(ctx.input(0), 1, 2), grads[0]);
    return r;
  }
};

// beta * bias + alpha * (mat1 @ mat2); inputs are {bias, mat1, mat2}.
class AddmmOp final : public Op {
 public:
  AddmmOp(Scalar beta, Scalar alpha) : beta_(beta), alpha_(alpha) {}
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "addmm"};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const Tensor& bias = in[0];
    const Device dev = check_mm("addmm", in[1], in[2]);
    check_same_dtype("addmm", "bias", bias, "mat1", in[1]);
    check_bias_device("addmm", bias, dev);
    const Shape out_sizes{in[1].size(0), in[2].size(1)};
    TG_CHECK(bias.dim() <= 2 && broadcast_shapes(bias.sizes(), out_sizes, "addmm") == out_sizes, "[addmm] bias of "
             "shape ", shape_str(bias.sizes()), " cannot broadcast to the output shape ", shape_str(out_sizes));
    return single_output(contiguous_meta(out_sizes, bias.dtype(), dev));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    const int64_t n = in[1].size(0), k = in[1].size(1), m = in[2].size(1);
    const Shape bs = broadcast_strides(in[0].sizes(), in[0].strides(), {n, m});
    const BiasRef bias{in[0].raw_data(), bs[0], bs[1]};
    gemm_2d(out[0], n, m, k, in[1], false, in[2], false, alpha_.to_double(), &bias, beta_.to_double());
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    const Tensor& g = grads[0];
    TensorList r(3);
    if (ctx.needs_input_grad(0)) r[0] = scaled(sum_to(g, ctx.input_meta(0).sizes), beta_);
    if (ctx.needs_input_grad(1)) r[1] = scaled(mat1_grad(g, ctx.input(2), ctx.input_meta(1)), alpha_);
    if (ctx.needs_input_grad(2)) r[2] = scaled(mat2_grad(g, ctx.input(1), ctx.input_meta(2)), alpha_);
    return r;
  }
  std::string attrs() const override {
    return "beta=" + std::to_string(beta_.to_double()) + ", alpha=" + std::to_string(alpha_.to_double());
  }

 private:
  Scalar beta_;
  Scalar alpha_;
};

// x @ weight^T (+ bias) for x of any leading dims; inputs are {x, weight} or {x, weight, bias}.
// One op (not addmm over a transposed view) so the forward is one BLAS call reading the weight in
// place and the backward needs no transposed copies.
// linear(x, w[, b]); with `relu`, relu(linear(...)) in one op: compiled graphs fuse the pair (the
// ReLU then rides in the matmul's epilogue on CUDA).
class LinearOp final : public Op {
 public:
  explicit LinearOp(bool has_bias, bool relu = false) : has_bias_(has_bias), relu_(relu) {}
  const OpSchema& schema() const override {
    static const OpSchema plain{.name = "linear"};
    static const OpSchema fused{.name = "linear_relu"};
    return relu_ ? fused : plain;
  }
  SaveSpec saves() const override { return {.inputs = true, .outputs = relu_}; }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const Tensor& x = in[0];
    const Tensor& w = in[1];
    TG_CHECK(x.dim() >= 1, "[linear] expected input with at least 1 dim, got a 0-dim tensor");
    TG_CHECK(is_floating(x.dtype()), "[linear] expected a floating dtype for input, got ",
             dtype_name(x.dtype()));
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
    return single_output(contiguous_meta(std::move(out_sizes), x.dtype(), dev));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    const Tensor& x = in[0];
    const Tensor& w = in[1];
    const int64_t k = w.size(1), m = w.size(0);
    const int64_t n = out[0].numel() / m;
    if (has_bias_) {
      const Tensor& bias = in[2];
      const BiasRef br{bias.raw_data(), 0, bias.numel() == 1 ? 0 : bias.stride(0)};
      gemm_2d(out[0], n, m, k, x, false, w, true, 1.0, &br, 1.0, relu_);
    } else {
      gemm_2d(out[0], n, m, k, x, false, w, true, 1.0, nullptr, 0.0, relu_);
    }
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    const Tensor g = relu_ ? threshold_backward(grads[0], ctx.output(0)) : grads[0];
    TensorList r(has_bias_ ? 3 : 2);
    if (ctx.needs_input_grad(0)) r[0] = matmul(g, ctx.input(1));
    if (ctx.needs_input_grad(1)) r[1] = weight_grad(g, ctx.input(0), ctx.input_meta(1));
    if (has_bias_ && ctx.needs_input_grad(2)) r[2] = sum_to(g, ctx.input_meta(2).sizes);
    return r;
  }
  bool has_bias() const { return has_bias_; }
  bool fused_relu() const { return relu_; }

 private:
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
  bool relu_;
};

}  // namespace

Tensor mm(const Tensor& a, const Tensor& b) { return call_op<MmOp>({autocast::to_low(a), autocast::to_low(b)}); }

Tensor bmm(const Tensor& a, const Tensor& b) { return call_op<BmmOp>({autocast::to_low(a), autocast::to_low(b)}); }

Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, Scalar beta, Scalar alpha) {
  return call_op<AddmmOp>({autocast::to_low(bias), autocast::to_low(a), autocast::to_low(b)}, beta, alpha);
}

Tensor linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in) {
  const Tensor x = autocast::to_low(x_in), weight = autocast::to_low(weight_in), bias = autocast::to_low(bias_in);
  if (bias.defined()) return call_op<LinearOp>({x, weight, bias}, true);
  return call_op<LinearOp>({x, weight}, false);
}

Tensor linear_relu(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in) {
  const Tensor x = autocast::to_low(x_in), weight = autocast::to_low(weight_in), bias = autocast::to_low(bias_in);
  if (bias.defined()) return call_op<LinearOp>({x, weight, bias}, true, true);
  return call_op<LinearOp>({x, weight}, false, true);
}

OpPtr fused_linear_relu_op(const Op& linear) {
  const auto* l = dynamic_cast<const LinearOp*>(&linear);
  if (!l || l->fused_relu()) return nullptr;
  return std::make_shared<const LinearOp>(l->has_bias(), true);
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  const int64_t da = a.dim(), db = b.dim();
  TG_CHECK(da >= 1 && db >= 1, "[matmul] both arguments to matmul need to be at least 1D, but they are ", da,
           "D and ", db, "D");
  if (da == 1 && db == 1) {
    TG_CHECK(a.size(0) == b.size(0), "[matmul] inconsistent tensor size, expected tensor [", a.size(0),
             "] and src [", b.size(0), "] to have the same number of elements, but got ", a.size(0), " and ",
             b.size(0), " elements respectively");
    return view(mm(unsqueeze(a, 0), unsqueeze(b, 1)), Shape{});
  }
  if (da == 2 && db == 1) {
    TG_CHECK(a.size(1) == b.size(0), "[matmul] size mismatch, got input (", a.size(0), "), mat (", a.size(0), "x",
             a.size(1), "), vec (", b.size(0), ")");
    return squeeze(mm(a, unsqueeze(b, 1)), 1);
  }
  if (db <= 2) {
    // a's batch dims (if any) fold into rows: one mm instead of a batched product.
    const Tensor b2 = db == 1 ? unsqueeze(b, 1) : b;
    Shape out_sizes(a.sizes().begin(), a.sizes().end() - 1);
    const int64_t rows = shape_numel(out_sizes);
    TG_CHECK(a.size(-1) == b2.size(0), "[matmul] mat1 and mat2 shapes cannot be multiplied (", rows, "x", a.size(-1),
             " and ", b2.size(0), "x", b2.size(1), ")");
    if (db == 2) out_sizes.push_back(b.size(1));
    if (da == 2 && db == 2) return mm(a, b);
    const Tensor a2 = da == 2 ? a : reshape(a, {rows, a.size(-1)});
    return view(mm(a2, b2), out_sizes);
  }
  // Batched: 1-D operands gain a unit dim, batch dims broadcast (by stride-0 views, no copies).
  const Tensor a3 = da == 1 ? unsqueeze(a, 0) : a;
  const Tensor b3 = db == 1 ? unsqueeze(b, 1) : b;
  const int64_t n = a3.size(-2), k = a3.size(-1), m = b3.size(-1);
  const Shape batch_a(a3.sizes().begin(), a3.sizes().end() - 2);
  const Shape batch_b(b3.sizes().begin(), b3.sizes().end() - 2);
  const Shape batch = broadcast_shapes(batch_a, batch_b, "matmul");
  const int64_t nb = shape_numel(batch);
  TG_CHECK(k == b3.size(-2), "[matmul] expected size for first two dimensions of batch2 tensor to be: [", nb, ", ", k,
           "] but got: [", nb, ", ", b3.size(-2), "].");
  auto as_batch = [&](const Tensor& x, int64_t r, int64_t c) {
    Shape full = batch;
    full.push_back(r);
    full.push_back(c);
    const Tensor e = x.sizes() == full ? x : expand(x, full);
    return e.dim() == 3 ? e : reshape(e, {nb, r, c});
  };
  Shape out_sizes = batch;
  if (da > 1) out_sizes.push_back(n);
  if (db > 1) out_sizes.push_back(m);
  return view(bmm(as_batch(a3, n, k), as_batch(b3, k, m)), out_sizes);
}

Tensor Tensor::mm(const Tensor& other) const { return tg::mm(*this, other); }
Tensor Tensor::bmm(const Tensor& other) const { return tg::bmm(*this, other); }
Tensor Tensor::matmul(const Tensor& other) const { return tg::matmul(*this, other); }

void set_gemm_autotuning(bool enabled) {
#ifdef TG_WITH_CUDA
  cuda::set_gemm_autotuning(enabled);
#else
  (void)enabled;
#endif
}

}  // namespace tg
