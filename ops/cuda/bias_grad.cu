#include "ops/cuda/bias_grad.h"

#include "tensor/cuda/cuda_check.h"

namespace tg::cuda {
namespace {

constexpr int kColumns = 32;  // columns per block (one warp wide: coalesced rows)
constexpr int kRowGroups = 32;  // threads down each column (a 1024-thread block); partial sums added in a fixed order

template <typename T>
__global__ void relu_backward_bias_grad_kernel(const T* __restrict__ g, const T* __restrict__ y, T* __restrict__ h,
                                               T* __restrict__ db, int64_t rows, int64_t cols) {
  using Acc = acc_type<T>;  // 16-bit gradients sum in float
  __shared__ Acc partial[kRowGroups][kColumns];
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kColumns + threadIdx.x;
  Acc sum = 0;
  if (j < cols) {
    for (int64_t i = threadIdx.y; i < rows; i += kRowGroups) {
      const int64_t at = i * cols + j;
      const T v = y[at] > T(0) ? g[at] : T(0);
      h[at] = v;
      sum += v;
    }
  }
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && j < cols) {
    Acc total = 0;
    for (int r = 0; r < kRowGroups; ++r) total += partial[r][threadIdx.x];
    db[j] = total;
  }
}

}  // namespace

void relu_backward_bias_grad(const Tensor& g, const Tensor& y, Tensor& h, Tensor& db) {
  const int64_t cols = db.numel();
  if (cols == 0) return;
  const int64_t rows = g.numel() / cols;
  const dim3 threads(kColumns, kRowGroups);
  const unsigned blocks = blocks_for(cols, kColumns);
  TG_DISPATCH_FLOATING(g.dtype(), "relu_backward_bias_grad", [&] {
    relu_backward_bias_grad_kernel<scalar_t><<<blocks, threads, 0, current_stream()>>>(
        g.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), h.data_ptr<scalar_t>(), db.data_ptr<scalar_t>(), rows, cols);
  });
  TG_CUDA_CHECK_LAUNCH();
}

}  // namespace tg::cuda
