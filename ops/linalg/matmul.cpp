// Matrix products: mm, bmm and addmm are ops (one BLAS call each, operands read in place whenever
// their strides allow; linear is in ops/linalg/linear.cpp); matmul is composed from them like PyTorch's,
// folding batch dims into one mm where it can.
#include "ops/linalg/matmul.h"

#include "ops/core/autocast.h"
#include "ops/core/dispatch.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/elementwise.h"
#include "ops/elementwise/unary.h"
#include "ops/linalg/gemm.h"
#include "ops/linalg/matmul_kernels.h"
#include "ops/reduce/reduce.h"
#include "ops/shape/view.h"

#ifdef TG_WITH_CUDA
#include "ops/linalg/cuda/blas.h"
#endif

namespace tg {
namespace {

Tensor scaled(const Tensor& x, const Scalar& s) { return s.to_double() == 1.0 ? x : mul(x, s); }

// a @ b; with an out_dtype of float32 for 16-bit operands, the float32 sum is written without being
// rounded to 16 bits first (torch.mm's out_dtype).
class MmOp final : public Op {
 public:
  explicit MmOp(std::optional<DType> out_dtype = std::nullopt) : out_dtype_(out_dtype) {}
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "mm", .flags = kComputeIntensive};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const Device dev = check_mm("mm", in[0], in[1]);
    DType dtype = in[0].dtype();
    if (out_dtype_ && *out_dtype_ != dtype) {
      TG_CHECK(*out_dtype_ == kFloat32 && is_low_precision(dtype), "[mm] out_dtype ",
               dtype_name(*out_dtype_), " is for float16 or bfloat16 operands with a float32 result, got operands of ",
               dtype_name(dtype));
      dtype = kFloat32;
    }
    return single_output(contiguous_meta({in[0].size(0), in[1].size(1)}, dtype, dev));
  }
  void eval(const TensorList& in, TensorList& out) const override {
    const int64_t n = in[0].size(0), m = in[1].size(1), k = in[0].size(1);
    if (out[0].dtype() == in[0].dtype()) {
      gemm_2d(out[0], n, m, k, in[0], false, in[1], false, 1.0, nullptr, 0.0);
      return;
    }
    if (k == 0) {
      fill_bias(out[0], n, m, BiasRef{}, 0.0);
      return;
    }
    Tensor keep_a, keep_b;
    Gemm g = gemm_2d_plan(out[0], n, m, k, in[0], false, in[1], false, 1.0, keep_a, keep_b);
    g.dtype = in[0].dtype();
    g.float32_out = true;
    run_gemm(g);
  }
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    // A widened product's gradient is taken at its operands' precision.
    const DType operands = ctx.input_meta(0).dtype;
    const Tensor g = grads[0].dtype() == operands ? grads[0] : grads[0].to(operands);
    TensorList r(2);
    if (ctx.needs_input_grad(0)) r[0] = mat1_grad(g, ctx.input(1), ctx.input_meta(0));
    if (ctx.needs_input_grad(1)) r[1] = mat2_grad(g, ctx.input(0), ctx.input_meta(1));
    return r;
  }
  std::string attrs() const override {
    return out_dtype_ ? "out_dtype=" + std::string(dtype_name(*out_dtype_)) : std::string();
  }

 private:
  std::optional<DType> out_dtype_;
};

class BmmOp final : public Op {
 public:
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "bmm", .flags = kComputeIntensive};
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
    static const OpSchema s{.name = "addmm", .flags = kComputeIntensive};
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

}  // namespace

Tensor mm(const Tensor& a, const Tensor& b) { return call_op<MmOp>({autocast::to_low(a), autocast::to_low(b)}); }

Tensor mm(const Tensor& a, const Tensor& b, DType out_dtype) {
  return call_op<MmOp>({autocast::to_low(a), autocast::to_low(b)}, out_dtype);
}

OpPtr mm_op(DType out_dtype) { return std::make_shared<const MmOp>(out_dtype); }

Tensor bmm(const Tensor& a, const Tensor& b) { return call_op<BmmOp>({autocast::to_low(a), autocast::to_low(b)}); }

Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, Scalar beta, Scalar alpha) {
  return call_op<AddmmOp>({autocast::to_low(bias), autocast::to_low(a), autocast::to_low(b)}, beta, alpha);
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
