// Matrix products on the CPU over the tensors' own memory (no copies: the operands' layouts were
// already resolved to row- or column-major with a leading dimension). Larger float32 products go to
// oneDNN when it was found at build time (ops/linalg/cpu/onednn_gemm.h); float32/float64 otherwise to
// OpenBLAS when it was found (opened with the kernels for the running CPU, so a
// portable build still uses AVX2/AVX-512 where present: ops/linalg/cpu/openblas.h); Eigen maps serve the
// rest. 16-bit floats are widened to float, multiplied, and rounded once.
#include <Eigen/Core>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "ops/core/cpu/threads.h"
#include "ops/linalg/gemm.h"

#include "ops/linalg/cpu/onednn_gemm.h"
#include "ops/linalg/cpu/openblas.h"

namespace tg {
namespace {

template <typename T, int Order>
using ConstMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Order>, Eigen::Unaligned,
                            Eigen::OuterStride<>>;
template <typename T>
using OutMap = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, Eigen::Unaligned,
                          Eigen::OuterStride<>>;

template <typename T, int OrderA, int OrderB>
void eigen_gemm(const Gemm& g) {
  const T* pa = static_cast<const T*>(g.a.data);
  const T* pb = static_cast<const T*>(g.b.data);
  T* pc = static_cast<T*>(g.out);
  const T alpha = static_cast<T>(g.alpha);
  for (int64_t i = 0; i < g.batch; ++i) {
    ConstMap<T, OrderA> a(pa + i * g.a.batch_stride, g.n, g.k, Eigen::OuterStride<>(g.a.ld));
    ConstMap<T, OrderB> b(pb + i * g.b.batch_stride, g.k, g.m, Eigen::OuterStride<>(g.b.ld));
    OutMap<T> c(pc + i * g.out_batch_stride, g.n, g.m, Eigen::OuterStride<>(g.ldc));
    if (g.beta != 0.0) {
      c.noalias() += alpha * a * b;
    } else if (g.alpha == 1.0) {
      c.noalias() = a * b;
    } else {
      c.noalias() = alpha * a * b;
    }
  }
}

template <typename T>
void eigen_gemm_typed(const Gemm& g) {
  constexpr int R = Eigen::RowMajor, C = Eigen::ColMajor;
  if (!g.a.trans && !g.b.trans) return eigen_gemm<T, R, R>(g);
  if (!g.a.trans && g.b.trans) return eigen_gemm<T, R, C>(g);
  if (g.a.trans && !g.b.trans) return eigen_gemm<T, C, R>(g);
  return eigen_gemm<T, C, C>(g);
}

#ifdef TG_WITH_CBLAS
// C[n, m] = alpha * A[n, k] @ B[k, m] (+ C when beta is 1), row-major, per matrix of the batch.
template <typename T>
void blas_gemm(const cpu::OpenBlas& blas, const Gemm& g) {
  cpu::apply_thread_setting_once();
  const T* pa = static_cast<const T*>(g.a.data);
  const T* pb = static_cast<const T*>(g.b.data);
  T* pc = static_cast<T*>(g.out);
  const CBLAS_TRANSPOSE ta = g.a.trans ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = g.b.trans ? CblasTrans : CblasNoTrans;
  const auto n = static_cast<blasint>(g.n), m = static_cast<blasint>(g.m), k = static_cast<blasint>(g.k);
  const auto lda = static_cast<blasint>(g.a.ld), ldb = static_cast<blasint>(g.b.ld), ldc = static_cast<blasint>(g.ldc);
  for (int64_t i = 0; i < g.batch; ++i) {
    const T* a = pa + i * g.a.batch_stride;
    const T* b = pb + i * g.b.batch_stride;
    T* c = pc + i * g.out_batch_stride;
    if constexpr (std::is_same_v<T, float>) {
      blas.sgemm(CblasRowMajor, ta, tb, n, m, k, static_cast<float>(g.alpha), a, lda, b, ldb,
                  static_cast<float>(g.beta), c, ldc);
    } else {
      blas.dgemm(CblasRowMajor, ta, tb, n, m, k, g.alpha, a, lda, b, ldb, g.beta, c, ldc);
    }
  }
}

// BLAS takes 32-bit sizes and rejects leading dimensions below the row length (even when a
// dimension is 1); Eigen takes what it does not.
bool blas_accepts(const Gemm& g) {
  constexpr int64_t kMax = INT32_MAX;
  const int64_t a_cols = g.a.trans ? g.n : g.k, b_cols = g.b.trans ? g.k : g.m;
  return g.n > 0 && g.m > 0 && g.k > 0 && g.a.ld >= a_cols && g.b.ld >= b_cols && g.ldc >= g.m &&
         g.n <= kMax && g.m <= kMax && g.k <= kMax && g.a.ld <= kMax && g.b.ld <= kMax && g.ldc <= kMax;
}
#endif

// A float32 or float64 product: OpenBLAS where it takes the operands, Eigen otherwise.
template <typename T>
void blas_or_eigen_gemm(const Gemm& g) {
#ifdef TG_WITH_CBLAS
  const cpu::OpenBlas* blas = cpu::openblas();
  if (blas != nullptr && blas_accepts(g)) return blas_gemm<T>(*blas, g);
#endif
  eigen_gemm_typed<T>(g);
}

// Elements an operand's matrices span: the last element of the last matrix's last row ends it (a
// row may end before its leading dimension does, where the operand is a view into a wider tensor).
int64_t operand_span(int64_t batch, int64_t batch_stride, int64_t rows, int64_t cols, int64_t ld) {
  if (rows == 0 || cols == 0) return 0;  // an empty inner dimension: nothing is read
  return (batch - 1) * batch_stride + (rows - 1) * ld + cols;
}

// Copies `count` elements of T into a float buffer.
template <typename T>
std::vector<float> to_float_buffer(const void* data, int64_t count) {
  const T* p = static_cast<const T*>(data);
  std::vector<float> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) out[static_cast<size_t>(i)] = static_cast<float>(p[i]);
  return out;
}

// A product of 16-bit floats: operands widened to float, multiplied and accumulated in float
// (as the GPU's tensor cores do), the result rounded once.
template <typename T>
void widened_gemm(const Gemm& g, void (*float_gemm)(const Gemm&)) {
  Gemm w = g;
  w.dtype = kFloat32;
  const int64_t a_span = operand_span(g.batch, g.a.batch_stride, g.a.trans ? g.k : g.n, g.a.trans ? g.n : g.k, g.a.ld);
  const int64_t b_span = operand_span(g.batch, g.b.batch_stride, g.b.trans ? g.m : g.k, g.b.trans ? g.k : g.m, g.b.ld);
  const int64_t c_span = operand_span(g.batch, g.out_batch_stride, g.n, g.m, g.ldc);
  const std::vector<float> a = to_float_buffer<T>(g.a.data, a_span), b = to_float_buffer<T>(g.b.data, b_span);
  w.a.data = a.data();
  w.b.data = b.data();
  w.float32_out = false;
  if (g.float32_out) {  // the float32 output is written (or accumulated into) in place
    float_gemm(w);
    return;
  }
  std::vector<float> c = g.beta != 0.0 ? to_float_buffer<T>(g.out, c_span) : std::vector<float>(static_cast<size_t>(c_span));
  w.out = c.data();
  float_gemm(w);
  // Only the product's own elements go back: gaps between rows may belong to other tensors.
  T* out = static_cast<T*>(g.out);
  for (int64_t i = 0; i < g.batch; ++i)
    for (int64_t r = 0; r < g.n; ++r) {
      const int64_t row = i * g.out_batch_stride + r * g.ldc;
      for (int64_t j = 0; j < g.m; ++j) out[row + j] = c[static_cast<size_t>(row + j)];
    }
}

}  // namespace

void cpu_gemm(const Gemm& g) {
  TG_CHECK(g.beta == 0.0 || g.beta == 1.0, "[gemm] internal error: beta must be 0 or 1, got ", g.beta);
  if (g.n == 0 || g.m == 0 || g.batch == 0) return;
  if (g.dtype == kFloat16) return widened_gemm<Half>(g, cpu_gemm);
  if (g.dtype == kBFloat16) return widened_gemm<BFloat16>(g, cpu_gemm);
  if (cpu::onednn_sgemm(g)) return;
  // Only float32 and float64 products get here (16-bit ones were widened above): instantiating
  // Eigen's products for other dtypes would only cost build time.
  switch (g.dtype) {
    case DType::Float32: return blas_or_eigen_gemm<float>(g);
    case DType::Float64: return blas_or_eigen_gemm<double>(g);
    default: TG_FAIL("[mm] expected a floating dtype, got ", dtype_name(g.dtype));
  }
}

void cpu_fill_bias(DType dtype, void* out, int64_t n, int64_t m, const BiasRef& bias, double beta) {
  if (bias.data == nullptr) {
    std::memset(out, 0, static_cast<size_t>(n * m * dtype_size(dtype)));
    return;
  }
  TG_DISPATCH_FLOATING(dtype, "addmm", [&] {
    scalar_t* o = static_cast<scalar_t*>(out);
    const scalar_t* b = static_cast<const scalar_t*>(bias.data);
    const scalar_t scale = static_cast<scalar_t>(beta);
    for (int64_t i = 0; i < n; ++i) {
      const scalar_t* row = b + i * bias.s0;
      scalar_t* dst = o + i * m;
      if (scale == scalar_t(1)) {
        for (int64_t j = 0; j < m; ++j) dst[j] = row[j * bias.s1];
      } else {
        for (int64_t j = 0; j < m; ++j) dst[j] = scale * row[j * bias.s1];
      }
    }
  });
}

}  // namespace tg
