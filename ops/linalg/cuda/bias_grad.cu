#include "ops/linalg/cuda/bias_grad.h"

#include "ops/reduce/cuda/column_sum.cuh"

namespace tg::cuda {
namespace {

template <typename T>
__global__ void relu_backward_bias_grad_kernel(const T* __restrict__ g, const T* __restrict__ y, T* __restrict__ h,
                                               T* __restrict__ db, int64_t rows, int64_t cols) {
  using Acc = acc_type<T>;  // 16-bit gradients sum in float
  sum_block_columns<Acc>(
      rows, cols,
      [&](int64_t at) {
        const T v = y[at] > T(0) ? g[at] : T(0);
        h[at] = v;
        return static_cast<Acc>(v);
      },
      [&](int64_t j, Acc total) { db[j] = static_cast<T>(total); });
}

}  // namespace

void relu_backward_bias_grad(const Tensor& g, const Tensor& y, Tensor& h, Tensor& db) {
  const int64_t cols = db.numel();
  if (cols == 0) return;
  const int64_t rows = g.numel() / cols;
  TG_DISPATCH_FLOATING(g.dtype(), "relu_backward_bias_grad", [&] {
    relu_backward_bias_grad_kernel<scalar_t><<<column_sum_blocks(cols), column_sum_threads(), 0, current_stream()>>>(
        g.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), h.data_ptr<scalar_t>(), db.data_ptr<scalar_t>(), rows, cols);
  });
  TG_CUDA_CHECK_LAUNCH();
}

}  // namespace tg::cuda
