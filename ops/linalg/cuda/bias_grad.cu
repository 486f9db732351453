// The fused ReLU backward and its bias gradient on CUDA (ops/linalg/cuda/bias_grad.h).
#include "ops/linalg/cuda/bias_grad.h"

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

}  // namespace

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
