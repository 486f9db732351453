// Matrix products on the CPU through Eigen maps over the tensors' own memory (no copies: the
// operands' layouts were already resolved to row- or column-major with a leading dimension).
#include <Eigen/Core>

#include <cstring>

#include "ops/gemm.h"

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

}  // namespace

void cpu_gemm(const Gemm& g) {
  TG_CHECK(g.beta == 0.0 || g.beta == 1.0, "[gemm] internal error: beta must be 0 or 1, got ", g.beta);
  TG_DISPATCH_FLOATING(g.dtype, "mm", [&] { eigen_gemm_typed<scalar_t>(g); });
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
