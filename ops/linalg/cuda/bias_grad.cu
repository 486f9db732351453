// The fused ReLU and tanh-GELU backwards with their bias gradients on CUDA (ops/linalg/cuda/bias_grad.h).
#include "ops/linalg/cuda/bias_grad.h"

#include "ops/core/cuda/aligned_vector.cuh"
#include "ops/elementwise/elementwise_math.h"
#include "ops/reduce/cuda/column_sum.cuh"

namespace tg::cuda {
namespace {

template <typename T>
__global__ void relu_backward_bias_grad_kernel(const T* __restrict__ g, const T* __restrict__ y, T* __restrict__ h,
                                               int64_t rows, int64_t cols, int64_t chunk_rows,
                                               detail::ValueStore<T> db, acc_type<T>* partial) {
  using Acc = acc_type<T>;  // 16-bit gradients sum in float
  sum_block_columns<Acc>(
      rows, cols, chunk_rows,
      [&](int64_t at) {
        const T v = y[at] > T(0) ? g[at] : T(0);
        h[at] = v;
        return static_cast<Acc>(v);
      },
      db, partial);
}

// h = gelu_backward(g, x) (tanh form, the elementwise kernel's functor: the same bits) and its
// column sums, as they were rounded to T. VEC > 1: rows of 16-byte aligned vectors.
template <typename T, int VEC>
__global__ void gelu_tanh_backward_bias_grad_kernel(const T* __restrict__ g, const T* __restrict__ x,
                                                    T* __restrict__ h, int64_t rows, int64_t cols, int64_t chunk_rows,
                                                    detail::ValueStore<T> db, acc_type<T>* partial) {
  using Acc = acc_type<T>;
  const ew::GeluTanhBackwardFn<T> grad;
  if constexpr (VEC == 1) {
    sum_block_columns<Acc>(
        rows, cols, chunk_rows,
        [&](int64_t at) {
          const T v = grad(g[at], x[at]);
          h[at] = v;
          return static_cast<Acc>(v);
        },
        db, partial);
  } else {
    using Vec = AlignedVector<T, VEC>;
    sum_block_column_packs<Acc, VEC>(
        rows, cols, chunk_rows,
        [&](int64_t at, Acc(&sums)[VEC]) {
          const Vec gv = *reinterpret_cast<const Vec*>(g + at), xv = *reinterpret_cast<const Vec*>(x + at);
          Vec hv;
#pragma unroll
          for (int k = 0; k < VEC; ++k) {
            hv.v[k] = grad(gv.v[k], xv.v[k]);
            sums[k] = static_cast<Acc>(hv.v[k]);
          }
          *reinterpret_cast<Vec*>(h + at) = hv;
        },
        db, partial);
  }
}

}  // namespace

void gelu_tanh_backward_bias_grad(const Tensor& g, const Tensor& x, Tensor& h, Tensor& db) {
  const int64_t cols = db.numel();
  if (cols == 0) return;
  const int64_t rows = g.numel() / cols;
  TG_DISPATCH_FLOATING(g.dtype(), "gelu_backward_bias_grad", [&] {
    using Acc = acc_type<scalar_t>;
    const detail::ValueStore<scalar_t> store{db.data_ptr<scalar_t>(), Acc(1), false};
    constexpr int kVec = std::min<int>(8, static_cast<int>(16 / sizeof(scalar_t)));
    const bool vectors = cols % kVec == 0 && aligned_16(g.raw_data()) && aligned_16(x.raw_data()) &&
                         aligned_16(h.raw_data());
    run_column_sum<Acc>(
        rows, cols, g.device(), store,
        [&](dim3 grid, dim3 block, int64_t chunk_rows, Acc* partial) {
          auto* kernel = vectors ? gelu_tanh_backward_bias_grad_kernel<scalar_t, kVec>
                                 : gelu_tanh_backward_bias_grad_kernel<scalar_t, 1>;
          kernel<<<grid, block, 0, current_stream()>>>(g.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(),
                                                       h.data_ptr<scalar_t>(), rows, cols, chunk_rows, store, partial);
        },
        vectors ? kVec : 1);
  });
}

void relu_backward_bias_grad(const Tensor& g, const Tensor& y, Tensor& h, Tensor& db) {
  const int64_t cols = db.numel();
  if (cols == 0) return;
  const int64_t rows = g.numel() / cols;
  TG_DISPATCH_FLOATING(g.dtype(), "relu_backward_bias_grad", [&] {
    using Acc = acc_type<scalar_t>;
    const detail::ValueStore<scalar_t> store{db.data_ptr<scalar_t>(), Acc(1), false};
    run_column_sum<Acc>(rows, cols, g.device(), store, [&](dim3 grid, dim3 block, int64_t chunk_rows, Acc* partial) {
      relu_backward_bias_grad_kernel<scalar_t><<<grid, block, 0, current_stream()>>>(
          g.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), h.data_ptr<scalar_t>(), rows, cols, chunk_rows, store,
          partial);
    });
  });
}

}  // namespace tg::cuda
