#include "ops/linalg/linear_grad.h"

#include "ops/core/dispatch.h"
#include "ops/elementwise/elementwise.h"
#include "ops/linalg/bias_grad.h"
#include "ops/linalg/linear.h"
#include "ops/linalg/matmul.h"
#include "ops/linalg/matmul_kernels.h"
#include "ops/reduce/reduce.h"
#include "ops/shape/view.h"
#include "tensor/grad_mode.h"

#ifdef TG_WITH_CUDA
#include "ops/linalg/cuda/blas.h"
#endif

namespace tg {
namespace {

// Errors unless t is [rows, cols] with `dtype`.
void check_matrix(const char* op, const char* what, const Tensor& t, int64_t rows, int64_t cols, DType dtype) {
  TG_CHECK(t.dim() == 2 && t.size(0) == rows && t.size(1) == cols, "[", op, "] expected ", what, " of shape [", rows,
           ", ", cols, "], got ", shape_str(t.sizes()));
  TG_CHECK(t.dtype() == dtype, "[", op, "] expected ", what, " of dtype ", dtype_name(dtype), ", got ",
           dtype_name(t.dtype()));
}

// Copies the separately computed results into the op's outputs.
void store(TensorList& out, const Tensor& h, const Tensor& db) {
  Tensor o0 = out[0], o1 = out[1];
  o0.copy_(h);
  o1.copy_(db);
}

// (act'(.) * (g @ w), its row sums): inputs {g, w, y, mask} for the ReLU, {g, w, pre} for the tanh GELU.
class MmActivationGradOp final : public Op {
 public:
  explicit MmActivationGradOp(bool gelu) : gelu_(gelu) {}
  const OpSchema& schema() const override {
    static const OpSchema relu{.name = "mm_relu_backward_bias_grad", .flags = kComputeIntensive};
    static const OpSchema gelu{.name = "mm_gelu_tanh_backward_bias_grad", .flags = kComputeIntensive};
    return gelu_ ? gelu : relu;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const char* op = schema().name.data();
    TG_CHECK(in.size() == (gelu_ ? 3u : 4u), "[", op, "] expected ", gelu_ ? 3 : 4, " inputs, got ", in.size());
    const Device dev = check_mm(op, in[0], in[1]);
    const int64_t n = in[0].size(0), m = in[1].size(1);
    check_matrix(op, gelu_ ? "pre-activation" : "ReLU output", in[2], n, m, in[0].dtype());
    if (!gelu_) check_matrix(op, "ReLU mask", in[3], n, relu_mask_row_bits(m) / 32, kInt32);
    const Device act_dev = common_device(op, in);
    TG_CHECK(act_dev == dev, "[", op, "] expected all tensors on ", dev.str());
    std::vector<TensorMeta> metas;
    metas.push_back(contiguous_meta({n, m}, in[0].dtype(), dev));
    metas.push_back(contiguous_meta({m}, in[0].dtype(), dev));
    return metas;
  }
  void eval(const TensorList& in, TensorList& out) const override {
    // The GELU's gradient never takes cuBLASLt's DGELU_BGRAD: its tanh loses the far negative tail
    // (more than 1% off below about -5), where the elementwise kernel follows the eager formula.
    if (!gelu_ && run_relu_epilogue(in, out)) return;
    GradModeGuard no_grad(false);  // separate kernels: plain computations, never on the tape
    const Tensor h = mm(in[0], in[1]);
    auto [dh, db] = gelu_ ? gelu_tanh_backward_bias_grad(h, in[2]) : relu_backward_bias_grad(h, in[2]);
    store(out, dh, db);
  }
  // Both results are linear in g @ w through the activation's derivative A: with t = A * (dh + db
  // spread over rows), g gets t @ w^T and w gets g^T @ t; the GELU's input gets t's share of A'.
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    const Tensor g = ctx.input(0), w = ctx.input(1), act = ctx.input(2);
    Tensor total = grads[0];
    if (grads[1].defined()) {
      const Tensor spread = grads[1].expand({g.size(0), w.size(1)});
      total = total.defined() ? total + spread : spread;
    }
    TensorList r(gelu_ ? 3 : 4);
    if (!total.defined()) return r;
    const Tensor t = gelu_ ? gelu_backward(total, act, true) : threshold_backward(total, act);
    if (ctx.needs_input_grad(0)) r[0] = mm(t, w.t());
    if (ctx.needs_input_grad(1)) r[1] = mm(g.t(), t);
    if (gelu_ && ctx.needs_input_grad(2)) r[2] = total * mm(g, w) * gelu_second_derivative(act, true);
    return r;
  }
  bool needs_zero_filled_grads() const override { return false; }

 private:
  // The product and the ReLU gradient with its bias sums as one cuBLASLt kernel (DRELU_BGRAD), reading
  // the forward's mask; false when cuBLASLt cannot.
  bool run_relu_epilogue(const TensorList& in, TensorList& out) const {
#ifdef TG_WITH_CUDA
    if (!out[0].is_cuda()) return false;
    Tensor keep_a, keep_b;
    const int64_t n = in[0].size(0), k = in[0].size(1), m = in[1].size(1);
    const Gemm g = gemm_2d_plan(out[0], n, m, k, in[0], false, in[1], false, 1.0, keep_a, keep_b);
    const Tensor mask = in[3].contiguous();
    const cuda::LtArgs args{.epilogue = cuda::LtEpilogue::ReluGrad,
                            .bias_grad = out[1].raw_data(),
                            .aux = mask.raw_data(),
                            .aux_ld = relu_mask_row_bits(m)};
    return cuda::gemm_lt(g, args);
#else
    (void)in, (void)out;
    return false;
#endif
  }

  bool gelu_;
};

// (g^T @ x, g summed over rows): inputs {g [n, out], x [n, in]}.
class LinearWeightBiasGradOp final : public Op {
 public:
  const OpSchema& schema() const override {
    static const OpSchema s{.name = "linear_weight_bias_grad", .flags = kComputeIntensive};
    return s;
  }
  std::vector<TensorMeta> infer(const TensorList& in) const override {
    const char* op = "linear_weight_bias_grad";
    TG_CHECK(in.size() == 2u, "[", op, "] expected 2 inputs, got ", in.size());
    check_float_matrix(op, "output gradient", in[0], 2);
    check_float_matrix(op, "input", in[1], 2);
    check_same_dtype(op, "output gradient", in[0], "input", in[1]);
    TG_CHECK(in[0].size(0) == in[1].size(0), "[", op, "] output gradient of shape ", shape_str(in[0].sizes()),
             " and input of shape ", shape_str(in[1].sizes()), ": expected the same number of rows");
    const Device dev = common_device(op, in);
    std::vector<TensorMeta> metas;
    metas.push_back(contiguous_meta({in[0].size(1), in[1].size(1)}, in[0].dtype(), dev));
    metas.push_back(contiguous_meta({in[0].size(1)}, in[0].dtype(), dev));
    return metas;
  }
  void eval(const TensorList& in, TensorList& out) const override {
    const Tensor& g = in[0];
    const Tensor& x = in[1];
    const int64_t rows = g.size(1), cols = x.size(1), k = g.size(0);
#ifdef TG_WITH_CUDA
    if (out[0].is_cuda()) {
      Tensor keep_a, keep_b;
      const Gemm p = gemm_2d_plan(out[0], rows, cols, k, g, true, x, false, 1.0, keep_a, keep_b);
      if (cuda::gemm_lt(p, cuda::LtArgs{.epilogue = cuda::LtEpilogue::RowSumsOfA, .bias_grad = out[1].raw_data()}))
        return;
    }
#endif
    gemm_2d(out[0], rows, cols, k, g, true, x, false, 1.0, nullptr, 0.0);
    GradModeGuard no_grad(false);
    Tensor db = out[1];
    db.copy_(sum_to(g, {rows}));
  }
  // <gw, g^T x> + <gb, 1^T g>: g gets x @ gw^T + gb on every row, x gets g @ gw.
  TensorList backward(const BackwardContext& ctx, const TensorList& grads) const override {
    const Tensor g = ctx.input(0), x = ctx.input(1);
    TensorList r(2);
    if (ctx.needs_input_grad(0)) {
      Tensor dg = grads[0].defined() ? mm(x, grads[0].t()) : Tensor();
      if (grads[1].defined()) {
        const Tensor spread = grads[1].expand(g.sizes());
        dg = dg.defined() ? dg + spread : spread;
      }
      r[0] = dg;
    }
    if (ctx.needs_input_grad(1) && grads[0].defined()) r[1] = mm(g, grads[0]);
    return r;
  }
  bool needs_zero_filled_grads() const override { return false; }
};

}  // namespace

std::pair<Tensor, Tensor> mm_relu_backward_bias_grad(const Tensor& g, const Tensor& w, const Tensor& y,
                                                     const Tensor& mask) {
  TensorList out = dispatch(mm_relu_backward_bias_grad_op(), {g, w, y, mask});
  return {out[0], out[1]};
}

std::pair<Tensor, Tensor> mm_gelu_tanh_backward_bias_grad(const Tensor& g, const Tensor& w, const Tensor& pre) {
  TensorList out = dispatch(mm_gelu_tanh_backward_bias_grad_op(), {g, w, pre});
  return {out[0], out[1]};
}

std::pair<Tensor, Tensor> linear_weight_bias_grad(const Tensor& g, const Tensor& x) {
  TensorList out = dispatch(linear_weight_bias_grad_op(), {g, x});
  return {out[0], out[1]};
}

OpPtr mm_relu_backward_bias_grad_op() {
  static const OpPtr op = std::make_shared<const MmActivationGradOp>(false);
  return op;
}

OpPtr mm_gelu_tanh_backward_bias_grad_op() {
  static const OpPtr op = std::make_shared<const MmActivationGradOp>(true);
  return op;
}

OpPtr linear_weight_bias_grad_op() {
  static const OpPtr op = std::make_shared<const LinearWeightBiasGradOp>();
  return op;
}

}  // namespace tg
