// The fused ReLU and tanh-GELU backwards with their bias gradients on CUDA (ops/linalg/cuda/bias_grad.h).
#include "ops/linalg/cuda/bias_grad.h"

#include <algorithm>

#include "ops/core/cuda/aligned_vector.cuh"
#include "ops/elementwise/elementwise_math.h"
#include "ops/reduce/cuda/column_sum.cuh"

namespace tg::cuda {
namespace {

// h = grad(g, a) elementwise (a: the activation's saved input or output) and the column sums of h as
// rounded to T. VEC > 1: rows of 16-byte aligned vectors, VEC adjacent columns per thread (the same
// rows per column, in the same order, as VEC = 1: the same sums).
template <typename T, int VEC, typename Grad>
__global__ void activation_backward_bias_grad_kernel(const T* __restrict__ g, const T* __restrict__ a,
                                                     T* __restrict__ h, int64_t rows, int64_t cols,
                                                     int64_t chunk_rows, detail::ValueStore<T> db,
                                                     acc_type<T>* partial) {
  using Acc = acc_type<T>;  // 16-bit gradients sum in float
  const Grad grad;
  if constexpr (VEC == 1) {
    sum_block_columns<Acc>(
        rows, cols, chunk_rows,
        [&](int64_t at) {
          const T v = grad(g[at], a[at]);
          h[at] = v;
          return static_cast<Acc>(v);
        },
        db, partial);
  } else {
    using Vec = AlignedVector<T, VEC>;
    sum_block_column_packs<Acc, VEC>(
        rows, cols, chunk_rows,
        [&](int64_t at, Acc(&sums)[VEC]) {
          const Vec gv = *reinterpret_cast<const Vec*>(g + at), av = *reinterpret_cast<const Vec*>(a + at);
          Vec hv;
#pragma unroll
          for (int k = 0; k < VEC; ++k) {
            hv.v[k] = grad(gv.v[k], av.v[k]);
            sums[k] = static_cast<Acc>(hv.v[k]);
          }
          *reinterpret_cast<Vec*>(h + at) = hv;
        },
        db, partial);
  }
}

// Launches activation_backward_bias_grad_kernel over contiguous [rows, cols] g, a, h and db [cols].
template <template <typename> class Grad>
void activation_backward_bias_grad(const char* name, const Tensor& g, const Tensor& a, Tensor& h, Tensor& db) {
  const int64_t cols = db.numel();
  if (cols == 0) return;
  const int64_t rows = g.numel() / cols;
  TG_DISPATCH_FLOATING(g.dtype(), name, [&] {
    using Acc = acc_type<scalar_t>;
    const detail::ValueStore<scalar_t> store{db.data_ptr<scalar_t>(), Acc(1), false};
    constexpr int kVec = std::min<int>(8, static_cast<int>(16 / sizeof(scalar_t)));
    const bool vectors = cols % kVec == 0 && aligned_16(g.raw_data()) && aligned_16(a.raw_data()) &&
                         aligned_16(h.raw_data());
    run_column_sum<Acc>(
        rows, cols, g.device(), store,
        [&](dim3 grid, dim3 block, int64_t chunk_rows, Acc* partial) {
          auto* kernel = vectors ? activation_backward_bias_grad_kernel<scalar_t, kVec, Grad<scalar_t>>
                                 : activation_backward_bias_grad_kernel<scalar_t, 1, Grad<scalar_t>>;
          kernel<<<grid, block, 0, current_stream()>>>(g.data_ptr<scalar_t>(), a.data_ptr<scalar_t>(),
                                                       h.data_ptr<scalar_t>(), rows, cols, chunk_rows, store, partial);
        },
        vectors ? kVec : 1);
  });
}

}  // namespace

void gelu_tanh_backward_bias_grad(const Tensor& g, const Tensor& x, Tensor& h, Tensor& db) {
  // The elementwise kernel's functor: the same bits as gelu_backward.
  activation_backward_bias_grad<ew::GeluTanhBackwardFn>("gelu_backward_bias_grad", g, x, h, db);
}

void relu_backward_bias_grad(const Tensor& g, const Tensor& y, Tensor& h, Tensor& db) {
  // threshold_backward's functor (g where the ReLU's output y > 0): the same bits.
  activation_backward_bias_grad<ew::ThresholdBackwardFn>("relu_backward_bias_grad", g, y, h, db);
}

}  // namespace tg::cuda
