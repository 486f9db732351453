// Kernels and checks shared by the matrix-product ops (ops/linalg/matmul.cpp, ops/linalg/linear.cpp,
// ops/linalg/linear_grad.cpp).
#include "ops/linalg/matmul_kernels.h"

#include "ops/core/dispatch.h"
#include "ops/elementwise/unary.h"
#include "ops/linalg/gemm.h"
#include "ops/linalg/matmul.h"
#include "ops/shape/view.h"

#ifdef TG_WITH_CUDA
#include "ops/linalg/cuda/blas.h"
#include "ops/linalg/cuda/matmul.h"
#endif

namespace tg {

namespace {

std::string mat_str(const Tensor& t) { return std::to_string(t.size(0)) + "x" + std::to_string(t.size(1)); }

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

}  // namespace

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

void check_bias_device(const char* op, const Tensor& bias, Device device) {
  TG_CHECK(bias.device() == device, "[", op, "] expected all tensors to be on the same device, but found at least "
           "two devices, ", device.str(), " and ", bias.device().str(), "!");
}

Device check_mm(const char* op, const Tensor& a, const Tensor& b) {
  check_float_matrix(op, "mat1", a, 2);
  check_float_matrix(op, "mat2", b, 2);
  check_same_dtype(op, "mat1", a, "mat2", b);
  const Device dev = common_device(op, {a, b});
  TG_CHECK(a.size(1) == b.size(0), "[", op, "] mat1 and mat2 shapes cannot be multiplied (", mat_str(a), " and ",
           mat_str(b), ")");
  return dev;
}

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
  TG_CHECK(!g.float32_out || dtype_size(g.dtype) == 2, "[mm] internal error: a float32 output is for 16-bit operands, got ",
           dtype_name(g.dtype));
  if (g.device.is_cuda()) {
#ifdef TG_WITH_CUDA
    cuda::gemm(g);
    return;
#endif
  }
  cpu_gemm(g);
}

Gemm gemm_2d_plan(const Tensor& out, int64_t n, int64_t m, int64_t k, const Tensor& a, bool trans_a, const Tensor& b,
                  bool trans_b, double alpha, Tensor& keep_a, Tensor& keep_b) {
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
  return g;
}

void gemm_2d(const Tensor& out, int64_t n, int64_t m, int64_t k, const Tensor& a, bool trans_a, const Tensor& b,
             bool trans_b, double alpha, const BiasRef* bias, double beta, bool relu) {
  const bool with_bias = bias != nullptr && beta != 0.0;
  if (k == 0) {
    fill_bias(out, n, m, with_bias ? *bias : BiasRef{}, beta);
    if (relu) relu_in_place(out);
    return;
  }
  Tensor keep_a, keep_b;
  Gemm g = gemm_2d_plan(out, n, m, k, a, trans_a, b, trans_b, alpha, keep_a, keep_b);
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

bool column_major(const TensorMeta& m) {
  return m.sizes.size() == 2 && m.sizes[0] > 1 && m.sizes[1] > 1 && m.strides[0] == 1 && m.strides[1] >= m.sizes[0];
}

Tensor mat1_grad(const Tensor& g, const Tensor& b, const TensorMeta& a_meta) {
  if (column_major(a_meta)) return t(mm(b, t(g)));
  return mm(g, t(b));
}

Tensor mat2_grad(const Tensor& g, const Tensor& a, const TensorMeta& b_meta) {
  if (column_major(b_meta)) return t(mm(t(g), a));
  return mm(t(a), g);
}

}  // namespace tg
